// Llama 3.2 Vision (torchtune's DeepFusionModel of llama3_2_vision_encoder and llama3_2_vision_decoder; Meta's
// and transformers' Mllama): the image encoder (vision_encoder.h) and a Llama 3 text decoder whose every
// fusion_interval-th layer is preceded by a cross-attention layer reading the encoder's output.
//
//   decoder layer i (1-based i a multiple of fusion_interval):  x = fusion_layer(x, image); x = layer(x)
//   fusion_layer: h = x + tanh(ca_scale) * attn(ca_norm(x), image);  out = h + tanh(mlp_scale) * mlp(mlp_norm(h))
//
// The cross attention is grouped-query attention with per-head RMSNorms of q and k (q_norm, k_norm), no rotary
// embedding, no causal mask; a text position attends to the image tiles its encoder_mask row allows, and a row
// that allows none (text before any image) gets nothing from the layer: both branches are zero there, as torchtune
// and Meta's reference (transformers zeroes the MLP branch only, so its logits differ on such rows). Both gates
// start at zero, so an untrained fusion model gives the text decoder's logits.
//
// Token ids vocab_size .. vocab_size + num_special_tokens - 1 (the first is <|image|>) read a second table,
// tok_embeddings.fusion_embedding.weight; the output projection writes vocab_size logits.
//
// State-dict names are torchtune's: encoder.* (vision_encoder.h), decoder.tok_embeddings.weight,
// decoder.tok_embeddings.fusion_embedding.weight, decoder.layers.{i}.* as a text decoder layer (decoder.h),
// decoder.layers.{i}.fusion_layer.{ca_norm.scale, attn.{q,k,v,output}_proj.weight, attn.{q,k}_norm.scale,
// ca_scale.scale, mlp_norm.scale, mlp.{w1,w2,w3}.weight, mlp_scale.scale}, decoder.norm.scale,
// decoder.output.weight.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "recipes/models/decoder.h"
#include "recipes/models/vision_encoder.h"

namespace tmx::models {

struct VisionModelArgs {
  VisionEncoderArgs encoder;
  // The text decoder: num_layers counts the self-attention layers (fusion layers are extra); untied.
  DecoderArgs decoder;
  int64_t fusion_interval = 4;     // a fusion layer before every fusion_interval-th layer (1-based)
  int64_t num_special_tokens = 8;  // rows of tok_embeddings.fusion_embedding
  // Longest image-token sequence a cross-attention cache holds (torchtune's encoder_max_seq_len); for listings.
  int64_t encoder_max_seq_len = 0;

  // 0-based indices of the decoder layers that carry a fusion layer.
  std::vector<int64_t> fusion_layers() const;
  // The <|image|> token id: the first fusion token.
  int64_t image_token_id() const { return decoder.vocab_size; }
};

// Both halves' checks, and that the encoder projects to the decoder's width.
Status ValidateVisionModelArgs(const VisionModelArgs& args);

// What trains of each part (torchtune's TrainableParams): the decoder's own weights, the encoder's CLIP weights,
// and the fusion weights (the projection head, the fusion layers and the fusion embedding).
enum class Trainable { kFrozen, kLora, kFull };
struct VisionTrainable {
  Trainable decoder = Trainable::kFrozen;
  Trainable encoder = Trainable::kFull;
  Trainable fusion = Trainable::kFull;
};

// One cross-attention layer (torchtune's TransformerCrossAttentionLayer with TanhGate scales).
class CrossAttentionLayerImpl : public torch::nn::Module {
 public:
  CrossAttentionLayerImpl(const DecoderArgs& args, const LayerLora& lora, c10::TensorOptions options = {});
  // x [B, T, D], image [B, S, D], allowed [B, T, S] booleans or undefined (every position sees every token).
  // With a `cache` (generation), the image's keys and values are computed once, on the first call, and read from
  // it afterwards (torchtune's fusion-layer KV cache: the image does not change while tokens are added).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& image, const torch::Tensor& allowed,
                        LayerKvCache* cache = nullptr);

 private:
  int64_t num_heads_, num_kv_heads_, head_dim_;
  RMSNorm ca_norm_{nullptr}, mlp_norm_{nullptr}, q_norm_{nullptr}, k_norm_{nullptr};
  Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, output_proj_{nullptr};
  FeedForward mlp_{nullptr};
  TanhGate ca_scale_{nullptr}, mlp_scale_{nullptr};
};
TORCH_MODULE(CrossAttentionLayer);

class VisionModelImpl : public torch::nn::Module {
 public:
  // `lora` adds adapters to the parts `trainable` marks kLora (its attn_modules, apply_to_mlp, apply_to_output,
  // quantize_base apply within each). REQUIRES: ValidateVisionModelArgs(args).ok() (checked; throws).
  VisionModelImpl(const VisionModelArgs& args, std::optional<LoraArgs> lora = std::nullopt,
                  VisionTrainable trainable = {}, c10::TensorOptions options = {});

