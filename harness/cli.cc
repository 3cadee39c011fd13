#include "harness/cli.h"

#include <algorithm>
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

bool ParseArgs(const std::vector<std::string>& args, const std::vector<std::string>& switches,
               const std::vector<std::string>& flags_with_value, ParsedArgs* parsed, std::string* error) {
  auto contains = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      parsed->positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::string value;
    size_t eq = name.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (contains(switches, name) && !inline_value) {
      parsed->flags.emplace_back(name, "");
    } else if (contains(flags_with_value, name)) {
      if (!inline_value) {
        if (i + 1 >= args.size()) {
          *error = "--" + name + " needs a value";
          return false;
        }
        value = args[++i];
      }
      parsed->flags.emplace_back(name, value);
    } else {
      std::vector<std::string> all;
      for (const auto& s : switches) all.push_back(s);
      for (const auto& s : flags_with_value) all.push_back(s);
      std::string hint = ClosestMatch(name, all);
      *error = "unknown option '--" + name + "'" + (hint.empty() ? "" : ", did you mean '--" + hint + "'?");
      return false;
    }
  }
  return true;
}

}  // namespace tmx
