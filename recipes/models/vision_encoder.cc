#include "recipes/models/vision_encoder.h"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "recipes/models/checkpointing.h"
#include "recipes/models/decoder.h"
#include "recipes/models/init.h"

namespace tmx::models {
namespace {

std::optional<LoraAdapterOptions> AdapterFor(const std::optional<LoraArgs>& lora, bool on) {
  if (!lora || !on) return std::nullopt;
  return LoraAdapterOptions{lora->rank, lora->alpha, lora->dropout, lora->use_dora};
}

bool AdaptsAttn(const std::optional<LoraArgs>& lora, const char* name) {
  if (!lora) return false;
  for (const std::string& m : lora->attn_modules) {
    if (m == name) return true;
  }
  return false;
}

// Tokens padded to a multiple of 8, as Meta's reference pads each tile.
int64_t PaddedTokens(int64_t tokens) { return (tokens + 7) / 8 * 8; }

// [N] number of real tiles per image: h * w, at least 1 (the first tile is never padding).
torch::Tensor RealTiles(const torch::Tensor& aspect_ratio) {
  torch::Tensor ar = aspect_ratio.to(torch::kLong);
  return (ar.select(-1, 0) * ar.select(-1, 1)).clamp_min(1);
}

// Adds `table` [T, T, rows, D] * factor to the tiles of x [N, tiles, rows, D] that each image's (h, w) names:
// tile r * w + c gets table[r, c]. Others unchanged. Out of place.
torch::Tensor AddTileTable(const torch::Tensor& x, const torch::Tensor& table, const torch::Tensor& factor,
                           const torch::Tensor& aspect_ratio) {
  const int64_t n = x.size(0), tiles = x.size(1), grid = table.size(0);
  torch::Tensor ar = aspect_ratio.to(torch::kCPU, torch::kLong).reshape({n, 2});
  std::vector<torch::Tensor> rows;
  rows.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t h = ar[i][0].item<int64_t>(), w = ar[i][1].item<int64_t>();
    TORCH_CHECK(h >= 0 && w >= 0 && h <= grid && w <= grid && h * w <= tiles, "vision encoder: aspect ratio (", h,
                ", ", w, ") of image ", i, " does not fit ", tiles, " tiles of a ", grid, " x ", grid, " grid");
    torch::Tensor add = torch::zeros_like(x[i]);
    if (h * w > 0) {
      torch::Tensor part = table.narrow(0, 0, h).narrow(1, 0, w).reshape({h * w, table.size(2), table.size(3)});
      part = part.expand({h * w, x.size(2), x.size(3)});
      add = torch::cat({part.to(x.dtype()) * factor, add.narrow(0, h * w, tiles - h * w)}, 0);
    }
    rows.push_back(x[i] + add);
  }
  return torch::stack(rows);
}

}  // namespace

Status ValidateVisionEncoderArgs(const VisionEncoderArgs& a) {
  TM_RETURN_IF_ERROR(MustBePositive("vision encoder tile_size", a.tile_size));
  TM_RETURN_IF_ERROR(MustBePositive("vision encoder patch_size", a.patch_size));
  TM_RETURN_IF_ERROR(MustBePositive("vision encoder max_num_tiles", a.max_num_tiles));
  TM_RETURN_IF_ERROR(MustBePositive("vision encoder in_channels", a.in_channels));
  TM_RETURN_IF_ERROR(MustBePositive("vision encoder embed_dim", a.embed_dim));
  TM_RETURN_IF_ERROR(MustBePositive("vision encoder num_layers", a.num_layers));
  TM_RETURN_IF_ERROR(MustBePositive("vision encoder num_heads", a.num_heads));
  TM_RETURN_IF_ERROR(MustBePositive("vision encoder decoder_embed_dim", a.decoder_embed_dim));
  if (a.num_layers_projection < 0) {
    return Status::InvalidArgument("vision encoder num_layers_projection: must be 0 or more, got " +
                                   std::to_string(a.num_layers_projection));
  }
  if (a.tile_size % a.patch_size != 0) {
    return Status::InvalidArgument("vision encoder patch_size: must divide tile_size (" + std::to_string(a.tile_size) +
                                   "), got " + std::to_string(a.patch_size));
  }
  if (a.embed_dim % a.num_heads != 0) {
    return Status::InvalidArgument("vision encoder num_heads: must divide embed_dim (" + std::to_string(a.embed_dim) +
                                   "), got " + std::to_string(a.num_heads));
  }
  int64_t previous = -1;
  for (int64_t index : a.hidden_states) {
    if (index <= previous || index > a.num_layers) {
      return Status::InvalidArgument("vision encoder hidden_states: must increase strictly within [0, num_layers=" +
                                     std::to_string(a.num_layers) + "], got " + std::to_string(index));
    }
    previous = index;
  }
  if (!(a.norm_eps > 0)) return Status::InvalidArgument("vision encoder norm_eps: must be positive");
  return Status::OK();
}

