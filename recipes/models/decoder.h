// One decoder-only transformer for every text family torchtune builds (Llama 2/3.x, Code Llama, Mistral,
// Qwen2/2.5/3, Gemma, Gemma 2, Phi-3/4). A family is a set of DecoderArgs (see presets.h), not a class.
//
//   tokens -> tok_embeddings [* sqrt(dim)] -> N x layer -> norm -> output -> [soft-cap] -> logits
//   layer:  h = x + [sa_scale](attn(sa_norm(x)));  out = h + [mlp_scale](mlp(mlp_norm(h)))
//
// attn is grouped-query attention with rotary position embeddings (rope.h), optionally with q/k/v biases, a
// per-head RMSNorm of q and k, a sliding window, soft-capped scores and a custom score scale; mlp is gated:
// w2(act(w1 x) * w3 x) with act = silu (SwiGLU) or tanh-approximated gelu (GeGLU). Llama 4 adds mixture-of-experts
// layers (moe.h: mlp.router, mlp.experts, mlp.shared_expert in place of mlp.w1/w2/w3), NoPE layers, chunked
// attention, a parameter-free q/k norm and attention temperature tuning (DecoderArgs).
//
// State-dict names are torchtune's:
//   tok_embeddings.weight, layers.{i}.sa_norm.scale, layers.{i}.attn.{q,k,v}_proj.{weight,bias},
//   layers.{i}.attn.{q,k}_norm.scale, layers.{i}.attn.output_proj.weight, layers.{i}.sa_scale.scale,
//   layers.{i}.mlp_norm.scale, layers.{i}.mlp.{w1,w2,w3}.weight, layers.{i}.mlp_scale.scale,
//   norm.scale (norm.rms_norm.scale with final soft-capping, as torchtune's Gemma2FinalNorm),
//   output.weight (absent when tied)
// plus <linear>.lora_a.weight / <linear>.lora_b.weight for adapted layers, and <linear>.magnitude with DoRA
// (see lora.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "recipes/models/lora.h"
#include "recipes/models/moe.h"
#include "recipes/models/rope.h"

