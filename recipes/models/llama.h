// The Llama 3.x decoder (Llama 3.1 / 3.2 architecture) with optional LoRA adapters and activation
// checkpointing.
//
//   tokens -> tok_embeddings -> N x [ h += attn(sa_norm(h)); h += mlp(mlp_norm(h)) ] -> norm -> output -> logits
//
// attn is grouped-query attention with rotary position embeddings (RoPE, with Llama 3.1 frequency scaling when
// configured); mlp is SwiGLU: w2(silu(w1 x) * w3 x). No linear layer has a bias. State-dict names match
// torchtune's llama3 models:
//   tok_embeddings.weight, layers.{i}.sa_norm.scale, layers.{i}.attn.{q_proj,k_proj,v_proj,output_proj}.weight,
//   layers.{i}.mlp_norm.scale, layers.{i}.mlp.{w1,w2,w3}.weight, norm.scale, output.weight (absent when tied)
// plus <linear>.lora_a.weight / <linear>.lora_b.weight for adapted layers (see lora.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "harness/status.h"
#include "recipes/models/lora.h"

namespace tmx::models {

// Llama 3.1 / 3.2 RoPE frequency scaling ("llama3" rope_type). For each rotary frequency f with wavelength
// w = 2*pi/f: w < old_context_len/high_freq_factor keeps f; w > old_context_len/low_freq_factor uses f/factor;
// in between, f is interpolated: (1 - s) * f/factor + s * f with s = (old_context_len/w - low) / (high - low).
struct RopeScaling {
  double factor = 32;              // divisor for low frequencies; 32 for Llama 3.2, 8 for Llama 3.1
  double low_freq_factor = 1;      // REQUIRES: 0 < low_freq_factor < high_freq_factor
  double high_freq_factor = 4;
  int64_t old_context_len = 8192;  // the context length the base frequencies were trained for
};

// The shape of a Llama model. The sizes have no defaults; use a preset below or fill every field.
struct LlamaArgs {
  int64_t vocab_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;         // query heads
  int64_t num_kv_heads = 0;      // key/value heads; divides num_heads (grouped-query attention)
  int64_t embed_dim = 0;         // divisible by num_heads; head_dim = embed_dim / num_heads must be even
  int64_t intermediate_dim = 0;  // hidden size of the SwiGLU MLP
  int64_t max_seq_len = 0;       // longest sequence forward() accepts
  double rope_base = 500000;     // RoPE theta
  double norm_eps = 1e-5;        // RMSNorm epsilon
  std::optional<RopeScaling> rope_scaling;  // none: plain RoPE (Llama 3.0)
  bool tie_word_embeddings = false;         // output projection shares tok_embeddings.weight
};

// Published configurations (max_seq_len 131072, rope_base 500000).
LlamaArgs Llama3_2_1BArgs();  // 1,235,814,400 parameters, tied embeddings, rope scaling factor 32
LlamaArgs Llama3_2_3BArgs();  // 3,212,749,824 parameters, tied embeddings, rope scaling factor 32
LlamaArgs Llama3_1_8BArgs();  // 8,030,261,248 parameters, untied, rope scaling factor 8
// A model that trains in seconds on a CPU: vocab 512 (room for the 259-token byte tokenizer), 2 layers, dim 64,
// 4 heads, 2 kv heads, MLP 256, max_seq_len 512, tied embeddings, rope scaling on (all three scaling regimes
// occur at head_dim 16).
LlamaArgs LlamaTinyArgs();

// Checks the sizes and RoPE settings; InvalidArgument names the field, the value and the constraint.
Status ValidateLlamaArgs(const LlamaArgs& args);
// ValidateLoraArgs(lora) plus the checks that need the model: apply_to_output needs untied embeddings.
Status ValidateLoraArgs(const LoraArgs& lora, const LlamaArgs& args);

// The head_dim/2 RoPE inverse frequencies base^(-2i/head_dim), scaled when `scaling` is set. float32 on CPU,
// computed in the same order of operations as Meta's reference and torchtune.
// REQUIRES: head_dim even and > 0, base > 0.
torch::Tensor RopeInverseFrequencies(int64_t head_dim, double base, const std::optional<RopeScaling>& scaling);

// Rotates x [B, T, heads, head_dim] by position: each adjacent pair (x[2i], x[2i+1]) at position t is rotated
// by angle t * inv_freq[i] (Meta's interleaved layout, as torchtune). cos/sin are [T, head_dim/2] float32.
// Computed in float32, returned in x's dtype.
torch::Tensor ApplyRotaryEmbedding(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// Token embedding: weight [num_embeddings, dim], initialised N(0, 1/dim) so that a tied output projection
// starts with unit-variance logits (loss near ln(vocab)) when a model is trained from its seed.
class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t dim, c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& tokens);  // [...] int -> [..., dim]
  const torch::Tensor& weight() const { return weight_; }