Fp32LayerNormImpl::Fp32LayerNormImpl(int64_t dim, double eps, c10::TensorOptions options) : eps_(eps) {
  options = options.requires_grad(false);
  weight_ = register_parameter("weight", torch::ones({dim}, options));
  bias_ = register_parameter("bias", torch::zeros({dim}, options));
}

torch::Tensor Fp32LayerNormImpl::forward(const torch::Tensor& x) {
  return at::layer_norm(x.to(torch::kFloat), {x.size(-1)}, weight_.to(torch::kFloat), bias_.to(torch::kFloat), eps_)
      .to(x.scalar_type());
}

TanhGateImpl::TanhGateImpl(c10::TensorOptions options) {
  scale_ = register_parameter("scale", torch::zeros({1}, options.requires_grad(false)));
}

torch::Tensor TanhGateImpl::forward(const torch::Tensor& x) { return x * scale_.tanh(); }

TilePositionalEmbeddingImpl::TilePositionalEmbeddingImpl(int64_t max_num_tiles, int64_t dim,
                                                         c10::TensorOptions options) {
  options = options.requires_grad(false);
  embedding_ = register_parameter("embedding", torch::empty({max_num_tiles, max_num_tiles, 1, dim}, options));
  gate_ = register_parameter("gate", torch::zeros({1}, options));
  torch::NoGradGuard no_grad;
  NormalInit(embedding_, 0, 1.0 / std::sqrt(static_cast<double>(dim)));
}

torch::Tensor TilePositionalEmbeddingImpl::forward(const torch::Tensor& x, const torch::Tensor& aspect_ratio) {
  return AddTileTable(x, embedding_, gate_.tanh(), aspect_ratio);
}

TiledTokenPositionalEmbeddingImpl::TiledTokenPositionalEmbeddingImpl(int64_t max_num_tiles, int64_t tokens,
                                                                     int64_t dim, c10::TensorOptions options) {
  options = options.requires_grad(false);
  local_ = register_parameter("local_token_positional_embedding", torch::empty({tokens, dim}, options));
  global_ = register_parameter("global_token_positional_embedding",
                               torch::empty({max_num_tiles, max_num_tiles, tokens, dim}, options));
  gate_ = register_parameter("gate", torch::zeros({1}, options));
  torch::NoGradGuard no_grad;
  NormalInit(local_, 0, 1.0 / std::sqrt(static_cast<double>(dim)));
  NormalInit(global_, 0, 1.0 / std::sqrt(static_cast<double>(dim)));
}

torch::Tensor TiledTokenPositionalEmbeddingImpl::forward(const torch::Tensor& x, const torch::Tensor& aspect_ratio) {
  torch::Tensor tanh = gate_.tanh();
  torch::Tensor h = x + local_.to(x.dtype()) * (1 - tanh);
  return AddTileTable(h, global_, tanh, aspect_ratio);
}