namespace tmx::models {

// The gate activation of the MLP.
enum class MlpActivation {
  kSilu,      // SwiGLU (Llama, Mistral, Qwen, Phi)
  kGeluTanh,  // GeGLU with tanh-approximated gelu (Gemma, Gemma 2)
  kGelu,      // GeGLU with exact (erf) gelu: what a config.json saying "gelu" asks of transformers
};

// The shape and options of a decoder. The sizes have no defaults (use a preset from presets.h or fill every
// size); every option defaults to the plain Llama behaviour.
struct DecoderArgs {
  int64_t vocab_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;         // query heads
  int64_t num_kv_heads = 0;      // key/value heads; divides num_heads (grouped-query attention)
  int64_t embed_dim = 0;         // model width
  int64_t intermediate_dim = 0;  // hidden size of the gated MLP
  int64_t max_seq_len = 0;       // longest sequence forward() accepts
  // Width of one attention head; 0 means embed_dim / num_heads (which must then divide evenly). Gemma and Qwen3
  // set it independently, so num_heads * head_dim may differ from embed_dim. Must be even (RoPE).
  int64_t head_dim = 0;
  double rope_base = 500000;                          // RoPE theta
  double norm_eps = 1e-5;                             // RMSNorm epsilon
  std::optional<RopeScaling> rope_scaling;            // none: plain RoPE
  RopeLayout rope_layout = RopeLayout::kInterleaved;  // how q/k channels pair up for rotation
  bool tie_word_embeddings = false;                   // output projection shares tok_embeddings.weight
  // Biases on q_proj, k_proj and v_proj (Qwen2, Qwen2.5). output_proj and the MLP never have one.
  bool qkv_bias = false;
  // RMSNorm over head_dim of every query and key head, before RoPE (Qwen3): attn.q_norm / attn.k_norm.
  bool qk_norm = false;
  MlpActivation mlp_activation = MlpActivation::kSilu;
  // Multiply the token embeddings by sqrt(embed_dim), rounded to the model dtype (Gemma).
  bool scale_embeddings = false;
  // RMSNorms multiply by (1 + scale) in float32 before casting back, scale starting at 0 (Gemma).
  bool norm_plus_one = false;
  // Extra RMSNorms on the attention and MLP outputs before each residual add (Gemma 2): sa_scale, mlp_scale.
  bool post_norms = false;
  // Attention scores s become cap * tanh(s / cap) before masking (Gemma 2: 50). 0: off.
  double attn_softcap = 0;
  // Logits z become cap * tanh(z / cap) (Gemma 2: 30). 0: off.
  double final_softcap = 0;
  // Attention scores are scaled by query_pre_attn_scalar^-0.5 instead of head_dim^-0.5 (Gemma 2). 0: head_dim.
  double query_pre_attn_scalar = 0;
  // Each position attends only to the sliding_window most recent positions, itself included (Mistral, Phi-3,
  // Gemma 2). 0: unlimited (causal only).
  int64_t sliding_window = 0;
  // With a sliding window: only even-numbered layers (0, 2, ...) use it, the others attend globally (Gemma 2).
  bool alternate_sliding_window = false;
  // Mixture of experts (Llama 4, moe.h): 0 experts is a plain gated MLP in every layer. With experts, layer i is
  // a mixture-of-experts layer when (i + 1) % moe_every_n_layers == 0 (torchtune's moe_every_n_layers; Hugging
  // Face's interleave_moe_layer_step), the others a gated MLP dense_intermediate_dim wide (0: intermediate_dim).
  // Each MoE layer routes every token to its experts_per_token highest-scoring of num_experts experts, each a
  // SwiGLU MLP intermediate_dim wide, plus a shared expert of that width when shared_expert.
  int64_t num_experts = 0;
  int64_t experts_per_token = 1;
  int64_t moe_every_n_layers = 1;
  int64_t dense_intermediate_dim = 0;
  bool shared_expert = true;
  // NoPE layers (Llama 4): layer i with (i + 1) % nope_layer_interval == 0 has no RoPE, attends globally and
  // skips the q/k L2 norm; the others rotate, and with attention_chunk_size attend only within their chunk of
  // that many positions. 0: RoPE in every layer.
  int64_t nope_layer_interval = 0;
  int64_t attention_chunk_size = 0;  // 0: no chunks
  // Llama 4's use_qk_norm: q and k of the RoPE layers divided by their root mean square over head_dim (no
  // learned scale, norm_eps), after RoPE.
  bool qk_l2_norm = false;
  // Llama 4's attention temperature tuning on the NoPE layers: the query at position p is multiplied by
  // 1 + attn_temperature_scale * log(1 + floor((p + 1) / attn_temperature_floor)). 0: off.
  double attn_temperature_floor = 0;
  double attn_temperature_scale = 0.1;
  // 0: the output projection produces vocab_size logits. > 0: it produces num_classes scores per position
  // instead (torchtune's reward/classifier builders); such a model cannot tie its embeddings.
  int64_t num_classes = 0;
  // A proxy (harness/proxy.h): the depth of the model these args were cut from, whose checkpoint has layers
  // from num_layers on that the cut model skips when loading. 0: not cut (every checkpoint tensor is used).
  int64_t layers_cut_from = 0;
  // A proxy whose vocabulary was cut too (harness/proxy.h): the vocabulary of the model these args were cut
  // from. The embedding and output keep their first vocab_size rows of a checkpoint's, and the data's token
  // ids fold into the cut vocabulary (id mod vocab_size). 0: not cut.
  int64_t vocab_cut_from = 0;

