#include "harness/cli.h"

#include <algorithm>
#include <cctype>
#include <iomanip>

#include "base/text.h"

namespace tmx {
namespace {

void PrintTable(const std::string& program, const std::string& description, const std::vector<Subcommand>& table,
                std::ostream& out) {
  out << program << ": " << description << "\n\nusage: " << program << " <command> [args]\n\ncommands:\n";
  size_t width = 0;
  for (const Subcommand& c : table) width = std::max(width, c.name.size());
  for (const Subcommand& c : table) {
    out << "  " << std::left << std::setw(static_cast<int>(width) + 2) << c.name << c.summary << "\n";
  }
  out << "\nRun '" << program << " help <command>' for a command's arguments.\n";
}

}  // namespace

int DispatchSubcommand(const std::string& program, const std::string& description,
                       const std::vector<Subcommand>& table, const std::vector<std::string>& args,
                       std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || (args[0] == "help" && args.size() == 1)) {
    PrintTable(program, description, table, args.empty() ? err : out);
    return args.empty() ? kExitUsage : kExitOk;
  }
  std::vector<std::string> names;
  for (const Subcommand& c : table) names.push_back(c.name);
  auto find = [&](const std::string& name) -> const Subcommand* {
    for (const Subcommand& c : table) {
      if (c.name == name) return &c;
    }
    return nullptr;
  };
  auto unknown = [&](const std::string& name) {
    std::string hint = ClosestMatch(name, names);
    err << program << ": unknown command '" << name << "'";
    if (!hint.empty()) err << ", did you mean '" << hint << "'?";
    err << "\nRun '" << program << " --help' for the list of commands.\n";
    return kExitUsage;
  };
  if (args[0] == "help") {
    const Subcommand* c = find(args[1]);
    if (c == nullptr) return unknown(args[1]);
    out << "usage: " << program << " " << c->usage << "\n\n" << c->summary << "\n";
    if (!c->help.empty()) out << "\n" << c->help << "\n";
    return kExitOk;
  }
  const Subcommand* c = find(args[0]);
  if (c == nullptr) return unknown(args[0]);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
      std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
    out << "usage: " << program << " " << c->usage << "\n\n" << c->summary << "\n";
    if (!c->help.empty()) out << "\n" << c->help << "\n";
    return kExitOk;
  }
  return c->run(rest, out, err);
}

bool ParsedArgs::Has(const std::string& name) const {
  for (const auto& f : flags) {
    if (f.first == name) return true;
  }
  return false;
}

std::string ParsedArgs::Get(const std::string& name, const std::string& fallback) const {
  for (const auto& f : flags) {
    if (f.first == name) return f.second;
  }
  return fallback;
}

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// "unknown option '--x'", with the closest known name.
std::string UnknownOption(const std::string& shown, const std::string& name, const std::vector<std::string>& switches,
                          const std::vector<std::string>& flags_with_value) {
  std::vector<std::string> all(switches);
  all.insert(all.end(), flags_with_value.begin(), flags_with_value.end());
  std::string hint = ClosestMatch(name, all);
  return "unknown option '" + shown + "'" + (hint.empty() ? "" : ", did you mean '--" + hint + "'?");
}

// A word that looks like an option but starts with one dash ("-n", "-config"): neither an option nor a
// positional argument anyone means (a negative number, "-1", is positional).
bool LooksLikeShortOption(const std::string& a) {
  return a.size() >= 2 && a[0] == '-' && a[1] != '-' && std::isalpha(static_cast<unsigned char>(a[1]));
}

}  // namespace

bool ParseArgs(const std::vector<std::string>& args, const std::vector<std::string>& switches,
               const std::vector<std::string>& flags_with_value, ParsedArgs* parsed, std::string* error,
               const std::vector<std::string>& repeatable) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (LooksLikeShortOption(a)) {
      *error = UnknownOption(a, a.substr(1), switches, flags_with_value) + " (options start with '--')";
      return false;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      parsed->positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (Contains(switches, name)) {
      if (inline_value) {
        *error = "--" + name + " takes no value (got '" + a + "'); fix: write --" + name + " alone";
        return false;
      }
    } else if (Contains(flags_with_value, name)) {
      if (!inline_value) {
        if (i + 1 >= args.size()) {
          *error = "--" + name + " needs a value";
          return false;
        }
        if (args[i + 1].rfind("--", 0) == 0) {  // the value was left out before the next option
          *error = "--" + name + " needs a value, and the next argument is the option '" + args[i + 1] + "'; fix: --" +
                   name + " <value> (or --" + name + "=<value> for a value that starts with --)";
          return false;
        }
        value = args[++i];
      }
    } else {
      *error = UnknownOption("--" + name, name, switches, flags_with_value);
      return false;
    }
    if (parsed->Has(name) && !Contains(repeatable, name)) {
      const std::string first = parsed->Get(name);
      *error = "--" + name + " is given twice" +
               (Contains(switches, name) ? std::string() : " ('" + first + "' and '" + value + "')") +
               ", and only one would count; fix: give it once";
      return false;
    }
    parsed->flags.emplace_back(name, value);
  }
  return true;
}

}  // namespace tmx
