// The built-in recipes and components: what `tune` and `tune-matrix` know.
#pragma once

#include <string>

#include "harness/registry.h"
#include "harness/status.h"

namespace tmx::recipes {

// Registers every component (models, tokenizer, datasets, optimizers, schedulers, losses, loggers,
// checkpointers, profiler; with torchtune's paths as aliases) and the single-device recipes.
Status RegisterBuiltins(Registry* registry);

// The registry with everything built in, made once per process.
const Registry& BuiltinRegistry();

// The instruction dataset shipped with the project (recipes/data/datasets/tiny_instruct.jsonl), found
// beside the checkout's configs (also when $TUNE_MATRIX_CONFIG_DIR takes the configs from elsewhere);
// $TUNE_MATRIX_DATA_DIR overrides the folder.
std::string DefaultDatasetPath();

}  // namespace tmx::recipes