  // embed_dim / num_heads unless head_dim is set.
  int64_t resolved_head_dim() const { return head_dim > 0 ? head_dim : (num_heads > 0 ? embed_dim / num_heads : 0); }
  // Width of the output projection: num_classes when set, else vocab_size.
  int64_t output_dim() const { return num_classes > 0 ? num_classes : vocab_size; }
  // The sliding window layer `layer` uses; 0 for global attention.
  int64_t window_of_layer(int64_t layer) const {
    return alternate_sliding_window && layer % 2 != 0 ? 0 : sliding_window;
  }
  // Whether layer `layer` rotates q and k (false on NoPE layers).
  bool rope_in_layer(int64_t layer) const {
    return nope_layer_interval <= 0 || (layer + 1) % nope_layer_interval != 0;
  }
  // Whether layer `layer` is a mixture of experts.
  bool moe_in_layer(int64_t layer) const {
    return num_experts > 0 && moe_every_n_layers > 0 && (layer + 1) % moe_every_n_layers == 0;
  }
  // The width of layer `layer`'s gated MLP (its experts' width in a MoE layer).
  int64_t mlp_dim_of_layer(int64_t layer) const {
    return moe_in_layer(layer) || dense_intermediate_dim <= 0 ? intermediate_dim : dense_intermediate_dim;
  }
};

// Checks the sizes and options; InvalidArgument names the field, the value and the constraint.
Status ValidateDecoderArgs(const DecoderArgs& args);

// The options `args` turns on, by name, in a fixed order: "grouped-query attention", "decoupled head_dim" (heads
// x head_dim != embed_dim),
// "llama3 rope scaling", "half-split rope", "qkv bias", "q/k norm", "geglu (tanh)", "geglu (erf)",
// "scaled embeddings", "(1 + w) norms", "post-norms", "attention soft-cap", "final soft-cap",
// "query_pre_attn_scalar", "sliding window", "alternating sliding window", "tied embeddings", "classifier head".
// For listings, and for checking that two models perform the same operations.
std::vector<std::string> DecoderFeatures(const DecoderArgs& args);

// Where two models differ, field by field in DecoderArgs order, as "<field> (<a> vs <b>)": e.g. to warn when a
// preset is loaded with a checkpoint whose config.json says otherwise (ReadHfConfig). Equivalent spellings are
// equal: head_dim 0 and embed_dim / num_heads, query_pre_attn_scalar 0 and head_dim. Empty when none.
std::vector<std::string> DecoderArgsDifferences(const DecoderArgs& a, const DecoderArgs& b);
// ValidateLoraArgs(lora) plus the checks that need the model: apply_to_output needs untied embeddings.
Status ValidateLoraArgs(const LoraArgs& lora, const DecoderArgs& args);

// Token embedding: weight [num_embeddings, dim], initialised N(0, 1/dim) so that a tied output projection
// starts with unit-variance logits (loss near ln(vocab)) when a model is trained from its seed.
//
// With `tied` (the weight is also the output projection) the lookup's gradient is sparse: the token rows alone.
// Backward reaches the lookup last, after the output projection's dense [num_embeddings, dim] gradient, and
// autograd adds a sparse gradient into a dense one in place (its InputBuffer), so the weight's gradient is that
// dense tensor with the token rows added: no zero-filled [num_embeddings, dim] tensor for the lookup, no pass
// summing the two. Only for a tied weight: used by the lookup alone, the weight's .grad would be sparse, which
// the optimizers refuse.
class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t dim, c10::TensorOptions options = {}, bool tied = false);
  torch::Tensor forward(const torch::Tensor& tokens);  // [...] int -> [..., dim]
  const torch::Tensor& weight() const { return weight_; }

 private:
  torch::Tensor weight_;
  bool tied_ = false;
};
TORCH_MODULE(Embedding);

// RMSNorm as torchtune: normalise in float32, then either cast back to x's dtype and multiply by `scale`
// (ones at init), or with plus_one multiply by (1 + scale) in float32 and cast back (Gemma; zeros at init).
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps, c10::TensorOptions options = {}, bool plus_one = false);
  torch::Tensor forward(const torch::Tensor& x);
  // {x + addend, forward(x + addend)}, on the CPU in one pass each way (AddRmsNorm).
  std::pair<torch::Tensor, torch::Tensor> add_and_forward(const torch::Tensor& x, const torch::Tensor& addend);

 private:
  double eps_;
  bool plus_one_;
  torch::Tensor scale_;
};
TORCH_MODULE(RMSNorm);

// The keys and values one attention layer has computed so far, for incremental decoding (DecoderImpl::
// SetupCaches): k and v [batch, kv_heads, capacity, head_dim] in the model's dtype and device, filled from
// position 0 up to the decoder's cache_position().
struct LayerKvCache {
  torch::Tensor k, v;
};

// Which projections of one layer carry a LoRA adapter, and its shape.
struct LayerLora {
  LoraAdapterOptions adapter;
  bool q_proj = false, k_proj = false, v_proj = false, output_proj = false, mlp = false;
  bool quantize_base = false;  // NF4 bases for all seven projections (LoraArgs::quantize_base)
};

