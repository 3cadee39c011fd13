// Model components: one registry entry per model builder (torchtune's names as aliases), each carrying the
// architecture it builds and its parameter count. The recipes build models from the entry the config's
// `model` names, and the memory estimate counts them the same way; nothing else knows model names.
//
// Adding a size or a family: an entry in the preset table of model_components.cc (a family is a set of
// decoder options, see models/llama.h); nothing outside recipes/ changes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/config.h"
#include "harness/registry.h"
#include "harness/status.h"
#include "recipes/models/llama.h"

namespace tmx::recipes {

// What a model component builds: the architecture, and whether the builder adds LoRA adapters (their
// shape then comes from the config's model.* keys).
class ModelComponent final : public ComponentImpl {
 public:
  ModelComponent(std::string family, models::LlamaArgs args, bool lora)
      : family_(std::move(family)), args_(args), lora_(lora) {}
  const std::string& family() const { return family_; }
  const models::LlamaArgs& args() const { return args_; }
  bool lora() const { return lora_; }

 private:
  std::string family_;
  models::LlamaArgs args_;
  bool lora_;
};

// Every model builder: full and lora_ variants of each preset, and the unsupported families torchtune has.
void AddModelComponents(std::vector<ComponentSpec>* out);

// The model a config's `model` component describes.
struct ModelChoice {
  std::string component;                 // canonical component name
  models::LlamaArgs args;
  std::optional<models::LoraArgs> lora;  // set for lora_ builders
};

// InvalidArgument, naming the config position, for a model that cannot be built here or bad LoRA settings.
// `config` has its schema defaults applied.
StatusOr<ModelChoice> ModelFromConfig(const Config& config, const Registry& registry);

// Total and trainable parameters of `choice`, counted on a model built on the meta device (no memory).
void CountModelParameters(const ModelChoice& choice, int64_t* total, int64_t* trainable);

}  // namespace tmx::recipes
