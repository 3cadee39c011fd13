// `tune`: the command line for fine-tuning. All logic lives in harness/tune_cli.cc and the recipes library.
#include <iostream>
#include <string>
#include <vector>

#include "harness/allocator.h"
#include "harness/openmp_wait.h"
#include "harness/tune_cli.h"
#include "recipes/builtin.h"
#include "recipes/tokenize_cli.h"

int main(int argc, char** argv) {
  // First of all: `tune run` beside other work may start itself again with OpenMP's passive wait policy.
  tmx::ChooseOpenMpWaitPolicy(argc, argv);
  // Before anything allocates: training reuses its buffers step after step (harness/allocator.h).
  tmx::PrepareTrainingAllocator();
  std::vector<std::string> args(argv + 1, argv + argc);
  const tmx::Registry& registry = tmx::recipes::BuiltinRegistry();
  return tmx::RunTune(registry, args, std::cout, std::cerr, {tmx::recipes::TokenizeSubcommand(registry)});
}
