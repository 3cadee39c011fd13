// The model table: every text-model size torchtune has a builder for (families llama2, code_llama2, llama3,
// llama3_1, llama3_2, llama3_3, mistral, qwen2, qwen2_5, qwen3, gemma, gemma2, phi3, phi4), under torchtune's
// builder names, plus a tiny preset per family for tests and quick runs. Each entry is one DecoderArgs; callers
// (the registry, the recipes, the memory planner) look entries up here instead of knowing model names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recipes/models/decoder.h"

namespace tmx::models {

// One argument of a torchtune builder function.
struct BuilderParam {
  std::string name;           // torchtune's argument name, e.g. "lora_rank"
  std::string default_value;  // its Python default as torchtune writes it ("False", "8", "0.0"); "" when required
};

struct ModelPreset {
  // torchtune's model package: the component is torchtune.models.<family>.<builder>.
  std::string family;
  // The full-model builder, e.g. "qwen2_5_1_5b_instruct", and its LoRA twin, e.g. "lora_qwen2_5_1_5b_instruct".
  std::string builder;
  std::string lora_builder;
  // Arguments of the full builder (only llama3_2's take one: tie_word_embeddings), and of the LoRA builder in
  // torchtune's order. Builders without apply_lora_to_output (tied Qwen2, Gemma) leave it out, as torchtune.
  std::vector<BuilderParam> builder_params;
  std::vector<BuilderParam> lora_params;
  DecoderArgs args;
  // Parameters of the published model: what transformers' num_parameters() reports for the checkpoint below
  // (tied embeddings counted once). Equal to CountParameters of this preset built without LoRA. For the reward
  // builders, the count of the Hugging Face *ForSequenceClassification model with one label. 0 for tiny presets.
  int64_t published_params = 0;
  // The Hugging Face side: config.json's model_type ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2",
  // "phi3") and the Hub checkpoint torchtune's configs download for this builder ("" for tiny presets).
  std::string hf_model_type;
  std::string hf_checkpoint;
  // A tiny preset: the family's operations at a few hundred thousand parameters, vocab 512.
  bool tiny = false;
  // The builder takes the sizes from the config (torchtune's generic llama2 builder); `args` holds the family's
  // fixed traits and the defaults of the optional arguments, and published_params is 0.
  bool sized_by_config = false;
  // One line for listings, e.g. "Qwen2.5 1.5B Instruct".
  std::string description;
};

// Every preset: the published sizes grouped by family in torchtune's order, then the tiny ones.
const std::vector<ModelPreset>& ModelPresets();
// The families that have a tiny preset ("tiny_<family>"), in ModelPresets() order.
std::vector<std::string> TinyFamilies();

// The preset whose builder or lora_builder is `name`; `name` may also be a dotted component path ending in one,
// "torchtune.models.<family>.<builder>" (the family must then match). nullptr when none.
const ModelPreset* FindModelPreset(std::string_view name);

// True when `name` (plain or dotted, as FindModelPreset) names the preset's LoRA builder.
bool IsLoraBuilder(const ModelPreset& preset, std::string_view name);

// torchtune's llama2 builder, torchtune.models.llama2.llama2: the Llama 2 architecture at the sizes a config
// gives (vocab_size, num_layers, num_heads, num_kv_heads, embed_dim, max_seq_len; intermediate_dim, norm_eps,
// rope_base optional), as TinyLlama's configs use it. Not in ModelPresets(): it has no sizes of its own.
const ModelPreset& SizedLlama2Preset();

// torchtune's llama2_classifier and mistral_classifier: sized by the config like SizedLlama2Preset, with a
// num_classes score head (the config's num_classes; args.num_classes is 1 until then). PPO's reward and value
// models; their Hugging Face checkpoints (model_type REWARD in torchtune's checkpointer) are the
// *ForSequenceClassification layout, score.weight for the head.
const std::vector<ModelPreset>& SizedClassifierPresets();

// torchtune's scale_hidden_dim_for_mlp: 4 x floor(2 dim / 3), rounded up to a multiple of `multiple_of`, the MLP
// width of a Llama 2 model built without intermediate_dim.
int64_t ScaleHiddenDimForMlp(int64_t dim, int64_t multiple_of = 256);

// The families in table order, each once.
std::vector<std::string> ModelFamilies();

}  // namespace tmx::models