VisionLayerImpl::VisionLayerImpl(const VisionEncoderArgs& args, bool gated, const std::optional<LoraArgs>& lora,
                                 c10::TensorOptions options)
    : num_heads_(args.num_heads), head_dim_(args.head_dim()) {
  const int64_t d = args.embed_dim;
  const bool nf4 = lora && lora->quantize_base;
  sa_norm_ = register_module("sa_norm", Fp32LayerNorm(d, args.norm_eps, options));
  auto attn = register_module("attn", std::make_shared<torch::nn::Module>("VisionAttention"));
  attn_ = attn.get();
  auto proj = [&](const char* name) {
    return attn->register_module(name, Linear(d, d, options, AdapterFor(lora, AdaptsAttn(lora, name)), false, nf4));
  };
  q_proj_ = proj("q_proj");
  k_proj_ = proj("k_proj");
  v_proj_ = proj("v_proj");
  output_proj_ = proj("output_proj");
  mlp_norm_ = register_module("mlp_norm", Fp32LayerNorm(d, args.norm_eps, options));
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>("VisionMlp"));
  const auto mlp_adapter = AdapterFor(lora, lora && lora->apply_to_mlp);
  w1_ = mlp->register_module("w1", Linear(d, 4 * d, options, mlp_adapter, /*bias=*/true, nf4));
  w2_ = mlp->register_module("w2", Linear(4 * d, d, options, mlp_adapter, /*bias=*/true, nf4));
  if (gated) {
    sa_scale_ = register_module("sa_scale", TanhGate(options));
    mlp_scale_ = register_module("mlp_scale", TanhGate(options));
  }
}

torch::Tensor VisionLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& allowed) {
  const int64_t n = x.size(0), s = x.size(1);
  torch::Tensor h = sa_norm_(x);
  auto heads = [&](Linear& proj) { return proj(h).view({n, s, num_heads_, head_dim_}).transpose(1, 2); };
  torch::Tensor q = heads(q_proj_), k = heads(k_proj_), v = heads(v_proj_);
  std::optional<torch::Tensor> mask;
  if (allowed.defined()) mask = allowed;
  torch::Tensor attn = at::scaled_dot_product_attention(q, k, v, mask);
  attn = output_proj_(attn.transpose(1, 2).reshape({n, s, num_heads_ * head_dim_}));
  torch::Tensor out = x + (sa_scale_ ? sa_scale_(attn) : attn);
  torch::Tensor mlp = w2_(torch::gelu(w1_(mlp_norm_(out))));
  return out + (mlp_scale_ ? mlp_scale_(mlp) : mlp);
}

torch::Tensor VisionAttentionAllowed(const torch::Tensor& aspect_ratio, int64_t tiles, int64_t tokens,
                                     int64_t padded) {
  torch::Tensor real_tiles = RealTiles(aspect_ratio).reshape({-1});
  const int64_t n = real_tiles.size(0);
  if (padded == tokens && (real_tiles >= tiles).all().item<bool>()) return {};
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(real_tiles.device());
  torch::Tensor tile = torch::arange(tiles, longs).view({1, tiles, 1});
  torch::Tensor token = torch::arange(padded, longs).view({1, 1, padded});
  torch::Tensor pad = (tile >= real_tiles.view({n, 1, 1})) | (token >= tokens);  // [N, tiles, padded]
  pad = pad.reshape({n, tiles * padded});
  return (pad.unsqueeze(2) & pad.unsqueeze(1)).logical_not().unsqueeze(1);
}

