#include "recipes/models/vision_model.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "base/text.h"
#include "recipes/models/checkpointing.h"
#include "recipes/models/init.h"
#include "recipes/models/rope.h"

namespace tmx::models {
namespace {

// The adapters of one part of the model (the decoder's layers, its fusion layers): `lora`'s where the part is
// trained with LoRA (`on`), none otherwise.
LayerLora LayerLoraOf(const std::optional<LoraArgs>& lora, bool on) { return on ? LayerLoraFor(lora) : LayerLora(); }

bool IsAdapterWeight(const std::string& name) {
  return EndsWith(name, "lora_a.weight") || EndsWith(name, "lora_b.weight") || EndsWith(name, ".magnitude");
}

}  // namespace

std::vector<int64_t> VisionModelArgs::fusion_layers() const {
  std::vector<int64_t> out;
  for (int64_t i = 1; fusion_interval > 0 && i <= decoder.num_layers; ++i) {
    if (i % fusion_interval == 0) out.push_back(i - 1);
  }
  return out;
}

Status ValidateVisionModelArgs(const VisionModelArgs& args) {
  TM_RETURN_IF_ERROR(ValidateVisionEncoderArgs(args.encoder));
  TM_RETURN_IF_ERROR(ValidateDecoderArgs(args.decoder));
  if (args.fusion_interval <= 0) {
    return Status::InvalidArgument("fusion_interval: must be positive, got " + std::to_string(args.fusion_interval));
  }
  if (args.num_special_tokens <= 0) {
    return Status::InvalidArgument("num_special_tokens: must be positive (the first is <|image|>), got " +
                                   std::to_string(args.num_special_tokens));
  }
  if (args.encoder.decoder_embed_dim != args.decoder.embed_dim) {
    return Status::InvalidArgument("vision encoder decoder_embed_dim " + std::to_string(args.encoder.decoder_embed_dim) +
                                   " differs from the decoder's embed_dim " + std::to_string(args.decoder.embed_dim));
  }
  if (args.decoder.tie_word_embeddings || args.decoder.num_classes > 0) {
    return Status::InvalidArgument("the vision decoder has an untied language-model head; unset "
                                   "tie_word_embeddings and num_classes");
  }
  return Status::OK();
}

CrossAttentionLayerImpl::CrossAttentionLayerImpl(const DecoderArgs& args, const LayerLora& lora,
                                                 c10::TensorOptions options)
    : num_heads_(args.num_heads), num_kv_heads_(args.num_kv_heads), head_dim_(args.resolved_head_dim()) {
  options = options.requires_grad(false);
  const int64_t d = args.embed_dim, q = num_heads_ * head_dim_, kv = num_kv_heads_ * head_dim_;
  const bool nf4 = lora.quantize_base;
  ca_norm_ = register_module("ca_norm", RMSNorm(d, args.norm_eps, options));
  auto attn = register_module("attn", std::make_shared<torch::nn::Module>("CrossAttention"));
  q_proj_ = attn->register_module("q_proj", Linear(d, q, options, AdapterIf(lora.q_proj, lora), false, nf4));
  k_proj_ = attn->register_module("k_proj", Linear(d, kv, options, AdapterIf(lora.k_proj, lora), false, nf4));
  v_proj_ = attn->register_module("v_proj", Linear(d, kv, options, AdapterIf(lora.v_proj, lora), false, nf4));
  output_proj_ =
      attn->register_module("output_proj", Linear(q, d, options, AdapterIf(lora.output_proj, lora), false, nf4));
  q_norm_ = attn->register_module("q_norm", RMSNorm(head_dim_, args.norm_eps, options));
  k_norm_ = attn->register_module("k_norm", RMSNorm(head_dim_, args.norm_eps, options));
  ca_scale_ = register_module("ca_scale", TanhGate(options));
  mlp_norm_ = register_module("mlp_norm", RMSNorm(d, args.norm_eps, options));
  mlp_ = register_module("mlp", FeedForward(args, lora, options));
  mlp_scale_ = register_module("mlp_scale", TanhGate(options));
}

torch::Tensor CrossAttentionLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& image,
                                               const torch::Tensor& allowed, LayerKvCache* cache) {
  const int64_t b = x.size(0), t = x.size(1);
  torch::Tensor q = q_norm_(q_proj_(ca_norm_(x)).view({b, t, num_heads_, head_dim_})).transpose(1, 2);
  torch::Tensor k, v;
  if (cache != nullptr && cache->k.defined()) {
    k = cache->k;
    v = cache->v;
  } else {
    const int64_t s = image.size(1);
    k = k_norm_(k_proj_(image).view({b, s, num_kv_heads_, head_dim_})).transpose(1, 2);
    v = v_proj_(image).view({b, s, num_kv_heads_, head_dim_}).transpose(1, 2);
    if (cache != nullptr) *cache = {k, v};
  }
  if (num_heads_ != num_kv_heads_) {
    k = k.repeat_interleave(num_heads_ / num_kv_heads_, 1);
    v = v.repeat_interleave(num_heads_ / num_kv_heads_, 1);
  }
  std::optional<torch::Tensor> mask;
  torch::Tensor skip;  // [B, T, 1]: rows that see no image token
  if (allowed.defined()) {
    skip = allowed.any(-1, /*keepdim=*/true).logical_not();
    mask = (allowed | skip).unsqueeze(1);  // such rows attend everywhere; their output is zeroed below
  }
  torch::Tensor attn = at::scaled_dot_product_attention(q, k, v, mask);
  attn = output_proj_(attn.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_}));
  if (skip.defined()) attn = attn.masked_fill(skip, 0);
  torch::Tensor h = x + ca_scale_(attn);
  torch::Tensor mlp = mlp_(mlp_norm_(h));
  if (skip.defined()) mlp = mlp.masked_fill(skip, 0);
  return h + mlp_scale_(mlp);
}

