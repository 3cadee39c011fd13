// `tune-matrix`: the device-support matrix. All logic lives in the matrix library (matrix_cli.cc).
#include <iostream>
#include <string>
#include <vector>

#include "matrix/matrix_cli.h"
#include "recipes/builtin.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return tmx::matrix::RunTuneMatrix(tmx::recipes::BuiltinRegistry(), args, std::cout, std::cerr);
}