// The adapters `lora` puts on a layer (none without it): its projections from attn_modules, the MLP's.
LayerLora LayerLoraFor(const std::optional<LoraArgs>& lora);
// A projection's adapter options where `on`, none otherwise.
std::optional<LoraAdapterOptions> AdapterIf(bool on, const LayerLora& lora);

// OK where `value` > 0; otherwise InvalidArgument "<field>: must be positive, got <value>". `field` names the
// argument as the user wrote it, with its subject where one is needed ("vision encoder tile_size").
Status MustBePositive(const std::string& field, int64_t value);

// Causal grouped-query self-attention with RoPE. q_proj [heads*head_dim, dim], k_proj/v_proj
// [kv_heads*head_dim, dim], output_proj [dim, heads*head_dim]; each kv head serves heads/kv_heads query heads.
class AttentionImpl : public torch::nn::Module {
 public:
  // `layer` selects the sliding window (DecoderArgs::window_of_layer).
  AttentionImpl(const DecoderArgs& args, const LayerLora& lora, c10::TensorOptions options = {}, int64_t layer = 0);
  // x [B, T, dim], cos/sin [T, head_dim/2] (or [B, T, head_dim/2]) -> [B, T, dim]. Position t attends to
  // positions max(0, t - window + 1) .. t; with `document_ids` [B, T] (packed samples), only to those of its
  // own document. With a `cache`, x holds positions start .. start+T-1: their keys and values are written into
  // the cache there, and they attend to the cached positions before them too (no document_ids then).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& document_ids = {}, LayerKvCache* cache = nullptr, int64_t start = 0);

  int64_t sliding_window() const { return window_; }

 private:
  int64_t num_heads_, num_kv_heads_, head_dim_, window_;
  double scale_;
  bool custom_scale_;  // query_pre_attn_scalar set
  double softcap_;
  RopeLayout rope_layout_;
  bool use_rope_;             // false on a NoPE layer
  int64_t chunk_;             // chunked attention: positions per chunk; 0: none
  double l2_norm_eps_;        // q/k L2 norm's epsilon; 0: off
  double temperature_floor_;  // attention temperature tuning; 0: off
  double temperature_scale_;
  // q [B, T, heads, head_dim] at positions start.. (or `doc_positions` [B, T] when defined) scaled by Llama 4's
  // temperature (DecoderArgs).
  torch::Tensor TemperatureTuned(const torch::Tensor& q, int64_t start, const torch::Tensor& doc_positions) const;
  Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, output_proj_{nullptr};
  RMSNorm q_norm_{nullptr}, k_norm_{nullptr};
};
TORCH_MODULE(Attention);

// Gated MLP: w2(act(w1 x) * w3 x); w1, w3 [hidden, dim], w2 [dim, hidden].
class FeedForwardImpl : public torch::nn::Module {
 public:
  // `hidden`: the width; 0 takes args.intermediate_dim.
  FeedForwardImpl(const DecoderArgs& args, const LayerLora& lora, c10::TensorOptions options = {}, int64_t hidden = 0);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  MlpActivation activation_;
  Linear w1_{nullptr}, w2_{nullptr}, w3_{nullptr};
};
TORCH_MODULE(FeedForward);

// One pre-norm decoder layer (with post-norms when args.post_norms).
class TransformerLayerImpl : public torch::nn::Module {
 public:
  TransformerLayerImpl(const DecoderArgs& args, const LayerLora& lora, c10::TensorOptions options = {},
                       int64_t layer = 0);
  // `cache` and `start` as AttentionImpl::forward.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& document_ids = {}, LayerKvCache* cache = nullptr, int64_t start = 0);

  // Tensor parallelism (DecoderImpl::set_partial_sum): applied to the attention's and the MLP's outputs before
  // their residual adds (and post-norms). Empty: none.
  void set_partial_sum(std::function<torch::Tensor(const torch::Tensor&)> sum) { partial_sum_ = std::move(sum); }