  // tokens [B, T]; images [B, I, tiles, C, tile, tile] and aspect_ratio [B, I, 2] (both undefined: text only);
  // encoder_mask [B, T, I * tiles * tokens_per_tile] booleans (undefined: every position sees every image
  // token). -> logits [B, T, vocab_size].
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& images = {},
                        const torch::Tensor& aspect_ratio = {}, const torch::Tensor& encoder_mask = {});
  // The decoder alone on the encoder's output image [B, S, decoder dim] (undefined: text only).
  torch::Tensor Decode(const torch::Tensor& tokens, const torch::Tensor& image, const torch::Tensor& encoder_mask);

  // KV caches for generation, as the text decoder's (DecoderImpl::SetupCaches): after SetupCaches(batch,
  // capacity) each Decode takes the next tokens [batch, T] at positions cache_position() .. +T-1, its
  // encoder_mask [batch, T, S] their rows, and the fusion layers keep the image's keys and values from the first
  // Decode with an image on. ClearCaches frees them.
  void SetupCaches(int64_t batch_size, int64_t capacity);
  void ClearCaches();
  int64_t cache_position() const { return cache_position_; }

  // When on (and grad mode is on), each decoder layer (with its fusion layer) and each encoder layer keeps only its
  // input and is recomputed in backward (checkpointing.h); gradients are unchanged. Off by default.
  void set_activation_checkpointing(bool on);

  // Sets requires_grad on every parameter as `trainable` says (kLora: only that part's adapter weights).
  void SetTrainable(const VisionTrainable& trainable);

  const VisionModelArgs& args() const { return args_; }
  VisionEncoderImpl& encoder() { return *encoder_; }

 private:
  torch::Tensor Embed(const torch::Tensor& tokens);

  torch::Tensor RunLayer(size_t i, const torch::Tensor& h, const torch::Tensor& image, const torch::Tensor& allowed,
                         const torch::Tensor& cos, const torch::Tensor& sin, int64_t start);

  VisionModelArgs args_;
  std::optional<LoraArgs> lora_;
  bool activation_checkpointing_ = false;
  VisionEncoder encoder_{nullptr};
  std::shared_ptr<torch::nn::Module> decoder_;
  torch::Tensor tok_weight_, fusion_weight_;
  std::vector<TransformerLayer> layers_;
  std::vector<CrossAttentionLayer> fusion_;  // per layer; null where the layer has none
  RMSNorm norm_{nullptr};
  Linear output_{nullptr};
  torch::Tensor inv_freq_;
  std::vector<LayerKvCache> kv_caches_, fusion_caches_;  // per layer while caches are on; empty otherwise
  int64_t cache_position_ = 0;
};
TORCH_MODULE(VisionModel);

// Which part a parameter name of a VisionModel belongs to: "fusion" (encoder.projection.*, *.fusion_layer.*,
// decoder.tok_embeddings.fusion_embedding.*), "encoder" (the rest of encoder.*) or "decoder".
std::string_view VisionPartOf(std::string_view name);

// A published size or the tiny preset, under torchtune's builder names.
struct VisionPreset {
  std::string builder;        // "llama3_2_vision_11b"
  std::string lora_builder;   // "lora_llama3_2_vision_11b"
  std::string qlora_builder;  // "qlora_llama3_2_vision_11b"
  VisionModelArgs args;
  // transformers' num_parameters() of MllamaForConditionalGeneration at this size. It keeps the tile embeddings
  // once per supported aspect ratio (9 x T x ...), torchtune and this model once per grid tile (T x T x ...), so
  // CountParameters is lower by RedundantTileParameters(args).
  int64_t published_params = 0;
  std::string hf_checkpoint;  // the Hub repository torchtune's configs download
  std::string description;
  bool tiny = false;
};
const std::vector<VisionPreset>& VisionPresets();
// The preset whose builder, lora_builder or qlora_builder is `name` (plain or "torchtune.models.
// llama3_2_vision.<name>"); nullptr when none.
const VisionPreset* FindVisionPreset(std::string_view name);

// The aspect ratios (h, w) with h * w <= max_num_tiles, h-major: Mllama's supported_aspect_ratios, whose
// 1-based position is a Hugging Face aspect_ratio_id.
std::vector<std::pair<int64_t, int64_t>> SupportedAspectRatios(int64_t max_num_tiles);
// How many more parameters Hugging Face's per-aspect-ratio tile tables hold than the per-grid-tile ones.
int64_t RedundantTileParameters(const VisionEncoderArgs& args);

// Validates, then builds.
StatusOr<VisionModel> MakeVisionModel(const VisionModelArgs& args, std::optional<LoraArgs> lora = std::nullopt,
                                      VisionTrainable trainable = {}, c10::TensorOptions options = {});

}  // namespace tmx::models
