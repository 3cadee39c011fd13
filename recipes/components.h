// The components the training recipes name besides models and optimizers: tokenizer, datasets, learning-rate
// schedule, loss, metric logger, checkpointer and profiler, with torchtune's paths as aliases. Those torchtune
// has and tune-matrix cannot build are registered as recognised-but-unsupported, so validation names them.
#pragma once

#include <vector>

#include "harness/registry.h"

namespace tmx::recipes {

void AddDataComponents(std::vector<ComponentSpec>* out);
void AddTrainingComponents(std::vector<ComponentSpec>* out);

}  // namespace tmx::recipes