 private:
  std::function<torch::Tensor(const torch::Tensor&)> partial_sum_;
  RMSNorm sa_norm_{nullptr};
  Attention attn_{nullptr};
  RMSNorm sa_scale_{nullptr};  // null without post_norms
  RMSNorm mlp_norm_{nullptr};
  FeedForward mlp_{nullptr};    // null in a mixture-of-experts layer
  Moe moe_{nullptr};            // null in a dense layer
  RMSNorm mlp_scale_{nullptr};  // null without post_norms
};
TORCH_MODULE(TransformerLayer);

class DecoderImpl : public torch::nn::Module {
 public:
  // Parameters are created directly with `options` (device + dtype), so building on torch::kMeta allocates
  // nothing. Initialisation draws from the current torch RNG (seed it first for reproducible weights).
  // REQUIRES: ValidateDecoderArgs(args) and, with `lora`, ValidateLoraArgs(*lora, args) are ok (checked; throws
  // c10::Error with the Status message otherwise; use MakeDecoder to get a Status instead).
  explicit DecoderImpl(const DecoderArgs& args, std::optional<LoraArgs> lora = std::nullopt,
                       c10::TensorOptions options = {});

  // tokens [B, T] integer, on the parameters' device, 1 <= T <= max_seq_len, values in [0, vocab_size)
  // -> logits [B, T, output_dim()] in the parameters' dtype. Tokens sit at positions 0..T-1, causally masked.
  // Packed samples (data/packing.h) pass `input_pos` and `document_ids` [B, T] integer: each token is rotated
  // by its position within its document and attends only to earlier tokens of the same document, so a pack
  // gives each document the logits it would get alone.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& input_pos = {},
                        const torch::Tensor& document_ids = {});
  // forward() in two halves: Hidden is the final norm's output [B, T, embed_dim], OutputLogits projects it.
  torch::Tensor Hidden(const torch::Tensor& tokens, const torch::Tensor& input_pos = {},
                       const torch::Tensor& document_ids = {});
  torch::Tensor OutputLogits(const torch::Tensor& hidden);
  // The output projection's weight [output_dim, embed_dim] when OutputLogits(h) is exactly h x weight^T (no LoRA
  // adapter, no bias), soft-capped by args().final_softcap where that is set, so a loss may fuse the projection
  // (recipes/loss.h); else undefined.
  torch::Tensor PlainOutputWeight() const;

  // KV cache for incremental decoding (generation.h), as torchtune's setup_caches: after
  // SetupCaches(batch, capacity), each forward() takes the next tokens [batch, T] of every sequence (the prompt,
  // then one token at a time), places them at positions cache_position() .. cache_position()+T-1, lets them
  // attend to every earlier token of their sequence through the cache, and appends their keys and values, so the
  // logits equal those of one forward() over the whole sequence. input_pos and document_ids must be left empty
  // then, and cache_position() + T may not exceed `capacity` (at most max_seq_len). The cache takes
  // 2 x layers x batch x capacity x kv_heads x head_dim elements of the model's dtype, on its device.
  // ResetCaches() starts again at position 0 (same size); ClearCaches() frees the cache and turns it off.
  // Not under a layer runner (sharded layers).
  void SetupCaches(int64_t batch_size, int64_t capacity);
  void ResetCaches() { cache_position_ = 0; }
  void ClearCaches();
  bool caches_enabled() const { return !kv_caches_.empty(); }
  int64_t cache_position() const { return cache_position_; }
  int64_t cache_capacity() const { return kv_caches_.empty() ? 0 : kv_caches_.front().k.size(2); }

  // Tensor parallelism: this model holds one rank's share of each layer (heads, kv heads and MLP width divided
  // by the ranks; TensorParallelArgs), so the outputs of output_proj and w2 are partial sums, which `sum`
  // completes (an all-reduce over the ranks) before each residual add. Embeddings, norms and the output
  // projection are whole on every rank.
  void set_partial_sum(std::function<torch::Tensor(const torch::Tensor&)> sum);

  // When on (and grad mode is on), each layer keeps only its input during forward and is recomputed in
  // backward (see checkpointing.h); gradients are unchanged. Off by default.
  void set_activation_checkpointing(bool on) { activation_checkpointing_ = on; }
  bool activation_checkpointing() const { return activation_checkpointing_; }
  // Selective checkpointing (torchtune's ac_mode=selective with ac_option=n): with checkpointing on, only layers
  // n-1, 2n-1, ... (every nth, counted from 1) are recomputed; the others keep their activations. 1, the
  // default, or less: every layer.
  void set_activation_checkpointing_every(int64_t n) { checkpoint_every_ = n < 1 ? 1 : n; }
  // Whether layer `index`'s forward is recomputed in backward (checkpointing on and the layer selected).
  bool checkpoints_layer(size_t index) const {
    return activation_checkpointing_ && (static_cast<int64_t>(index) + 1) % checkpoint_every_ == 0;
  }
  // With activation checkpointing on, each layer's kept input waits for backward in host memory instead of on
  // the device (Checkpoint's offload_input; torchtune's enable_activation_offloading). Off by default; has no
  // effect without checkpointing or under a layer runner.
  void set_activation_offloading(bool on) { activation_offloading_ = on; }
  bool activation_offloading() const { return activation_offloading_; }

  // Runs transformer layer `index` on `x` in place of the layer's own forward (and of activation
  // checkpointing): a fully sharded data-parallel run gathers the layer's weights around it
  // (recipes/distributed/sharded_layers.h). Empty: the layer's forward.
  using LayerRunner = std::function<torch::Tensor(size_t index, const torch::Tensor& x, const torch::Tensor& cos,
                                                  const torch::Tensor& sin, const torch::Tensor& document_ids)>;
  void set_layer_runner(LayerRunner runner) { layer_runner_ = std::move(runner); }
  const std::vector<TransformerLayer>& layers() const { return layer_list_; }

  const DecoderArgs& args() const { return args_; }
  const std::optional<LoraArgs>& lora() const { return lora_; }

 private:
  DecoderArgs args_;
  std::optional<LoraArgs> lora_;
  bool activation_checkpointing_ = false;
  int64_t checkpoint_every_ = 1;
  bool activation_offloading_ = false;
  LayerRunner layer_runner_;
  std::vector<LayerKvCache> kv_caches_;  // one per layer while caches are on; empty otherwise
  int64_t cache_position_ = 0;
  torch::Tensor inv_freq_;  // [head_dim/2] float32 on CPU; deliberately not a buffer (meta builds stay valid)
  Embedding tok_embeddings_{nullptr};
  torch::nn::ModuleList layers_{nullptr};
  std::vector<TransformerLayer> layer_list_;
  RMSNorm norm_{nullptr};
  Linear output_{nullptr};  // null when tie_word_embeddings
};
TORCH_MODULE(Decoder);

