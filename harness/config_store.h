// Finding configs: built-in names ("llama3_2/1B_lora_single_device") or paths to YAML files.
#pragma once

#include <string>

#include "base/status.h"
#include "harness/registry.h"

namespace tmx {

// The folder of built-in configs: $TUNE_MATRIX_CONFIG_DIR when set, else the checkout's configs/ (found
// from the executable's location, build/bin/../../configs), else the source folder this was built from.
std::string BuiltinConfigDir();

// The checkout's configs/ folder as BuiltinConfigDir finds it without $TUNE_MATRIX_CONFIG_DIR: files that
// ship beside the configs (the datasets under recipes/) are found from here even when the configs are
// taken from elsewhere.
std::string CheckoutConfigDir();

// The folder of the datasets a config names by Hub id: $TUNE_MATRIX_DATA, else
// $HOME/.cache/tune-matrix/datasets. The dataset components read <it>/<hub id>/ (recipes/data/sources.h);
// `tune download --repo-type dataset` writes there.
std::string DatasetRoot();

// "<dir>/<name>.yaml".
std::string BuiltinConfigPath(const std::string& name);

struct LocatedConfig {
  std::string name;   // built-in name, or the path as given
  std::string path;   // file to read
  bool builtin = false;
  const RecipeSpec* recipe = nullptr;  // the recipe listing it, for built-in configs
};

// Looks `name_or_path` up among the built-in configs (of `preferred` first, then all recipes), then as a
// file path. NotFound suggests the nearest built-in name.
StatusOr<LocatedConfig> LocateConfig(const std::string& name_or_path, const Registry& registry,
                                     const RecipeSpec* preferred = nullptr);

// Loads a located config and applies overrides, then (given a recipe and its registry) the schema defaults
// of every key it leaves out, then interpolation. What a recipe reads is this config.
StatusOr<Config> LoadResolvedConfig(const LocatedConfig& located, const std::vector<std::string>& overrides,
                                    const RecipeSpec* recipe = nullptr, const Registry* registry = nullptr);

}  // namespace tmx
