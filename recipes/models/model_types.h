// One record per Hugging Face model_type: what the type fixes about the decoder, which config.json keys it reads
// beyond the sizes every type has, how its checkpoint lays weights out, and transformers' class names. The
// presets (presets.cc), the config.json reader and writer (checkpoint/hf_config.cc) and the weight-name mapping
// (checkpoint/hf_convert.cc) all read these rows, so a family that reuses a model_type adds no code here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "recipes/models/decoder.h"

namespace tmx::models {

struct ModelTypeRecord {
  std::string name;            // config.json's model_type: "llama", "qwen2", ...
  std::string causal_lm;       // architectures[0] of the language model
  std::string classification;  // architectures[0] with a score head; empty where none is mapped
  bool tied_by_default = false;  // the config class's default tie_word_embeddings

  // Fixed traits: set on every model of this type (ApplyFixedTraits), never read from config.json.
  RopeLayout rope_layout = RopeLayout::kInterleaved;  // torchtune keeps llama/mistral/gemma q/k interleaved
  bool qkv_bias = false;                              // transformers' Qwen2Attention always has q/k/v biases
  bool qk_norm = false;                               // Qwen3
  bool gemma_scaling = false;                         // scaled embeddings and (1 + w) norms (Gemma, Gemma 2)
  bool post_norms = false;                            // Gemma 2
  bool alternate_sliding_window = false;              // Gemma 2: the window on even layers only

  // config.json keys beyond the common sizes, rope_theta, rms_norm_eps and tie_word_embeddings.
  std::string activation_key = "hidden_act";  // the activation's key (Gemma, Gemma 2: hidden_activation)
  std::string default_activation = "silu";    // when activation_key is absent and there is no legacy key
  // Gemma: when activation_key is absent, this older key is read, its "gelu" meaning the tanh approximation
  // (see model_types.cc). Empty: none.
  std::string legacy_activation_key;
  bool refuses_attention_bias = false;        // attention_bias: true is refused (the decoder has no o_proj bias)
  bool refuses_mlp_bias = false;              // mlp_bias: true is refused
  bool reads_rope_scaling = false;            // rope_scaling (llama3 scaling); refused for other types
  std::string sliding_window_refusal;         // use_sliding_window: true is refused with this reason ("": not read)
  bool reads_sliding_window = false;          // sliding_window
  bool reads_softcaps = false;                // attn/final_logit_softcapping, query_pre_attn_scalar, layer_types
  bool writes_hidden_activation = false;      // config.json as saved also names hidden_activation (Gemma)

  // Weight layout: q/k/v and gate/up fused into qkv_proj and gate_up_proj in the checkpoint (Phi-3).
  bool fused_projections = false;

  // Llama 4 (llama4_text): config.json's mixture-of-experts, NoPE, chunked-attention, q/k norm and temperature
  // keys; checkpoints hold feed_forward.{router,experts,shared_expert} (experts.gate_up_proj fused along the
  // last dimension) and feed_forward.{gate,up,down}_proj in dense layers.
  bool llama4_options = false;
  // The checkpoint's q/k rows are already interleaved for RoPE (Llama 4 rotates adjacent pairs as complex
  // numbers), so nothing is permuted on the way in or out.
  bool checkpoint_rope_interleaved = false;
  // A multimodal wrapper whose config.json nests this type's under "text_config" (Llama 4: "llama4"); its
  // checkpoints name this type's tensors under `wrapper_prefix` and hold others (the vision model) under
  // `wrapper_skipped`, which a text model leaves alone. Empty: none.
  std::string wrapper_model_type;
  std::string wrapper_prefix;
  std::vector<std::string> wrapper_skipped;
};

// Every model_type implemented, in a fixed order.
const std::vector<ModelTypeRecord>& ModelTypes();

// The record of `name`; nullptr when the type is not implemented.
const ModelTypeRecord* FindModelType(std::string_view name);
// The record whose wrapper_model_type is `name` (Llama 4's "llama4" -> llama4_text); nullptr when none.
const ModelTypeRecord* FindWrappedModelType(std::string_view name);

// "llama, mistral, qwen2, qwen3, gemma, gemma2, phi3": for messages.
std::string ModelTypeNames();

// Sets the type's fixed traits on `args` (rope layout, q/k/v biases, q/k norms, Gemma's scaling, post-norms,
// alternating windows); sizes and everything config.json gives are left alone.
void ApplyFixedTraits(const ModelTypeRecord& type, DecoderArgs* args);

}  // namespace tmx::models
