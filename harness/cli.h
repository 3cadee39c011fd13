// A table of subcommands with help and did-you-mean, shared by `tune` and `tune-matrix` (ninja's habit).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace tmx {

// Process exit statuses of both programs.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,      // the command ran and something failed (a training run, a matrix cell check)
  kExitUsage = 2,        // bad input: arguments, config, overrides, device
  kExitInterrupted = 130,
};

struct Subcommand {
  std::string name;
  std::string usage;    // "validate <config> [key=value ...]"
  std::string summary;  // one line for the command list
  std::string help;     // a paragraph for `<program> help <name>`
  std::function<int(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)> run;
};

// Dispatches argv[1] to a subcommand; `help`, `--help`, `-h` and no arguments print the table. An unknown
// name prints "unknown command 'x', did you mean 'y'?" and returns kExitUsage.
int DispatchSubcommand(const std::string& program, const std::string& description,
                       const std::vector<Subcommand>& table, const std::vector<std::string>& args,
                       std::ostream& out, std::ostream& err);

// Splits a command's arguments into flags ("--force", "--recipe=x" or "--recipe x" for names in
// `flags_with_value`) and positional words. Returns false with a message naming the word and the fix for an
// argument that matches nothing: an unknown flag, a word with one dash ("-n"; a negative number is positional),
// a switch given a value ("--force=yes"), a flag whose value is missing (at the end, or followed by another
// "--" option: "--journal --fresh" used to take "--fresh" as the journal), and a flag given twice, of which
// only one would count, unless `repeatable` names it (its caller reads every value).
struct ParsedArgs {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> flags;  // name (without --) and value ("" for switches)
  bool Has(const std::string& name) const;
  std::string Get(const std::string& name, const std::string& fallback = "") const;
};
bool ParseArgs(const std::vector<std::string>& args, const std::vector<std::string>& switches,
               const std::vector<std::string>& flags_with_value, ParsedArgs* parsed, std::string* error,
               const std::vector<std::string>& repeatable = {});

}  // namespace tmx
