// The `tune` command line: download, ls, cp, cat, validate, run, devices (and the subcommands a caller adds).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "harness/cli.h"
#include "harness/registry.h"

namespace tmx {

// The subcommand table of `tune`, bound to `registry` (which must outlive the table).
std::vector<Subcommand> TuneSubcommands(const Registry& registry);

// Runs `tune` with `args` (argv without the program name) and returns the process exit status. `extra`:
// subcommands of libraries above the harness (the recipes' `tokenize`), added to the table.
int RunTune(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            const std::vector<Subcommand>& extra = {});

}  // namespace tmx