VisionModelImpl::VisionModelImpl(const VisionModelArgs& args, std::optional<LoraArgs> lora,
                                 VisionTrainable trainable, c10::TensorOptions options)
    : args_(args), lora_(std::move(lora)) {
  const Status valid = ValidateVisionModelArgs(args_);
  TORCH_CHECK(valid.ok(), "VisionModel: ", valid.message());
  options = options.requires_grad(false);
  const bool decoder_lora = trainable.decoder == Trainable::kLora, fusion_lora = trainable.fusion == Trainable::kLora;
  std::optional<VisionEncoderLora> encoder_lora;
  if (lora_) encoder_lora = VisionEncoderLora{*lora_, trainable.encoder == Trainable::kLora, fusion_lora};
  encoder_ = register_module("encoder", VisionEncoder(args_.encoder, encoder_lora, options));
  const DecoderArgs& d = args_.decoder;
  inv_freq_ = RopeInverseFrequencies(d.resolved_head_dim(), d.rope_base, d.rope_scaling);
  decoder_ = register_module("decoder", std::make_shared<torch::nn::Module>("VisionDecoder"));
  auto embeddings = decoder_->register_module("tok_embeddings", std::make_shared<torch::nn::Module>("Fusion"));
  tok_weight_ = embeddings->register_parameter("weight", torch::empty({d.vocab_size, d.embed_dim}, options));
  fusion_weight_ = embeddings->register_module("fusion_embedding", std::make_shared<torch::nn::Module>("Embedding"))
                       ->register_parameter("weight", torch::empty({args_.num_special_tokens, d.embed_dim}, options));
  {
    torch::NoGradGuard no_grad;
    NormalInit(tok_weight_, 0, 1 / std::sqrt(static_cast<double>(d.embed_dim)));
    NormalInit(fusion_weight_, 0, 1 / std::sqrt(static_cast<double>(d.embed_dim)));
  }
  auto list = decoder_->register_module("layers", torch::nn::ModuleList());
  const LayerLora self_lora = LayerLoraOf(lora_, decoder_lora), cross_lora = LayerLoraOf(lora_, fusion_lora);
  const std::vector<int64_t> fused = args_.fusion_layers();
  for (int64_t i = 0; i < d.num_layers; ++i) {
    layers_.push_back(TransformerLayer(d, self_lora, options, i));
    fusion_.push_back(CrossAttentionLayer(nullptr));
    if (std::find(fused.begin(), fused.end(), i) != fused.end()) {
      // torchtune's FusionLayer keeps the layer's own names and adds fusion_layer.* beside them.
      fusion_.back() = layers_.back()->register_module("fusion_layer", CrossAttentionLayer(d, cross_lora, options));
    }
    list->push_back(layers_.back());
  }
  norm_ = decoder_->register_module("norm", RMSNorm(d.embed_dim, d.norm_eps, options));
  const bool adapt_output = decoder_lora && lora_ && lora_->apply_to_output;
  output_ = decoder_->register_module(
      "output", Linear(d.embed_dim, d.vocab_size, options, AdapterIf(adapt_output, self_lora)));
  SetTrainable(trainable);
}

