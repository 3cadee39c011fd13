// The schema shared by the training recipes: what a recipe trains (its kind), the top-level keys with their
// defaults and constraints, and the checks spanning several keys. New recipes (preference, distillation,
// distributed) start from these fields and add their own.
#pragma once

#include <vector>

#include "harness/registry.h"

namespace tmx::recipes {

// What a recipe trains: every weight, or LoRA adapters over a frozen base.
enum class TrainKind { kFull, kLora };

// The recipe keys of a single-device fine-tuning recipe of `kind`, torchtune's names and defaults.
std::vector<FieldSpec> TrainingFields(TrainKind kind);

// Checks spanning several keys, and features that are declared for torchtune compatibility but not
// implemented (compile, packing, DoRA...), each named with its fix.
std::vector<Problem> TrainingChecks(const Config& config, const DeviceInfo* device);

}  // namespace tmx::recipes
