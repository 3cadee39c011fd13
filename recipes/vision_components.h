// Llama 3.2 Vision's model components: torchtune's llama3_2_vision_11b / _90b builders, their lora_ and qlora_
// twins, and the tiny preset's (models/vision_model.h), with torchtune's arguments (decoder_trainable,
// encoder_trainable, fusion_trainable, image_size, the LoRA settings). A config names one as its `model`; the
// training loop builds it through VisionModelFromConfig (recipes/vision_training.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
#include "recipes/model_components.h"
#include "recipes/models/vision_model.h"

namespace tmx::recipes {

// What a vision model component builds: a preset, and which of its builders.
class VisionModelComponent final : public ComponentImpl {
 public:
  VisionModelComponent(const models::VisionPreset* preset, bool lora, bool qlora)
      : preset_(preset), lora_(lora), qlora_(qlora) {}
  const models::VisionPreset& preset() const { return *preset_; }
  bool lora() const { return lora_; }
  bool qlora() const { return qlora_; }

 private:
  const models::VisionPreset* preset_;  // an entry of models::VisionPresets(), which lives for the process
  bool lora_, qlora_;
};

// The full, lora_ and qlora_ component of every vision preset (torchtune's names as aliases).
void AddVisionModelComponents(std::vector<ComponentSpec>* out);

// The vision model a config's `key` names, with its arguments applied: image_size becomes the tile size, the
// *_trainable arguments what trains (full builder: True = every weight of the part, False = none; lora_ builders:
// "lora" = the part's adapters, "frozen" = none, "full" refused as torchtune refuses it).
struct VisionModelChoice {
  std::string component;
  const models::VisionPreset* preset = nullptr;
  models::VisionModelArgs args;
  std::optional<models::LoraArgs> lora;
  models::VisionTrainable trainable;
};

// The component `key` names when it is a vision model; nullptr otherwise (a text model, or an unknown name).
const VisionModelComponent* VisionComponentOf(const Config& config, const Registry& registry,
                                              const std::string& key = "model");

// InvalidArgument naming the config position for bad arguments; FailedPrecondition when `key` is not a vision
// model. `config` has its schema defaults applied.
StatusOr<VisionModelChoice> VisionModelFromConfig(const Config& config, const Registry& registry,
                                                  const std::string& key = "model");

// The parameters of `choice` (built on the meta device, no memory), and of its image encoder alone (the CLIP
// layers and embeddings: what runs over image tokens; the projection head counts with the fusion weights but also
// runs over them, so it is counted here too). QLoRA's NF4 bases are `quantized`; outside_layers is unset.
struct VisionParameterCounts : ParameterCounts {
  int64_t encoder = 0;
};
VisionParameterCounts CountVisionParameters(const VisionModelChoice& choice);

}  // namespace tmx::recipes