torch::Tensor VisionModelImpl::Embed(const torch::Tensor& tokens) {
  const int64_t vocab = args_.decoder.vocab_size;
  torch::Tensor is_fusion = tokens >= vocab;
  torch::Tensor text = at::embedding(tok_weight_, tokens.masked_fill(is_fusion, 0));
  if (!is_fusion.any().item<bool>()) return text;
  torch::Tensor special = at::embedding(fusion_weight_, (tokens - vocab).clamp(0, args_.num_special_tokens - 1));
  return torch::where(is_fusion.unsqueeze(-1), special, text);
}

torch::Tensor VisionModelImpl::Decode(const torch::Tensor& tokens, const torch::Tensor& image,
                                      const torch::Tensor& encoder_mask) {
  TORCH_CHECK(tokens.dim() == 2, "VisionModel: expected tokens [batch, seq_len], got ", tokens.sizes());
  const int64_t t = tokens.size(1);
  TORCH_CHECK(t >= 1 && t <= args_.decoder.max_seq_len, "VisionModel: sequence length ", t, " is outside [1, ",
              args_.decoder.max_seq_len, "]");
  TORCH_CHECK(!encoder_mask.defined() || !image.defined() ||
                  encoder_mask.sizes() == torch::IntArrayRef({tokens.size(0), t, image.size(1)}),
              "VisionModel: encoder_mask ", encoder_mask.sizes(), " must be [batch, seq_len, image tokens]");
  const bool cached = !kv_caches_.empty();
  const int64_t start = cached ? cache_position_ : 0;
  TORCH_CHECK(!cached || (tokens.size(0) == kv_caches_.front().k.size(0) &&
                          t <= kv_caches_.front().k.size(2) - start),
              "VisionModel: ", t, " tokens at cache position ", start, " do not fit the KV cache ",
              kv_caches_.front().k.sizes());
  torch::Tensor h = Embed(tokens);
  torch::Tensor positions =
      torch::arange(start, start + t, torch::TensorOptions().dtype(torch::kFloat).device(h.device()));
  torch::Tensor angles = torch::outer(positions, inv_freq_.to(h.device()));
  const torch::Tensor cos = angles.cos(), sin = angles.sin();
  const torch::Tensor allowed = encoder_mask.defined() ? encoder_mask.to(h.device(), torch::kBool) : encoder_mask;
  const torch::Tensor cast = image.defined() ? image.to(h.dtype()) : image;
  for (size_t i = 0; i < layers_.size(); ++i) h = RunLayer(i, h, cast, allowed, cos, sin, start);
  if (cached) cache_position_ += t;
  return output_(norm_(h));
}

void VisionModelImpl::SetupCaches(int64_t batch_size, int64_t capacity) {
  const DecoderArgs& d = args_.decoder;
  TORCH_CHECK(batch_size >= 1, "VisionModel: KV cache batch size must be at least 1, got ", batch_size);
  TORCH_CHECK(capacity >= 1 && capacity <= d.max_seq_len, "VisionModel: KV cache capacity ", capacity,
              " is outside [1, max_seq_len=", d.max_seq_len, "]");
  const c10::TensorOptions options = tok_weight_.options().requires_grad(false);
  const std::vector<int64_t> shape = {batch_size, d.num_kv_heads, capacity, d.resolved_head_dim()};
  kv_caches_.assign(layers_.size(), {});
  for (LayerKvCache& c : kv_caches_) c = {torch::zeros(shape, options), torch::zeros(shape, options)};
  fusion_caches_.assign(layers_.size(), {});  // filled by the first Decode with an image
  cache_position_ = 0;
}

void VisionModelImpl::ClearCaches() {
  kv_caches_.clear();
  fusion_caches_.clear();
  cache_position_ = 0;
}

