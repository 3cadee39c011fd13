#include "matrix/user_configs.h"

#include <algorithm>
#include <map>

#include "base/file_util.h"
#include "base/folder.h"
#include "base/folder_guard.h"
#include "base/input_file.h"
#include "base/text.h"
#include "harness/config_store.h"
#include "harness/torchtune_recipes.h"
#include "matrix/journal.h"

namespace tmx::matrix {
namespace {

std::string WithoutYamlSuffix(const std::string& s) {
  for (const char* suffix : {".yaml", ".yml"}) {
    if (EndsWith(s, suffix)) return s.substr(0, s.size() - std::string(suffix).size());
  }
  return s;
}

// Why `name` cannot name a config's cells and history files ("" when it can).
std::string NameProblem(const std::string& name) {
  if (name.empty()) return "is empty";
  for (const std::string& part : SplitList(name, '/')) {
    if (part.empty() || part == "." || part == "..") return "has an empty, '.' or '..' part";
    for (char c : part) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
        return std::string("has the character '") + c + "'";
      }
    }
  }
  return "";
}

// One file's config, or why it has none: `skip` is set (and the result empty) for a problem that leaves the
// file out of a folder's configs; a file given by itself makes it an error.
StatusOr<UserConfig> ReadUserConfig(const Registry& registry, const std::string& path, const std::string& name,
                                    const std::vector<std::string>& recipes, bool* left_out) {
  *left_out = false;
  const std::string problem = NameProblem(name);
  if (!problem.empty()) {
    return Status::InvalidArgument(path + ": its name '" + name + "' " + problem +
                                   ", and the matrix keeps a history file per config; fix: rename the file to "
                                   "letters, digits, '.', '_' and '-'");
  }
  StatusOr<std::string> text = ReadFile(path, ConfigInput());
  if (!text.ok()) return text.status();
  UserConfig config{name, path, ""};
  RecipeHint hint = RecipeHintForFile(path, *text, registry.RecipeNames());
  if (!hint.recipe.empty()) {
    if (registry.FindRecipe(hint.recipe) == nullptr) {
      return Status::FailedPrecondition(path + ": is for torchtune's recipe '" + hint.recipe + "' (from " +
                                        hint.source + "), which tune-matrix does not implement (implemented: " +
                                        JoinStrings(registry.RecipeNames(), ", ") + ")");
    }
    config.recipe = hint.recipe;
  } else if (recipes.size() == 1) {
    config.recipe = recipes.front();
  } else {
    return Status::FailedPrecondition(
        path + ": names no recipe (no `tune run <recipe>` in its leading comment, and torchtune lists no config "
        "of its name); fix: add a comment line such as `# tune run lora_finetune_single_device --config " +
        WithoutYamlSuffix(path) + "` at its top, or name the recipe with --recipes <recipe>");
  }
  if (!recipes.empty() && std::find(recipes.begin(), recipes.end(), config.recipe) == recipes.end()) {
    *left_out = true;
  }
  return config;
}

}  // namespace

std::vector<std::string> SplitConfigsList(const std::string& list) {
  std::vector<std::string> pieces;  // empty ones too, so a joined path keeps its ",,"
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    pieces.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  std::vector<std::string> items;
  for (size_t i = 0; i < pieces.size();) {
    size_t end = i + 1;  // one past the last piece of the item
    std::string joined = pieces[i];
    for (size_t j = i + 1; j < pieces.size(); ++j) {
      joined += "," + pieces[j];
      if (PathExists(joined)) end = j + 1;
    }
    std::string item = pieces[i];
    for (size_t j = i + 1; j < end; ++j) item += "," + pieces[j];
    if (!item.empty()) items.push_back(item);
    i = end;
  }
  return items;
}

bool IsConfigPath(const std::string& item) {
  return EndsWith(item, ".yaml") || EndsWith(item, ".yml") ||
         (item.find_first_of("*?[") == std::string::npos && IsDirectory(item));
}

