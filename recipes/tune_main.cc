// `tune`: the command line for fine-tuning. All logic lives in harness/tune_cli.cc and the recipes library.
#include <iostream>
#include <string>
#include <vector>

#include "harness/tune_cli.h"
#include "recipes/builtin.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return tmx::RunTune(tmx::recipes::BuiltinRegistry(), args, std::cout, std::cerr);
}
