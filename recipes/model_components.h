// Model components: one registry entry per model builder (torchtune's names as aliases), each carrying the
// architecture it builds and its parameter count. The recipes build models from the entry the config's
// `model` names, and the memory estimate counts them the same way; nothing else knows model names.
//
// Adding a size or a family: an entry in the preset table (models/presets.cc; a family is a set of decoder
// options, models/decoder.h); nothing outside recipes/ changes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
#include "recipes/models/decoder.h"
#include "recipes/models/presets.h"

namespace tmx::recipes {

// What a model component builds: a preset of the one decoder (models/presets.h), and whether the builder adds
// LoRA adapters (their shape then comes from the config's model.* keys).
class ModelComponent final : public ComponentImpl {
 public:
  ModelComponent(const models::ModelPreset* preset, bool lora, bool qlora = false)
      : preset_(preset), lora_(lora), qlora_(qlora) {}
  const models::ModelPreset& preset() const { return *preset_; }
  bool lora() const { return lora_; }
  // A qlora_ builder. A tiny preset's is built at the widths NF4 can hold (TinyNf4Widths).
  bool qlora() const { return qlora_; }

 private:
  const models::ModelPreset* preset_;  // an entry of models::ModelPresets(), which lives for the process
  bool lora_;
  bool qlora_;
};

// One component per builder of every preset: the full and the lora_ builder (torchtune's names as aliases),
// and the qlora_ builder (the lora_ builder with quantize_base=True; torchtune's, and qlora_tiny_<family>).
void AddModelComponents(std::vector<ComponentSpec>* out);

// A tiny preset at the widths NF4 can hold (every projection a multiple of 64 x 256 weights, models/nf4.h):
// embed_dim 256, intermediate_dim 512, and a head_dim set apart from the width doubled until the k/v
// projections hold whole blocks; the tiny widths (64, 256) are below one block of NF4 scales, which torchao
// refuses too.
models::DecoderArgs TinyNf4Widths(models::DecoderArgs args);

// The model a config's `model` component describes.
struct ModelChoice {
  std::string component;                 // canonical component name
  const models::ModelPreset* preset = nullptr;
  models::DecoderArgs args;              // the preset's, with the config's builder arguments applied
  std::optional<models::LoraArgs> lora;  // set for lora_ builders
};

// InvalidArgument, naming the config position, for a model that cannot be built here or bad LoRA settings.
// `config` has its schema defaults applied.
StatusOr<ModelChoice> ModelFromConfig(const Config& config, const Registry& registry,
                                      const std::string& key = "model");

// The LoRA settings under `key` (lora_attn_modules, apply_lora_to_mlp, lora_rank, lora_alpha, lora_dropout;
// apply_lora_to_output, use_dora and quantize_base False when the builder has none), as written: not yet checked.
StatusOr<models::LoraArgs> LoraFromConfig(const Config& config, const std::string& key);

// The model's sizes from a builder that takes them from the config (torchtune's llama2): a size left out, or
// sizes that do not make a model (heads that do not divide the width...), as a problem at `model`; none for a
// model of fixed sizes.
std::vector<Problem> ModelSizeChecks(const Config& config, const Registry& registry, const DeviceInfo* device);

// The LoRA settings checked against the model's shapes (a rank above a layer's smaller side, an output
// adapter on tied embeddings), as the problems of a recipe's cross check; none for a model without LoRA or
// one the schema already refuses.
std::vector<Problem> LoraChecks(const Config& config, const Registry& registry, const DeviceInfo* device);

// A QAT recipe's quantizer against the model (the adapted linears' scope with `lora`, else every linear; models::AttachFakeQuantization on a meta-device
// model): a group size that an adapted linear's inputs do not divide (LoRA), an NF4 or DoRA model, or one that
// fits no linear at all, each naming quantizer.groupsize or the model and the fix.
std::vector<Problem> FakeQuantizationProblems(const Config& config, const Registry& registry, bool lora);

// The parameters of `choice`, counted on a model built on the meta device (no memory).
struct ParameterCounts {
  int64_t total = 0;
  int64_t trainable = 0;
  int64_t quantized = 0;  // held as NF4 (QLoRA's bases)
  // Outside the transformer layers (embeddings, final norm, output projection): what fully sharded ranks keep
  // whole (recipes/distributed/sharded_layers.h).
  int64_t outside_layers = 0;
  int64_t trainable_outside_layers = 0;
};
ParameterCounts CountModelParameters(const ModelChoice& choice);

}  // namespace tmx::recipes