torch::Tensor VisionModelImpl::RunLayer(size_t i, const torch::Tensor& h, const torch::Tensor& image,
                                        const torch::Tensor& allowed, const torch::Tensor& cos,
                                        const torch::Tensor& sin, int64_t start) {
  std::shared_ptr<TransformerLayerImpl> layer = layers_[i].ptr();
  LayerKvCache* cache = kv_caches_.empty() ? nullptr : &kv_caches_[i];
  LayerKvCache* fusion_cache = fusion_caches_.empty() ? nullptr : &fusion_caches_[i];
  // Cached, a fusion layer reads the image it saw first even where a step passes none.
  const bool sees_image = image.defined() || (fusion_cache != nullptr && fusion_cache->k.defined());
  std::shared_ptr<CrossAttentionLayerImpl> fusion = fusion_[i] && sees_image ? fusion_[i].ptr() : nullptr;
  auto run = [layer, fusion, image, allowed, cos, sin, cache, fusion_cache, start](const torch::Tensor& x) {
    return layer->forward(fusion ? fusion->forward(x, image, allowed, fusion_cache) : x, cos, sin, {}, cache, start);
  };
  if (!activation_checkpointing_ || !torch::GradMode::is_enabled()) return run(h);
  // The layer's parameters (its fusion layer's among them) and the image, whose gradient reaches the encoder.
  std::vector<torch::Tensor> inputs = layer->parameters();
  if (fusion && image.requires_grad()) inputs.push_back(image);
  return Checkpoint(run, h, inputs);
}

void VisionModelImpl::set_activation_checkpointing(bool on) {
  activation_checkpointing_ = on;
  encoder_->set_activation_checkpointing(on);
}

torch::Tensor VisionModelImpl::forward(const torch::Tensor& tokens, const torch::Tensor& images,
                                       const torch::Tensor& aspect_ratio, const torch::Tensor& encoder_mask) {
  TORCH_CHECK(images.defined() == aspect_ratio.defined(), "VisionModel: pass images and aspect_ratio together");
  torch::Tensor image = images.defined() ? encoder_->forward(images, aspect_ratio) : torch::Tensor();
  return Decode(tokens, image, encoder_mask);
}

std::string_view VisionPartOf(std::string_view name) {
  if (name.rfind("encoder.projection.", 0) == 0 || name.find(".fusion_layer.") != std::string_view::npos ||
      name.rfind("decoder.tok_embeddings.fusion_embedding.", 0) == 0) {
    return "fusion";
  }
  return name.rfind("encoder.", 0) == 0 ? "encoder" : "decoder";
}

void VisionModelImpl::SetTrainable(const VisionTrainable& trainable) {
  for (auto& item : named_parameters(/*recurse=*/true)) {
    const std::string_view part = VisionPartOf(item.key());
    const Trainable how = part == "fusion" ? trainable.fusion
                          : part == "encoder" ? trainable.encoder
                                              : trainable.decoder;
    const bool train = how == Trainable::kFull || (how == Trainable::kLora && IsAdapterWeight(item.key()));
    item.value().requires_grad_(train && item.value().is_floating_point());
  }
}

std::vector<std::pair<int64_t, int64_t>> SupportedAspectRatios(int64_t max_num_tiles) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t h = 1; h <= max_num_tiles; ++h) {
    for (int64_t w = 1; h * w <= max_num_tiles; ++w) out.emplace_back(h, w);
  }
  return out;
}

int64_t RedundantTileParameters(const VisionEncoderArgs& a) {
  if (a.max_num_tiles <= 1) return 0;
  const int64_t t = a.max_num_tiles, ratios = static_cast<int64_t>(SupportedAspectRatios(t).size()) + 1;
  // pre- and post-tile tables [ratios, T * D] vs [T, T, 1, D]; the token table [ratios, T * tokens * D] vs
  // [T, T, tokens, D].
  const int64_t per_tile = a.embed_dim * (2 + a.tokens_per_tile());
  return (ratios * t - t * t) * per_tile;
}

StatusOr<VisionModel> MakeVisionModel(const VisionModelArgs& args, std::optional<LoraArgs> lora,
                                      VisionTrainable trainable, c10::TensorOptions options) {
  TM_RETURN_IF_ERROR(ValidateVisionModelArgs(args));
  if (lora) TM_RETURN_IF_ERROR(ValidateLoraArgs(*lora));
  try {
    return VisionModel(args, std::move(lora), trainable, options);
  } catch (const c10::Error& e) {
    return Status::FailedPrecondition(std::string("building the vision model failed: ") + e.what_without_backtrace());
  }
}