VisionEncoderImpl::VisionEncoderImpl(const VisionEncoderArgs& args, const std::optional<VisionEncoderLora>& lora,
                                     c10::TensorOptions options)
    : args_(args) {
  const Status valid = ValidateVisionEncoderArgs(args_);
  TORCH_CHECK(valid.ok(), "VisionEncoder: ", valid.message());
  options = options.requires_grad(false);
  const int64_t d = args_.embed_dim, p = args_.patch_size;
  clip_ = register_module("clip", std::make_shared<torch::nn::Module>("VisionTransformer"));
  projection_ = register_module("projection", std::make_shared<torch::nn::Module>("VisionProjectionHead"));
  conv_weight_ = clip_->register_module("conv", std::make_shared<torch::nn::Module>("Conv2d"))
                     ->register_parameter("weight", torch::empty({d, args_.in_channels, p, p}, options));
  cls_ = clip_->register_module("cls_token_embedding", std::make_shared<torch::nn::Module>("CLSEmbedding"))
             ->register_parameter("weight", torch::empty({d}, options));
  {
    torch::NoGradGuard no_grad;
    const double fan_in = static_cast<double>(args_.in_channels * p * p);
    UniformInit(conv_weight_, -1 / std::sqrt(fan_in), 1 / std::sqrt(fan_in));
    NormalInit(cls_, 0, 1 / std::sqrt(static_cast<double>(d)));
  }
  const int64_t tiles = args_.max_num_tiles, tokens = args_.tokens_per_tile();
  if (tiles > 1) {
    pre_tile_ = clip_->register_module("pre_tile_pos_embed", TilePositionalEmbedding(tiles, d, options));
    post_tile_ = clip_->register_module("post_tile_pos_embed", TilePositionalEmbedding(tiles, d, options));
    token_pos_ =
        clip_->register_module("token_pos_embedding", TiledTokenPositionalEmbedding(tiles, tokens, d, options));
  } else {
    local_only_ = clip_->register_module("token_pos_embedding", std::make_shared<torch::nn::Module>("TokenPos"))
                      ->register_parameter("positional_embedding", torch::empty({tokens, d}, options));
    torch::NoGradGuard no_grad;
    NormalInit(local_only_, 0, 1 / std::sqrt(static_cast<double>(d)));
  }
  ln_pre_ = clip_->register_module("ln_pre", Fp32LayerNorm(d, args_.norm_eps, options));
  ln_post_ = clip_->register_module("ln_post", Fp32LayerNorm(d, args_.norm_eps, options));
  const auto encoder_lora = lora && lora->encoder ? std::optional<LoraArgs>(lora->lora) : std::nullopt;
  const auto fusion_lora = lora && lora->fusion ? std::optional<LoraArgs>(lora->lora) : std::nullopt;
  auto clip_list = clip_->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < args_.num_layers; ++i) {
    clip_layers_.push_back(VisionLayer(args_, /*gated=*/false, encoder_lora, options));
    clip_list->push_back(clip_layers_.back());
  }
  auto projection_list = projection_->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < args_.num_layers_projection; ++i) {
    projection_layers_.push_back(VisionLayer(args_, /*gated=*/true, fusion_lora, options));
    projection_list->push_back(projection_layers_.back());
  }
  const int64_t in = d * (1 + static_cast<int64_t>(args_.hidden_states.size()));
  const bool adapt_output = fusion_lora && fusion_lora->apply_to_output;
  output_ = projection_->register_module(
      "output", Linear(in, args_.decoder_embed_dim, options, AdapterFor(fusion_lora, adapt_output), /*bias=*/true,
                       /*quantize_base=*/false));
}

torch::Tensor VisionEncoderImpl::Embed(const torch::Tensor& images, const torch::Tensor& aspect_ratio) {
  const int64_t n = images.size(0) * images.size(1), tiles = images.size(2);
  torch::Tensor flat = images.reshape({n * tiles, images.size(3), images.size(4), images.size(5)});
  torch::Tensor x = at::conv2d(flat.to(conv_weight_.dtype()), conv_weight_, {}, args_.patch_size);
  // [n * tiles, D, g, g] -> [n, tiles, patches, D], patch r * g + c
  x = x.flatten(2).transpose(1, 2).reshape({n, tiles, args_.patches_per_tile(), args_.embed_dim});
  if (pre_tile_) x = pre_tile_(x, aspect_ratio);
  torch::Tensor cls = cls_.to(x.dtype()).view({1, 1, 1, args_.embed_dim}).expand({n, tiles, 1, args_.embed_dim});
  x = torch::cat({cls, x}, 2);
  x = token_pos_ ? token_pos_(x, aspect_ratio) : x + local_only_.to(x.dtype());
  return ln_pre_(x);
}