StatusOr<std::vector<UserConfig>> ResolveUserConfigs(const Registry& registry, const std::vector<std::string>& items,
                                                     const std::vector<std::string>& recipes,
                                                     std::vector<std::string>* warnings) {
  std::vector<UserConfig> configs;
  std::map<std::string, std::string> paths_by_name;
  auto add = [&](UserConfig config) -> Status {
    auto [it, inserted] = paths_by_name.emplace(config.name, config.path);
    if (!inserted) {
      if (SameFile(it->second, config.path)) return Status::OK();  // one file named twice
      return Status::InvalidArgument("two configs would both be named '" + config.name + "': " + it->second +
                                     " and " + config.path + "; fix: rename one, or run them separately");
    }
    configs.push_back(std::move(config));
    return Status::OK();
  };
  std::vector<std::string> left_out_by_recipe;
  for (const std::string& item : items) {
    bool left_out = false;
    if (!IsDirectory(item)) {
      if (!PathExists(item)) {
        return Status::InvalidArgument("--configs: " + item + ": no such file; fix: check the path (a built-in "
                                       "name has no .yaml: `tune ls` lists them)");
      }
      std::string base = item.substr(item.rfind('/') == std::string::npos ? 0 : item.rfind('/') + 1);
      StatusOr<UserConfig> config = ReadUserConfig(registry, item, WithoutYamlSuffix(base), recipes, &left_out);
      if (!config.ok()) return config.status();
      if (left_out) {
        left_out_by_recipe.push_back(item + " (" + config->recipe + ")");
        continue;
      }
      TM_RETURN_IF_ERROR(add(std::move(config).value()));
      continue;
    }
    std::string folder = item;
    while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
    std::vector<std::string> found, skipped;
    for (const char* suffix : {".yaml", ".yml"}) {
      StatusOr<std::vector<std::string>> files = ListRegularFiles(folder, suffix, &skipped);
      if (!files.ok()) return files.status();
      found.insert(found.end(), files->begin(), files->end());
    }
    std::sort(found.begin(), found.end());
    for (const std::string& s : skipped) warnings->push_back(s + "; left out");
    const std::string prefix = folder == "/" ? folder : folder + "/";
    for (const std::string& path : found) {
      const std::string relative = path.rfind(prefix, 0) == 0 ? path.substr(prefix.size()) : path;
      StatusOr<UserConfig> config = ReadUserConfig(registry, path, WithoutYamlSuffix(relative), recipes, &left_out);
      if (!config.ok()) {
        // A folder may hold configs of recipes tune-matrix lacks (torchtune's whole tree): those are left out.
        if (config.status().code() != Status::Code::kFailedPrecondition) return config.status();
        warnings->push_back(config.status().message() + "; left out");
        continue;
      }
      if (left_out) {
        left_out_by_recipe.push_back(path + " (" + config->recipe + ")");
        continue;
      }
      TM_RETURN_IF_ERROR(add(std::move(config).value()));
    }
  }
  if (configs.empty()) {
    std::string why = left_out_by_recipe.empty()
                          ? "no config file with a recipe tune-matrix implements" +
                                (warnings->empty() ? std::string() : " (see the warnings above)")
                          : "only configs of other recipes than --recipes " + JoinStrings(recipes, ",") + ": " +
                                JoinStrings(left_out_by_recipe, ", ");
    return Status::InvalidArgument("--configs " + JoinStrings(items, ",") + " selects nothing: " + why);
  }
  return configs;
}

Status CheckUserDestinations(const std::string& journal_path, const std::string& reports_dir) {
  // The checkout's configs and reports, where the configs are read from and where the checkout itself keeps them.
  std::vector<GuardedFolder> guarded;
  for (const std::string& configs : {BuiltinConfigDir(), CheckoutConfigDir()}) {
    guarded.push_back({configs, "the built-in configs"});
    guarded.push_back({ParentDir(configs) + "/reports", "the built-in configs' recorded results"});
  }
  const std::string why = "a run of your own configs keeps its records apart from the built-in configs'";
  const std::string fix = "leave the flag out (default " + std::string(kUserResultsDir) + "/) or name another folder";
  for (const std::string& journal : {journal_path, JournalLockPath(journal_path)}) {
    TM_RETURN_IF_ERROR(CheckOutsideGuarded("--journal", journal, guarded, why, fix));
  }
  return CheckOutsideGuarded("--reports-dir", reports_dir, guarded, why, fix);  // its history and reports too
}

}  // namespace tmx::matrix
