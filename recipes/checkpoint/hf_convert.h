// Hugging Face tensor names and layouts <-> the decoder's (torchtune's) names and layouts, for the model types of
// hf_config.h. Three differences besides the names:
//  - RoPE layout: Hugging Face rotates q/k channel halves; a decoder with RopeLayout::kInterleaved (torchtune's
//    llama, mistral, gemma) keeps each head's rows interleaved, so q/k weights, biases and norm scales are
//    permuted per head on the way in and back on the way out (torchtune's convert_weights _permute).
//  - Fused projections: phi3 checkpoints hold qkv_proj (q, k, v rows stacked) and gate_up_proj (w1 then w3),
//    split here into q/k/v_proj and w1/w3 as torchtune does.
//  - Llama 4 (llama4_text): q/k rows need no permutation (its checkpoints rotate adjacent pairs too), the
//    experts' gate_up_proj splits along its last dimension, and a Llama4ForConditionalGeneration checkpoint's
//    language_model.* tensors are read as the text model's while its vision tensors are left alone.
//  - Tied embeddings: a tied model has no output.weight; a tied checkpoint's lm_head.weight, when present, is
//    ignored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/models/decoder.h"

namespace tmx::checkpoint {

// One Hugging Face tensor and the decoder tensor(s) it holds.
struct HfTensorMap {
  struct Part {
    std::string tune_name;      // e.g. "layers.0.attn.q_proj.weight"
    int64_t rows = 0;           // the part's rows in the Hugging Face tensor (dim 0)
    int64_t permute_heads = 0;  // > 0: the rows are this many heads to re-pair for interleaved RoPE
  };
  std::string hf_name;            // e.g. "model.layers.0.self_attn.qkv_proj.weight"
  std::vector<int64_t> hf_shape;  // the shape a checkpoint of this model holds
  std::vector<Part> parts;        // one, or the fused parts in row order
  // The dimension the parts are stacked along: 0 (rows), or Llama 4's experts.gate_up_proj [experts, dim,
  // 2 x hidden], the gate and up halves side by side in its last dimension (2); a Part's rows count along it.
  int64_t split_dim = 0;
};

// The tensors a `model_type` checkpoint of a model with `args` holds, in the decoder's parameter order.
// REQUIRES: model_type is one of SupportedHfModelTypes() and ValidateDecoderArgs(args) is ok.
std::vector<HfTensorMap> HfTensorMaps(const std::string& model_type, const models::DecoderArgs& args);

// Hugging Face tensors -> the decoder's state dict (dtypes kept). `source` names the checkpoint in messages.
// Checks every expected tensor in the decoder's order and reports the first that is missing or has another shape,
// with both names ("<source>: model.layers.0.self_attn.q_proj.weight (layers.0.attn.q_proj.weight): shape
// [64, 32] in the checkpoint, [128, 32] expected by the model; fix: ..."); then a tensor the model has no place
// for. All InvalidArgument.
StatusOr<NamedTensors> HfToTune(const NamedTensors& hf, const std::string& model_type, const models::DecoderArgs& args,
                                const std::string& source);

// The decoder's state dict (without LoRA entries: see MergedStateDict) -> Hugging Face tensors, in HfTensorMaps
// order. InvalidArgument naming the first tensor missing from `tune` or left over in it.
StatusOr<NamedTensors> TuneToHf(const NamedTensors& tune, const std::string& model_type,
                                const models::DecoderArgs& args);

// LoRA adapters in PEFT's layout.
struct PeftAdapterTensors {
  // "base_model.model.<Hugging Face module>.lora_A.weight" / ".lora_B.weight", and with DoRA
  // ".lora_magnitude_vector" (torchtune's name for it in PEFT's files).
  NamedTensors tensors;
  // The adapted Hugging Face module names (q_proj, o_proj, gate_proj, lm_head, qkv_proj...), in first-seen order.
  std::vector<std::string> target_modules;
  // For a fused module whose k > 1 parts are adapted, k: its adapter is the parts' adapters side by side, of rank
  // k * r (lora_A stacked, lora_B block-diagonal), so PEFT needs rank k * r and alpha k * alpha to keep the
  // scale alpha / r. Absent for modules of rank r.
  std::map<std::string, int64_t> rank_multiple;
};

// The adapters (AdapterParameters of a decoder: "<linear>.lora_a.weight", "<linear>.lora_b.weight" and DoRA's
// "<linear>.magnitude") in PEFT's names and layout. A DoRA magnitude is permuted with its rows (torchtune 0.6.1
// leaves q/k's in the interleaved order, which PEFT would apply to the wrong rows). A fused module (phi3's
// qkv_proj) with DoRA on some of its parts needs `base` (the decoder's weights): the other parts' magnitude is
// their weight's row norms. Where DoRA adapts a layer with a bias (Qwen2's q/k/v), torchtune's forward (and this
// decoder's) scales the bias by magnitude / norm and PEFT's does not, so PEFT reproduces such a model up to that
// term. InvalidArgument naming an adapter on a tensor the checkpoint does not have, or a weight missing from
// `base`.
StatusOr<PeftAdapterTensors> TuneAdaptersToPeft(const NamedTensors& adapters, const std::string& model_type,
                                                const models::DecoderArgs& args, const NamedTensors& base = {});

}  // namespace tmx::checkpoint
