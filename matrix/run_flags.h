// The flags of `tune-matrix run` and `tune-matrix plan`, one row each: the value it takes, its help, and how
// it sets MatrixOptions. The help prints each default from a default MatrixOptions, so a default is written
// once, in plan.h, and the parser and the help cannot disagree on which flags exist.
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "base/status.h"
#include "harness/cli.h"
#include "harness/registry.h"
#include "matrix/plan.h"

namespace tmx::matrix {

struct RunFlag {
  std::string name;   // without "--"
  std::string value;  // what it takes, as the help shows it ("N", "cpu,cuda:0"); empty for a switch
  // The help, lines separated by '\n'; "{default}" stands for `default_text` of a default MatrixOptions.
  std::string help;
  std::function<std::string(const MatrixOptions&)> default_text;
  // Reads the flag's value (a switch: "") into the options: false with `*error` naming the flag and the fix.
  // Null: read by ParseRunFlags itself (flags that depend on others).
  std::function<bool(const std::string& value, MatrixOptions*, std::string* error)> set;
};

// Every flag of run and plan, in the order the help lists them.
const std::vector<RunFlag>& RunFlags();

// The flags' help: "  --name VALUE" padded to a column, then the help, continued under it.
std::string RunFlagsHelp();

// Reads run's and plan's `args` into `options` (starting from its defaults) and `*write_back`. An
// InvalidArgument names the flag and the fix; `warnings` receives what resolving the user's config files
// warned of.
Status ParseRunFlags(const Registry& registry, const std::vector<std::string>& args, MatrixOptions* options,
                     bool* write_back, std::vector<std::string>* warnings);

// Reads flag text as one number into *value; the whole text must be the number ("0.5s" is not) and an
// integer must fit the type. False, with a message naming `--name`, otherwise.
template <typename T>
bool ParseNumber(const std::string& name, const std::string& text, T* value, std::string* error) {
  size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // Integers must also fit the type (a cast of one that does not is undefined).
  const double low = static_cast<double>(std::numeric_limits<T>::lowest());
  const bool fits = !std::is_integral<T>::value || (number >= low && number < -low && number == std::floor(number));
  if (used == 0 || used != text.size() || !std::isfinite(number) || !fits) {
    *error = "--" + name + " takes " + (std::is_integral<T>::value ? "a whole number" : "a finite number") +
             ", not '" + text + "'";
    return false;
  }
  *value = static_cast<T>(number);
  return true;
}

// ParseNumber of flag `name` when `parsed` has it; true, unchanged, when it does not.
template <typename T>
bool NumberFlag(const ParsedArgs& parsed, const std::string& name, T* value, std::string* error) {
  return !parsed.Has(name) || ParseNumber(name, parsed.Get(name), value, error);
}

}  // namespace tmx::matrix
