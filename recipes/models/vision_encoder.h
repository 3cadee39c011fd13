// The image side of Llama 3.2 Vision (torchtune's llama3_2_vision_encoder: a CLIP vision transformer and a
// projection head), as Meta's reference and transformers' MllamaVisionModel compute it.
//
//   images [B, I, tiles, C, tile, tile]  (I images per sample, each cut into up to max_num_tiles tiles)
//   -> conv (patch_size, stride patch_size, no bias) -> [B*I, tiles, patches, D]
//   -> + pre-tile embedding (one vector per tile of the image's tile grid, times tanh(gate))
//   -> class token in front of each tile's patches -> tokens = patches + 1 per tile
//   -> + local token embedding (1 - tanh(gate)) and global token embedding per grid tile (tanh(gate))
//   -> ln_pre -> each tile padded with zero tokens to a multiple of 8 -> num_layers CLIP layers over all tiles
//      of an image (keeping the inputs of the layers named in hidden_states)
//   -> ln_post -> + post-tile embedding -> num_layers_projection gated layers (the projection head's, Meta's
//      global transformer) -> the padding dropped -> concat(output, the kept hidden states) per token
//   -> output linear -> [B, I * tiles * tokens, decoder_embed_dim]
//
// A CLIP layer is pre-norm: x + attn(ln(x)), then + mlp(ln(x)), with float32 LayerNorms (eps 1e-5), multi-head
// attention without biases and no position rotation, mlp = w2(gelu(w1 x + b1)) + b2 at 4x width. A projection
// layer multiplies both branches by tanh of a learned scalar (sa_scale, mlp_scale).
//
// Attention inside the encoder: a token is "padding" when it pads a tile to a multiple of 8, or belongs to a tile
// beyond the image's h x w grid. As Meta's reference (and transformers), two padding tokens never attend to each
// other; every other pair does. torchtune pads nothing; at 1601 tokens a tile (560 / 14 = 40 x 40 patches + 1)
// the two differ, and the checkpoints were trained the reference's way.
//
// State-dict names are torchtune's (its converter maps Meta's and Hugging Face's to them):
//   clip.conv.weight [D, C, p, p], clip.cls_token_embedding.weight [D],
//   clip.token_pos_embedding.{local_token_positional_embedding [tokens, D],
//                             global_token_positional_embedding [T, T, tokens, D], gate [1]},
//   clip.pre_tile_pos_embed.{embedding [T, T, 1, D], gate [1]}, clip.post_tile_pos_embed.{...},
//   clip.ln_pre.{weight,bias}, clip.ln_post.{weight,bias},
//   clip.layers.{i}.{sa_norm,mlp_norm}.{weight,bias}, clip.layers.{i}.attn.{q,k,v,output}_proj.weight,
//   clip.layers.{i}.mlp.{w1,w2}.{weight,bias},
//   projection.layers.{i}.(same as a clip layer) + sa_scale.scale [1], mlp_scale.scale [1],
//   projection.output.{weight [decoder_dim, D * (1 + hidden_states)], bias}
// (T = max_num_tiles). With one tile at most (max_num_tiles 1) there are no tile embeddings, and the token
// embedding is the local one alone, as torchtune builds it.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "recipes/models/lora.h"

namespace tmx::models {

struct VisionEncoderArgs {
  int64_t tile_size = 0;        // pixels on a side of one tile (torchtune's image_size: 560 Instruct, 448 base)
  int64_t patch_size = 0;       // pixels on a side of one patch; divides tile_size
  int64_t max_num_tiles = 4;    // tiles an image may be cut into (the tile embeddings' grid is this on a side)
  int64_t in_channels = 3;      // image channels
  int64_t embed_dim = 0;        // CLIP width D (clip_embed_dim)
  int64_t num_layers = 0;       // CLIP layers (clip_num_layers)
  int64_t num_heads = 0;        // attention heads of every encoder layer; divides embed_dim
  // Indices of CLIP layers whose inputs are concatenated to the output (clip_hidden_states; num_layers means
  // the last layer's output). Strictly increasing, each in [0, num_layers].
  std::vector<int64_t> hidden_states;
  int64_t num_layers_projection = 0;  // gated layers of the projection head
  int64_t decoder_embed_dim = 0;      // width the projection writes (the decoder's)
  double norm_eps = 1e-5;             // LayerNorm epsilon

  int64_t patches_per_tile() const { return patch_size > 0 ? (tile_size / patch_size) * (tile_size / patch_size) : 0; }
  // Patches plus the class token: what one tile gives the decoder.
  int64_t tokens_per_tile() const { return patches_per_tile() + 1; }
  int64_t head_dim() const { return num_heads > 0 ? embed_dim / num_heads : 0; }
};

// InvalidArgument naming the field, the value and the constraint.
Status ValidateVisionEncoderArgs(const VisionEncoderArgs& args);

// Which linears of the encoder carry LoRA adapters: the CLIP layers' (encoder_lora) and the projection head's
// layers and output (fusion_lora), each under `lora`'s attn_modules / apply_to_mlp / apply_to_output.
struct VisionEncoderLora {
  LoraArgs lora;
  bool encoder = false;
  bool fusion = false;
};

// LayerNorm over the last dimension computed in float32 and cast back (torchtune's Fp32LayerNorm).
class Fp32LayerNormImpl : public torch::nn::Module {
 public:
  Fp32LayerNormImpl(int64_t dim, double eps, c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& x);