torch::Tensor VisionEncoderImpl::forward(const torch::Tensor& images, const torch::Tensor& aspect_ratio) {
  TORCH_CHECK(images.dim() == 6, "VisionEncoder: expected images [batch, images, tiles, channels, h, w], got ",
              images.sizes());
  TORCH_CHECK(images.size(2) <= args_.max_num_tiles && images.size(3) == args_.in_channels &&
                  images.size(4) == args_.tile_size && images.size(5) == args_.tile_size,
              "VisionEncoder: images ", images.sizes(), " do not match at most ", args_.max_num_tiles, " tiles of ",
              args_.in_channels, " x ", args_.tile_size, " x ", args_.tile_size);
  const int64_t b = images.size(0), i = images.size(1), tiles = images.size(2);
  const int64_t n = b * i, d = args_.embed_dim, tokens = args_.tokens_per_tile();
  const int64_t padded = PaddedTokens(tokens);
  torch::Tensor ratio = aspect_ratio.reshape({n, 2});
  torch::Tensor x = Embed(images, ratio);
  x = at::constant_pad_nd(x, {0, 0, 0, padded - tokens}).reshape({n, tiles * padded, d});
  torch::Tensor allowed = VisionAttentionAllowed(ratio.to(x.device()), tiles, tokens, padded);
  std::vector<torch::Tensor> kept;
  for (int64_t layer = 0; layer < static_cast<int64_t>(clip_layers_.size()); ++layer) {
    for (int64_t index : args_.hidden_states) {
      if (index == layer) kept.push_back(x);
    }
    x = RunLayer(clip_layers_[layer], x, allowed);
  }
  if (!args_.hidden_states.empty() && args_.hidden_states.back() == args_.num_layers) kept.push_back(x);
  x = ln_post_(x);
  if (post_tile_) x = post_tile_(x.view({n, tiles, padded, d}), ratio).reshape({n, tiles * padded, d});
  for (VisionLayer& layer : projection_layers_) x = RunLayer(layer, x, allowed);
  return Project(x, kept, b, i, tiles);
}

torch::Tensor VisionEncoderImpl::RunLayer(VisionLayer& layer, const torch::Tensor& x, const torch::Tensor& allowed) {
  if (!activation_checkpointing_ || !torch::GradMode::is_enabled()) return layer->forward(x, allowed);
  std::shared_ptr<VisionLayerImpl> impl = layer.ptr();
  return Checkpoint([impl, allowed](const torch::Tensor& in) { return impl->forward(in, allowed); }, x,
                    impl->parameters());
}

torch::Tensor VisionEncoderImpl::Project(const torch::Tensor& x, const std::vector<torch::Tensor>& kept, int64_t b,
                                         int64_t i, int64_t tiles) {
  const int64_t tokens = args_.tokens_per_tile(), padded = PaddedTokens(tokens), d = args_.embed_dim;
  auto unpad = [&](const torch::Tensor& t) { return t.view({b * i, tiles, padded, d}).narrow(2, 0, tokens); };
  torch::Tensor h = unpad(x);
  if (!kept.empty()) {
    std::vector<torch::Tensor> parts;
    for (const torch::Tensor& k : kept) parts.push_back(unpad(k));
    // [.., D, k] flattened: channel c of hidden state j lands at c * k + j, as the reference stacks them.
    torch::Tensor stacked = torch::stack(parts, -1).reshape({b * i, tiles, tokens, -1});
    h = torch::cat({h, stacked}, -1);
  }
  return output_(h).reshape({b, i * tiles * tokens, args_.decoder_embed_dim});
}

}  // namespace tmx::models