// One rank's share of `args` in a tensor-parallel model of `ranks` ranks: num_heads, num_kv_heads and
// intermediate_dim divided by `ranks`, head_dim kept. InvalidArgument naming the size that `ranks` does not divide.
StatusOr<DecoderArgs> TensorParallelArgs(const DecoderArgs& args, int64_t ranks);
// Copies rank `rank`'s share of each of `full`'s weights (TensorParallelArgs) into `shard`: the rows of q_proj,
// k_proj, v_proj (and their biases), w1 and w3 that its heads and MLP width compute, the matching columns of
// output_proj and w2, every other tensor whole. REQUIRES: neither has adapters.
void CopyTensorParallelShard(const DecoderImpl& full, int64_t rank, int64_t ranks, DecoderImpl& shard);

// One linear layer of the decoder as `args` shapes it: its module name within a layer ("q_proj", "k_proj",
// "v_proj", "output_proj", "w1", "w2", "w3"; LoRA's names) or "output" for the output projection.
struct LinearShape {
  std::string name;
  int64_t in_features = 0, out_features = 0;
};
// The seven linears of every layer, then "output" unless the embeddings are tied. For estimates and checks that
// must not build the model.
std::vector<LinearShape> LinearShapes(const DecoderArgs& args);

// Validates, then builds. InvalidArgument for bad args; FailedPrecondition when the device runs out of memory.
StatusOr<Decoder> MakeDecoder(const DecoderArgs& args, std::optional<LoraArgs> lora = std::nullopt,
                              c10::TensorOptions options = {});

// Number of parameter elements of `m`, counting a tensor shared by several modules once; with trainable_only,
// only those with requires_grad. Works on meta-device models.
int64_t CountParameters(const torch::nn::Module& m, bool trainable_only = false);

}  // namespace tmx::models
