// `tune`: the command line for fine-tuning. All logic lives in harness/tune_cli.cc and the recipes library.
#include <iostream>
#include <string>
#include <vector>

#include "harness/allocator.h"
#include "harness/tune_cli.h"
#include "recipes/builtin.h"
#include "recipes/tokenize_cli.h"

#ifdef TM_WITH_JEMALLOC
// jemalloc's settings for a training process (read by jemalloc itself at start-up; $MALLOC_CONF still wins):
// freed pages are kept for the next step rather than returned to the kernel after 10 s. With steps longer than
// that, the default decay returned them between steps and every step faulted them in again (1B LoRA on the
// CPU: 26 s a step instead of 19 s).
extern "C" {
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}
#endif

int main(int argc, char** argv) {
#ifndef TM_WITH_JEMALLOC
  // Before anything allocates: training reuses its buffers step after step (harness/allocator.h).
  tmx::ConfigureAllocatorForTraining();
#endif
  std::vector<std::string> args(argv + 1, argv + argc);
  const tmx::Registry& registry = tmx::recipes::BuiltinRegistry();
  return tmx::RunTune(registry, args, std::cout, std::cerr, {tmx::recipes::TokenizeSubcommand(registry)});
}
