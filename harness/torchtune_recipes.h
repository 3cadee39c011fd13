// torchtune's recipes, known by name, so that `tune validate` can tell which recipe a torchtune config
// belongs to, and say so when tune-matrix does not have that recipe instead of checking the config against
// a different one.
#pragma once

#include <string>
#include <vector>

namespace tmx {

struct TorchtuneRecipe {
  std::string name;                  // "lora_finetune_distributed"
  bool distributed = false;          // launched with --nproc_per_node
  std::vector<std::string> configs;  // its configs' names, "llama3_2/1B_lora"
};

// The 22 recipes of torchtune's registry (torchtune_recipes_data.cc).
const std::vector<TorchtuneRecipe>& TorchtuneRecipes();

const TorchtuneRecipe* FindTorchtuneRecipe(const std::string& name);

// How a config file says which recipe it is for, and what that recipe is.
struct RecipeHint {
  std::string recipe;  // "" when nothing names one
  std::string source;  // "its comment `tune run full_finetune_distributed ...`", "torchtune's registry"
};

// The recipe a config file is for: the `tune run <recipe> --config <its name>` of its leading comment lines, else
// the first `tune run <recipe>` or "in <recipe>.py" there, else the recipe of torchtune's registry that lists a config named like the file (its folder
// and name, "llama3_2/1B_full" for .../llama3_2/1B_full.yaml). Recipe names found in comments count only when
// they are torchtune's or in `known`.
RecipeHint RecipeHintForFile(const std::string& path, const std::string& text, const std::vector<std::string>& known);

}  // namespace tmx
