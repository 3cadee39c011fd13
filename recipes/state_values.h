// The values a saved recipe state (recipe_state.safetensors, train_state.h) may hold. Every optimizer step
// writes finite moments, second moments and 8-bit blocks' absmax of 0 or more, and a step count of 0 or more;
// a state holding anything else is damaged (a disk error, a hand edit, a killed copy) and used to resume into a
// non-finite loss steps later without naming the file. Checked where the state is loaded, before anything of it
// is used.
#pragma once

#include <string>

#include "base/status.h"
#include "recipes/checkpoint/safetensors.h"

namespace tmx::recipes {

// InvalidArgument "<path>: tensor '<name>': N of M values are ... (the first, at index i, is v); the recipe
// state is damaged; fix: ..." for a floating state tensor (by its suffix: .exp_avg, .exp_avg_sq,
// .max_exp_avg_sq, .momentum_buffer, .state1, .state2, .absmax1, .absmax2; and LoRA's "adapter:" weights) that
// holds a value that is not finite, or below 0 where the tensor is a second moment or an absmax; and
// "<path>: metadata '<name>.step' is -3, below 0; ..." for a step count below 0. uint8 codes (an 8-bit state's
// .state1 and .state2) take every value.
Status CheckRecipeStateValues(const std::string& path, const checkpoint::LoadedSafetensors& state);

}  // namespace tmx::recipes
