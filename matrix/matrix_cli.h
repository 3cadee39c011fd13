// The `tune-matrix` command line: run, plan, report.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "harness/registry.h"

namespace tmx::matrix {

// Runs `tune-matrix` with `args` (argv without the program name); returns the exit status.
int RunTuneMatrix(const Registry& registry, const std::vector<std::string>& args, std::ostream& out,
                  std::ostream& err);

}  // namespace tmx::matrix