 private:
  double eps_;
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(Fp32LayerNorm);

// x * tanh(scale), scale [1] starting at 0 (torchtune's TanhGate).
class TanhGateImpl : public torch::nn::Module {
 public:
  explicit TanhGateImpl(c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& x);
  const torch::Tensor& scale() const { return scale_; }

 private:
  torch::Tensor scale_;
};
TORCH_MODULE(TanhGate);

// One vector per tile of an image's h x w tile grid: embedding [T, T, 1, D] and gate [1] (zero at init).
// forward(x [N, tiles, tokens, D], aspect_ratio [N, 2]) adds embedding[r, c] * tanh(gate) to tile r * w + c of
// each image, for the h * w tiles its aspect ratio names; the other tiles (padding) are left alone.
class TilePositionalEmbeddingImpl : public torch::nn::Module {
 public:
  TilePositionalEmbeddingImpl(int64_t max_num_tiles, int64_t dim, c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& aspect_ratio);

 private:
  torch::Tensor embedding_, gate_;
};
TORCH_MODULE(TilePositionalEmbedding);

// The token embedding of a tiled image: local [tokens, D] on every tile times (1 - tanh(gate)), and global
// [T, T, tokens, D] per grid tile times tanh(gate) on the h * w tiles the aspect ratio names.
class TiledTokenPositionalEmbeddingImpl : public torch::nn::Module {
 public:
  TiledTokenPositionalEmbeddingImpl(int64_t max_num_tiles, int64_t tokens, int64_t dim,
                                    c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& aspect_ratio);

 private:
  torch::Tensor local_, global_, gate_;
};
TORCH_MODULE(TiledTokenPositionalEmbedding);

// A CLIP layer (gated: a projection-head layer). forward(x [N, S, D], allowed) where `allowed` is an optional
// boolean attention mask [N, 1, S, S] (true: may attend).
class VisionLayerImpl : public torch::nn::Module {
 public:
  VisionLayerImpl(const VisionEncoderArgs& args, bool gated, const std::optional<LoraArgs>& lora,
                  c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& allowed);

 private:
  int64_t num_heads_, head_dim_;
  Fp32LayerNorm sa_norm_{nullptr}, mlp_norm_{nullptr};
  torch::nn::Module* attn_ = nullptr;  // holds q/k/v/output_proj
  Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, output_proj_{nullptr};
  Linear w1_{nullptr}, w2_{nullptr};
  TanhGate sa_scale_{nullptr}, mlp_scale_{nullptr};  // null unless gated
};
TORCH_MODULE(VisionLayer);

// The encoder: submodules "clip" and "projection" as torchtune's Llama3VisionEncoder.
class VisionEncoderImpl : public torch::nn::Module {
 public:
  // REQUIRES: ValidateVisionEncoderArgs(args).ok() (checked; throws c10::Error).
  VisionEncoderImpl(const VisionEncoderArgs& args, const std::optional<VisionEncoderLora>& lora = std::nullopt,
                    c10::TensorOptions options = {});
  // images [B, I, tiles, C, tile_size, tile_size] (tiles <= max_num_tiles), aspect_ratio [B, I, 2] integer
  // (h, w) tiles per image, h * w <= tiles; an image of aspect ratio (0, 0) or whose tiles are all padding is a
  // padding image. -> [B, I * tiles * tokens_per_tile, decoder_embed_dim].
  torch::Tensor forward(const torch::Tensor& images, const torch::Tensor& aspect_ratio);

  const VisionEncoderArgs& args() const { return args_; }
  // When on (and grad mode is on), each CLIP and projection layer keeps only its input and is recomputed in
  // backward (checkpointing.h); gradients are unchanged. Off by default.
  void set_activation_checkpointing(bool on) { activation_checkpointing_ = on; }
  // The CLIP part and the projection head (torchtune's fusion module), for choosing what trains.
  torch::nn::Module& clip() { return *clip_; }
  torch::nn::Module& projection() { return *projection_; }

 private:
  torch::Tensor Embed(const torch::Tensor& images, const torch::Tensor& aspect_ratio);
  torch::Tensor Project(const torch::Tensor& x, const std::vector<torch::Tensor>& kept, int64_t b, int64_t i,
                        int64_t tiles);

  torch::Tensor RunLayer(VisionLayer& layer, const torch::Tensor& x, const torch::Tensor& allowed);

  VisionEncoderArgs args_;
  bool activation_checkpointing_ = false;
  std::shared_ptr<torch::nn::Module> clip_, projection_;
  torch::Tensor conv_weight_, cls_;
  TiledTokenPositionalEmbedding token_pos_{nullptr};
  TilePositionalEmbedding pre_tile_{nullptr}, post_tile_{nullptr};
  torch::Tensor local_only_;  // with max_num_tiles 1: the token embedding [tokens, D]
  Fp32LayerNorm ln_pre_{nullptr}, ln_post_{nullptr};
  std::vector<VisionLayer> clip_layers_, projection_layers_;
  Linear output_{nullptr};
};
TORCH_MODULE(VisionEncoder);

// [N, 1, S, S] booleans for N images of `tiles` tiles of `tokens` real tokens each padded to `padded`: false
// where both tokens are padding (see above); undefined when nothing is padding. aspect_ratio [N, 2].
torch::Tensor VisionAttentionAllowed(const torch::Tensor& aspect_ratio, int64_t tiles, int64_t tokens,
                                     int64_t padded);

}  // namespace tmx::models
