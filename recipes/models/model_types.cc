#include "recipes/models/model_types.h"

namespace tmx::models {
namespace {

ModelTypeRecord LlamaType() {
  ModelTypeRecord llama;
  llama.name = "llama";
  llama.causal_lm = "LlamaForCausalLM";
  llama.classification = "LlamaForSequenceClassification";
  llama.refuses_attention_bias = true;
  llama.refuses_mlp_bias = true;
  llama.reads_rope_scaling = true;
  return llama;
}

ModelTypeRecord MistralType() {
  ModelTypeRecord mistral;
  mistral.name = "mistral";
  mistral.causal_lm = "MistralForCausalLM";
  mistral.classification = "MistralForSequenceClassification";
  mistral.refuses_attention_bias = true;
  mistral.reads_sliding_window = true;
  return mistral;
}

ModelTypeRecord Qwen2Type() {
  ModelTypeRecord qwen2;
  qwen2.name = "qwen2";
  qwen2.causal_lm = "Qwen2ForCausalLM";
  qwen2.classification = "Qwen2ForSequenceClassification";
  qwen2.rope_layout = RopeLayout::kHalf;
  qwen2.qkv_bias = true;
  qwen2.sliding_window_refusal = "Qwen2's per-layer windows are not implemented";
  return qwen2;
}

ModelTypeRecord Qwen3Type() {
  ModelTypeRecord qwen3;
  qwen3.name = "qwen3";
  qwen3.causal_lm = "Qwen3ForCausalLM";
  qwen3.rope_layout = RopeLayout::kHalf;
  qwen3.qk_norm = true;
  qwen3.refuses_attention_bias = true;
  qwen3.sliding_window_refusal = "Qwen3's per-layer windows are not implemented";
  return qwen3;
}

// Gemma's activation is GELU's tanh approximation: the one the models were trained with and the one
// torchtune's gemma builders always use. Google's config.json files say so in hidden_activation
// ("gelu_pytorch_tanh") beside a legacy hidden_act of "gelu". Transformers 4.38-4.41 read hidden_activation and
// took a lone hidden_act "gelu" as the approximation too (with a warning, PR 29402); 4.42 and later (4.57.1 and
// 5.0.0 checked) read hidden_act literally, which runs exact GELU for those files. tune-matrix follows the
// model and torchtune: hidden_activation when present, else hidden_act with "gelu" taken as the approximation.
// Gemma 2's MLP reads hidden_activation in every transformers version.
ModelTypeRecord GemmaType() {
  ModelTypeRecord gemma;
  gemma.name = "gemma";
  gemma.causal_lm = "GemmaForCausalLM";
  gemma.tied_by_default = true;
  gemma.gemma_scaling = true;
  gemma.refuses_attention_bias = true;
  gemma.activation_key = "hidden_activation";
  gemma.legacy_activation_key = "hidden_act";
  gemma.default_activation = "gelu_pytorch_tanh";
  gemma.writes_hidden_activation = true;
  return gemma;
}

ModelTypeRecord Gemma2Type() {
  ModelTypeRecord gemma2 = GemmaType();
  gemma2.name = "gemma2";
  gemma2.causal_lm = "Gemma2ForCausalLM";
  gemma2.post_norms = true;
  gemma2.alternate_sliding_window = true;
  gemma2.legacy_activation_key.clear();
  gemma2.reads_sliding_window = true;
  gemma2.reads_softcaps = true;
  return gemma2;
}

ModelTypeRecord Phi3Type() {
  ModelTypeRecord phi3;
  phi3.name = "phi3";
  phi3.causal_lm = "Phi3ForCausalLM";
  phi3.rope_layout = RopeLayout::kHalf;
  phi3.reads_sliding_window = true;
  phi3.fused_projections = true;
  return phi3;
}

// Llama 4's text model (Llama4ForCausalLM; Llama4ForConditionalGeneration holds it as language_model).
ModelTypeRecord Llama4Type() {
  ModelTypeRecord llama4;
  llama4.name = "llama4_text";
  llama4.causal_lm = "Llama4ForCausalLM";
  llama4.refuses_attention_bias = true;
  llama4.reads_rope_scaling = true;
  llama4.llama4_options = true;
  llama4.checkpoint_rope_interleaved = true;
  llama4.wrapper_model_type = "llama4";
  llama4.wrapper_prefix = "language_model.";
  llama4.wrapper_skipped = {"vision_model.", "multi_modal_projector."};
  return llama4;
}

std::vector<ModelTypeRecord> BuildTypes() {
  return {LlamaType(), MistralType(), Qwen2Type(), Qwen3Type(), GemmaType(), Gemma2Type(), Phi3Type(), Llama4Type()};
}

}  // namespace

const std::vector<ModelTypeRecord>& ModelTypes() {
  static const std::vector<ModelTypeRecord> types = BuildTypes();
  return types;
}

const ModelTypeRecord* FindModelType(std::string_view name) {
  for (const ModelTypeRecord& t : ModelTypes()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const ModelTypeRecord* FindWrappedModelType(std::string_view name) {
  for (const ModelTypeRecord& t : ModelTypes()) {
    if (!t.wrapper_model_type.empty() && t.wrapper_model_type == name) return &t;
  }
  return nullptr;
}

std::string ModelTypeNames() {
  std::string names;
  for (const ModelTypeRecord& t : ModelTypes()) names += (names.empty() ? "" : ", ") + t.name;
  return names;
}

void ApplyFixedTraits(const ModelTypeRecord& type, DecoderArgs* args) {
  args->rope_layout = type.rope_layout;
  args->qkv_bias = type.qkv_bias;
  args->qk_norm = type.qk_norm;
  args->scale_embeddings = type.gemma_scaling;
  args->norm_plus_one = type.gemma_scaling;
  args->post_norms = type.post_norms;
  args->alternate_sliding_window = type.alternate_sliding_window;
}

}  // namespace tmx::models
