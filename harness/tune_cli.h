// The `tune` command line: ls, cp, cat, validate, run, devices.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "harness/cli.h"
#include "harness/registry.h"

namespace tmx {

// The subcommand table of `tune`, bound to `registry` (which must outlive the table).
std::vector<Subcommand> TuneSubcommands(const Registry& registry);

// Runs `tune` with `args` (argv without the program name) and returns the process exit status.
int RunTune(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tmx