namespace {

VisionEncoderArgs PublishedEncoder(int64_t decoder_dim) {
  VisionEncoderArgs e;
  e.tile_size = 560;
  e.patch_size = 14;
  e.max_num_tiles = 4;
  e.embed_dim = 1280;
  e.num_layers = 32;
  e.num_heads = 16;
  e.hidden_states = {3, 7, 15, 23, 30};
  e.num_layers_projection = 8;
  e.decoder_embed_dim = decoder_dim;
  return e;
}

DecoderArgs PublishedDecoder(int64_t layers, int64_t heads, int64_t dim, int64_t hidden) {
  DecoderArgs d;
  d.vocab_size = 128256;
  d.num_layers = layers;
  d.num_heads = heads;
  d.num_kv_heads = 8;
  d.embed_dim = dim;
  d.intermediate_dim = hidden;
  d.max_seq_len = 131072;
  d.rope_base = 500000;
  d.rope_scaling = RopeScaling{8, 1, 4, 8192};  // torchtune's Llama3ScaledRoPE defaults
  return d;
}

VisionPreset Published(const std::string& size, DecoderArgs decoder, int64_t params, const std::string& hub) {
  VisionPreset p;
  p.builder = "llama3_2_vision_" + size;
  p.lora_builder = "lora_" + p.builder;
  p.qlora_builder = "qlora_" + p.builder;
  p.args.encoder = PublishedEncoder(decoder.embed_dim);
  p.args.decoder = std::move(decoder);
  p.args.encoder_max_seq_len = 128080;  // 20 images x 4 tiles x 1601 tokens
  p.published_params = params;
  p.hf_checkpoint = hub;
  p.description = "Llama 3.2 Vision " + size.substr(0, size.size() - 1) + "B";
  return p;
}

// The family's operations at about 120,000 parameters: 28-pixel tiles of 7-pixel patches (17 tokens, padded to
// 24, so the padding mask acts), up to 4 tiles, CLIP width 16 with 3 layers keeping the inputs of layer 1 and the
// last output, 2 projection layers, and a 4-layer decoder (width 32, 4 heads, 2 kv heads, MLP 64, vocab 512) with
// fusion layers before layers 2 and 4.
VisionPreset Tiny() {
  VisionPreset p;
  p.builder = "tiny_llama3_2_vision";
  p.lora_builder = "lora_tiny_llama3_2_vision";
  p.qlora_builder = "qlora_tiny_llama3_2_vision";
  VisionEncoderArgs& e = p.args.encoder;
  e.tile_size = 28;
  e.patch_size = 7;
  e.max_num_tiles = 4;
  e.embed_dim = 16;
  e.num_layers = 3;
  e.num_heads = 2;
  e.hidden_states = {1, 3};
  e.num_layers_projection = 2;
  e.decoder_embed_dim = 32;
  p.args.decoder = PublishedDecoder(4, 4, 32, 64);
  p.args.decoder.vocab_size = 512;
  p.args.decoder.num_kv_heads = 2;
  p.args.decoder.max_seq_len = 512;
  p.args.fusion_interval = 2;
  p.args.encoder_max_seq_len = 4 * 17;
  p.description = "tiny Llama 3.2 Vision (tests)";
  p.tiny = true;
  return p;
}

}  // namespace

const std::vector<VisionPreset>& VisionPresets() {
  static const std::vector<VisionPreset> presets = {
      Published("11b", PublishedDecoder(32, 32, 4096, 14336), 10670220835,
                "meta-llama/Llama-3.2-11B-Vision-Instruct"),
      Published("90b", PublishedDecoder(80, 64, 8192, 28672), 88593355323,
                "meta-llama/Llama-3.2-90B-Vision-Instruct"),
      Tiny(),
  };
  return presets;
}

const VisionPreset* FindVisionPreset(std::string_view name) {
  constexpr std::string_view kPackage = "torchtune.models.llama3_2_vision.";
  if (name.rfind(kPackage, 0) == 0) name.remove_prefix(kPackage.size());
  for (const VisionPreset& p : VisionPresets()) {
    if (name == p.builder || name == p.lora_builder || name == p.qlora_builder) return &p;
  }
  return nullptr;
}

}  // namespace tmx::models
