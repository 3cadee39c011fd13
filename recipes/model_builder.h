// The model a config's `model` component describes: the Llama shape and, for lora_ builders, the adapters.
// Shared by the recipes (which build it) and tune-matrix (which builds it on the meta device to predict
// memory), so the mapping from component names to architectures exists once.
#pragma once

#include <optional>
#include <string>

#include "harness/config.h"
#include "harness/registry.h"
#include "harness/status.h"
#include "recipes/models/llama.h"

namespace tmx::recipes {

struct ModelChoice {
  std::string component;                // canonical component name
  models::LlamaArgs args;
  std::optional<models::LoraArgs> lora;  // set for lora_ builders
};

// InvalidArgument, naming the config position, for an unknown or non-Llama model or bad LoRA settings.
StatusOr<ModelChoice> ModelFromConfig(const Config& config, const Registry& registry);

}  // namespace tmx::recipes
