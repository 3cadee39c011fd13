#include "harness/config_store.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "base/file_util.h"
#include "base/text.h"

namespace tmx {

std::string BuiltinConfigDir() {
  if (const char* env = std::getenv("TUNE_MATRIX_CONFIG_DIR"); env != nullptr && *env) return env;
  return CheckoutConfigDir();
}

std::string CheckoutConfigDir() {
  std::string exe_dir = ExecutableDir();
  for (const char* rel : {"/../../configs", "/../configs"}) {
    std::string candidate = exe_dir + rel;
    if (!exe_dir.empty() && IsDirectory(candidate)) {
      char real[PATH_MAX];
      if (::realpath(candidate.c_str(), real) != nullptr) return real;
    }
  }
  return std::string(TM_DEFAULT_CONFIG_DIR);
}

std::string DatasetRoot() {
  const char* env = std::getenv("TUNE_MATRIX_DATA");
  if (env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.cache/tune-matrix/datasets";
}

std::string BuiltinConfigPath(const std::string& name) { return BuiltinConfigDir() + "/" + name + ".yaml"; }

StatusOr<LocatedConfig> LocateConfig(const std::string& name_or_path, const Registry& registry,
                                     const RecipeSpec* preferred) {
  LocatedConfig located;
  std::vector<const RecipeSpec*> order;
  if (preferred != nullptr) order.push_back(preferred);
  for (const RecipeSpec& r : registry.recipes()) order.push_back(&r);
  std::vector<std::string> all_names;
  for (const RecipeSpec* r : order) {
    for (const std::string& c : r->configs) {
      all_names.push_back(c);
      if (c == name_or_path) {
        located.name = c;
        located.path = BuiltinConfigPath(c);
        located.builtin = true;
        located.recipe = r;
        if (!IsRegularFile(located.path)) {
          return Status::NotFound("built-in config '" + c + "' is registered but " + located.path +
                                  " is missing; restore it from the repository");
        }
        return located;
      }
    }
  }
  if (IsRegularFile(name_or_path)) {
    located.name = name_or_path;
    located.path = name_or_path;
    return located;
  }
  std::string hint = ClosestMatch(name_or_path, all_names);
  return Status::NotFound("config '" + name_or_path + "' is neither a built-in config nor a file" +
                          (hint.empty() ? "" : "; did you mean '" + hint + "'?") +
                          " (run `tune ls` to list the built-in configs)");
}

StatusOr<Config> LoadResolvedConfig(const LocatedConfig& located, const std::vector<std::string>& overrides,
                                    const RecipeSpec* recipe, const Registry* registry) {
  StatusOr<Config> config = Config::LoadFile(located.path);
  if (!config.ok()) return config.status();
  TM_RETURN_IF_ERROR(config->ApplyOverrides(overrides));
  if (recipe != nullptr && registry != nullptr) TM_RETURN_IF_ERROR(ApplySchemaDefaults(&*config, *recipe, *registry));
  TM_RETURN_IF_ERROR(config->ResolveInterpolations());
  return config;
}

}  // namespace tmx
