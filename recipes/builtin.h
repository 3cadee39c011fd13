// The built-in recipes and components: what `tune` and `tune-matrix` know.
#pragma once

#include "base/status.h"
#include "harness/registry.h"

namespace tmx::recipes {

// Registers every component (models, tokenizer, datasets, optimizers, schedulers, losses, loggers,
// checkpointers, profiler; with torchtune's paths as aliases) and the single-device recipes.
Status RegisterBuiltins(Registry* registry);

// The registry with everything built in, made once per process.
const Registry& BuiltinRegistry();


}  // namespace tmx::recipes