 private:
  torch::Tensor weight_;
};
TORCH_MODULE(Embedding);

// RMSNorm as torchtune: normalise in float32, cast back to x's dtype, then multiply by `scale` (ones at init).
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps, c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& x);

 private:
  double eps_;
  torch::Tensor scale_;
};
TORCH_MODULE(RMSNorm);

// Which projections of one layer carry a LoRA adapter, and its shape.
struct LayerLora {
  LoraAdapterOptions adapter;
  bool q_proj = false, k_proj = false, v_proj = false, output_proj = false, mlp = false;
};

// Causal grouped-query self-attention with RoPE. q_proj [heads*head_dim, dim], k_proj/v_proj
// [kv_heads*head_dim, dim], output_proj [dim, heads*head_dim]; each kv head serves heads/kv_heads query heads.
class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const LlamaArgs& args, const LayerLora& lora, c10::TensorOptions options = {});
  // x [B, T, dim], cos/sin [T, head_dim/2] -> [B, T, dim]. Position t attends to positions <= t.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

 private:
  int64_t num_heads_, num_kv_heads_, head_dim_;
  Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, output_proj_{nullptr};
};
TORCH_MODULE(Attention);

// SwiGLU MLP: w2(silu(w1 x) * w3 x); w1, w3 [hidden, dim], w2 [dim, hidden].
class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(const LlamaArgs& args, const LayerLora& lora, c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& x);

 private:
  Linear w1_{nullptr}, w2_{nullptr}, w3_{nullptr};
};
TORCH_MODULE(FeedForward);

// One pre-norm decoder layer: h = x + attn(sa_norm(x)); out = h + mlp(mlp_norm(h)).
class TransformerLayerImpl : public torch::nn::Module {
 public:
  TransformerLayerImpl(const LlamaArgs& args, const LayerLora& lora, c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

 private:
  RMSNorm sa_norm_{nullptr};
  Attention attn_{nullptr};
  RMSNorm mlp_norm_{nullptr};
  FeedForward mlp_{nullptr};
};
TORCH_MODULE(TransformerLayer);

class LlamaImpl : public torch::nn::Module {
 public:
  // Parameters are created directly with `options` (device + dtype), so building on torch::kMeta allocates
  // nothing. Initialisation draws from the current torch RNG (seed it first for reproducible weights).
  // REQUIRES: ValidateLlamaArgs(args) and, with `lora`, ValidateLoraArgs(*lora, args) are ok (checked; throws
  // c10::Error with the Status message otherwise; use MakeLlama to get a Status instead).
  explicit LlamaImpl(const LlamaArgs& args, std::optional<LoraArgs> lora = std::nullopt,
                     c10::TensorOptions options = {});

  // tokens [B, T] integer, on the parameters' device, 1 <= T <= max_seq_len, values in [0, vocab_size)
  // -> logits [B, T, vocab_size] in the parameters' dtype. Tokens sit at positions 0..T-1, causally masked.
  torch::Tensor forward(const torch::Tensor& tokens);

  // When on (and grad mode is on), each layer keeps only its input during forward and is recomputed in
  // backward (see checkpointing.h); gradients are unchanged. Off by default.
  void set_activation_checkpointing(bool on) { activation_checkpointing_ = on; }
  bool activation_checkpointing() const { return activation_checkpointing_; }

  const LlamaArgs& args() const { return args_; }
  const std::optional<LoraArgs>& lora() const { return lora_; }

 private:
  LlamaArgs args_;
  std::optional<LoraArgs> lora_;
  bool activation_checkpointing_ = false;
  torch::Tensor inv_freq_;  // [head_dim/2] float32 on CPU; deliberately not a buffer (meta builds stay valid)
  Embedding tok_embeddings_{nullptr};
  torch::nn::ModuleList layers_{nullptr};
  std::vector<TransformerLayer> layer_list_;
  RMSNorm norm_{nullptr};
  Linear output_{nullptr};  // null when tie_word_embeddings
};
TORCH_MODULE(Llama);

// Validates, then builds. InvalidArgument for bad args; FailedPrecondition when the device runs out of memory.
StatusOr<Llama> MakeLlama(const LlamaArgs& args, std::optional<LoraArgs> lora = std::nullopt,
                          c10::TensorOptions options = {});

// Number of parameter elements of `m`, counting a tensor shared by several modules once; with trainable_only,
// only those with requires_grad. Works on meta-device models.
int64_t CountParameters(const torch::nn::Module& m, bool trainable_only = false);

}  // namespace tmx::models
