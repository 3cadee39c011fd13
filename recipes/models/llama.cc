#include "recipes/models/llama.h"

#include <torch/torch.h>

#include <cmath>
#include <sstream>
#include <string>
#include <unordered_set>

#include "recipes/models/checkpointing.h"

namespace tmx::models {
namespace {

constexpr double kPi = 3.14159265358979323846;

template <typename T>
std::string Str(const T& v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

Status Positive(const char* field, int64_t value) {
  if (value > 0) return Status::OK();
  return Status::InvalidArgument(std::string(field) + ": must be positive, got " + std::to_string(value));
}

LayerLora LayerLoraFor(const std::optional<LoraArgs>& lora) {
  LayerLora layer;
  if (!lora) return layer;
  layer.adapter = {lora->rank, lora->alpha, lora->dropout};
  for (const std::string& name : lora->attn_modules) {
    if (name == "q_proj") layer.q_proj = true;
    if (name == "k_proj") layer.k_proj = true;
    if (name == "v_proj") layer.v_proj = true;
    if (name == "output_proj") layer.output_proj = true;
  }
  layer.mlp = lora->apply_to_mlp;
  return layer;
}

std::optional<LoraAdapterOptions> AdapterIf(bool on, const LayerLora& lora) {
  return on ? std::optional<LoraAdapterOptions>(lora.adapter) : std::nullopt;
}

// SDPA's native grouped-query path is a fused kernel only in flash attention (CUDA, half precision); elsewhere
// it falls back to the math kernel, so repeating k/v keeps the memory-efficient and CPU fused kernels usable.
bool UseNativeGqa(const torch::Tensor& q) {
  return q.is_cuda() && (q.scalar_type() == torch::kBFloat16 || q.scalar_type() == torch::kHalf);
}

}  // namespace

LlamaArgs Llama3_2_1BArgs() {
  LlamaArgs a;
  a.vocab_size = 128256;
  a.num_layers = 16;
  a.num_heads = 32;
  a.num_kv_heads = 8;
  a.embed_dim = 2048;
  a.intermediate_dim = 8192;
  a.max_seq_len = 131072;
  a.rope_base = 500000;
  a.norm_eps = 1e-5;
  a.rope_scaling = RopeScaling{32, 1, 4, 8192};
  a.tie_word_embeddings = true;
  return a;
}

LlamaArgs Llama3_2_3BArgs() {
  LlamaArgs a = Llama3_2_1BArgs();
  a.num_layers = 28;
  a.num_heads = 24;
  a.embed_dim = 3072;
  return a;
}

LlamaArgs Llama3_1_8BArgs() {
  LlamaArgs a = Llama3_2_1BArgs();
  a.num_layers = 32;
  a.num_heads = 32;
  a.embed_dim = 4096;
  a.intermediate_dim = 14336;
  a.rope_scaling = RopeScaling{8, 1, 4, 8192};
  a.tie_word_embeddings = false;
  return a;
}

LlamaArgs LlamaTinyArgs() {
  LlamaArgs a;
  a.vocab_size = 512;
  a.num_layers = 2;
  a.num_heads = 4;
  a.num_kv_heads = 2;
  a.embed_dim = 64;
  a.intermediate_dim = 256;
  a.max_seq_len = 512;
  a.rope_base = 500000;
  a.norm_eps = 1e-5;
  a.rope_scaling = RopeScaling{};
  a.tie_word_embeddings = true;
  return a;
}

Status ValidateLlamaArgs(const LlamaArgs& args) {
  TM_RETURN_IF_ERROR(Positive("vocab_size", args.vocab_size));
  TM_RETURN_IF_ERROR(Positive("num_layers", args.num_layers));
  TM_RETURN_IF_ERROR(Positive("num_heads", args.num_heads));
  TM_RETURN_IF_ERROR(Positive("num_kv_heads", args.num_kv_heads));
  TM_RETURN_IF_ERROR(Positive("embed_dim", args.embed_dim));
  TM_RETURN_IF_ERROR(Positive("intermediate_dim", args.intermediate_dim));
  TM_RETURN_IF_ERROR(Positive("max_seq_len", args.max_seq_len));
  if (args.num_heads % args.num_kv_heads != 0) {
    return Status::InvalidArgument("num_kv_heads: must divide num_heads (" + std::to_string(args.num_heads) +
                                   "), got " + std::to_string(args.num_kv_heads));
  }
  if (args.embed_dim % args.num_heads != 0) {
    return Status::InvalidArgument("embed_dim: must be divisible by num_heads (" + std::to_string(args.num_heads) +
                                   "), got " + std::to_string(args.embed_dim));
  }
  if ((args.embed_dim / args.num_heads) % 2 != 0) {
    return Status::InvalidArgument("embed_dim / num_heads: the head dimension must be even for RoPE, got " +
                                   std::to_string(args.embed_dim / args.num_heads));
  }
  if (!(args.rope_base > 0) || !std::isfinite(args.rope_base)) {
    return Status::InvalidArgument("rope_base: must be a positive number, got " + Str(args.rope_base));
  }
  if (!(args.norm_eps > 0) || !std::isfinite(args.norm_eps)) {
    return Status::InvalidArgument("norm_eps: must be a positive number, got " + Str(args.norm_eps));
  }
  if (const auto& s = args.rope_scaling) {
    if (!(s->factor > 0) || !std::isfinite(s->factor)) {
      return Status::InvalidArgument("rope_scaling.factor: must be a positive number, got " + Str(s->factor));
    }
    if (!(s->low_freq_factor > 0 && s->low_freq_factor < s->high_freq_factor) ||
        !std::isfinite(s->high_freq_factor)) {
      return Status::InvalidArgument("rope_scaling: need 0 < low_freq_factor < high_freq_factor, got " +
                                     Str(s->low_freq_factor) + " and " + Str(s->high_freq_factor));
    }
    TM_RETURN_IF_ERROR(Positive("rope_scaling.old_context_len", s->old_context_len));
  }
  return Status::OK();
}

Status ValidateLoraArgs(const LoraArgs& lora, const LlamaArgs& args) {
  TM_RETURN_IF_ERROR(ValidateLoraArgs(lora));
  if (lora.apply_to_output && args.tie_word_embeddings) {
    return Status::InvalidArgument(
        "lora.apply_to_output: this model ties its output projection to the token embedding, so there is no "
        "output layer to adapt; set apply_to_output to false");
  }
  return Status::OK();
}

torch::Tensor RopeInverseFrequencies(int64_t head_dim, double base, const std::optional<RopeScaling>& scaling) {
  TORCH_CHECK(head_dim > 0 && head_dim % 2 == 0, "RopeInverseFrequencies: head_dim must be even and positive, got ",
              head_dim);
  TORCH_CHECK(base > 0, "RopeInverseFrequencies: base must be positive, got ", base);
  // float32 throughout, in the reference's order of operations, so the frequencies match it to the last bit
  // or two.
  torch::Tensor exponent = torch::arange(0, head_dim, 2, torch::kFloat) / static_cast<double>(head_dim);
  torch::Tensor freqs = torch::reciprocal(torch::pow(base, exponent));
  if (!scaling) return freqs;
  const double old_len = static_cast<double>(scaling->old_context_len);
  const double low_freq_wavelen = old_len / scaling->low_freq_factor;    // longer wavelengths: fully scaled
  const double high_freq_wavelen = old_len / scaling->high_freq_factor;  // shorter wavelengths: kept
  torch::Tensor wavelen = torch::reciprocal(freqs) * (2 * kPi);
  torch::Tensor smooth =
      (torch::reciprocal(wavelen) * old_len - scaling->low_freq_factor) /
      (scaling->high_freq_factor - scaling->low_freq_factor);
  torch::Tensor interpolated = (1 - smooth) * freqs / scaling->factor + smooth * freqs;
  return torch::where(wavelen < high_freq_wavelen, freqs,
                      torch::where(wavelen > low_freq_wavelen, freqs / scaling->factor, interpolated));
}

torch::Tensor ApplyRotaryEmbedding(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  TORCH_CHECK(x.dim() == 4, "ApplyRotaryEmbedding: expected x [B, T, heads, head_dim], got ", x.sizes());
  const int64_t t = x.size(1);
  const int64_t half = x.size(3) / 2;
  TORCH_CHECK(cos.sizes() == torch::IntArrayRef({t, half}) && sin.sizes() == cos.sizes(),
              "ApplyRotaryEmbedding: expected cos/sin [", t, ", ", half, "], got ", cos.sizes(), " and ", sin.sizes());
  torch::Tensor pairs = x.to(torch::kFloat).unflatten(-1, {half, 2});
  torch::Tensor x0 = pairs.select(-1, 0);
  torch::Tensor x1 = pairs.select(-1, 1);
  torch::Tensor c = cos.view({1, t, 1, half});
  torch::Tensor s = sin.view({1, t, 1, half});
  return torch::stack({x0 * c - x1 * s, x1 * c + x0 * s}, -1).flatten(-2).to(x.scalar_type());
}

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t dim, c10::TensorOptions options) {
  weight_ = register_parameter("weight", torch::empty({num_embeddings, dim}, options.requires_grad(false)));
  torch::NoGradGuard no_grad;
  weight_.normal_(0, 1.0 / std::sqrt(static_cast<double>(dim)));
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& tokens) { return at::embedding(weight_, tokens); }

RMSNormImpl::RMSNormImpl(int64_t dim, double eps, c10::TensorOptions options) : eps_(eps) {
  scale_ = register_parameter("scale", torch::ones({dim}, options.requires_grad(false)));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  torch::Tensor xf = x.to(torch::kFloat);
  torch::Tensor normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return normed.to(x.scalar_type()) * scale_;
}

AttentionImpl::AttentionImpl(const LlamaArgs& args, const LayerLora& lora, c10::TensorOptions options)
    : num_heads_(args.num_heads),
      num_kv_heads_(args.num_kv_heads),
      head_dim_(args.embed_dim / args.num_heads) {
  const int64_t dim = args.embed_dim;
  q_proj_ = register_module("q_proj", Linear(dim, num_heads_ * head_dim_, options, AdapterIf(lora.q_proj, lora)));
  k_proj_ = register_module("k_proj", Linear(dim, num_kv_heads_ * head_dim_, options, AdapterIf(lora.k_proj, lora)));
  v_proj_ = register_module("v_proj", Linear(dim, num_kv_heads_ * head_dim_, options, AdapterIf(lora.v_proj, lora)));
  output_proj_ = register_module("output_proj",
                                 Linear(num_heads_ * head_dim_, dim, options, AdapterIf(lora.output_proj, lora)));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t b = x.size(0);
  const int64_t t = x.size(1);
  // [B, T, heads, head_dim] -> RoPE -> [B, heads, T, head_dim]
  torch::Tensor q = ApplyRotaryEmbedding(q_proj_(x).view({b, t, num_heads_, head_dim_}), cos, sin).transpose(1, 2);
  torch::Tensor k = ApplyRotaryEmbedding(k_proj_(x).view({b, t, num_kv_heads_, head_dim_}), cos, sin).transpose(1, 2);
  torch::Tensor v = v_proj_(x).view({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);
  const bool native_gqa = num_heads_ != num_kv_heads_ && UseNativeGqa(q);
  if (num_heads_ != num_kv_heads_ && !native_gqa) {
    // Query head h reads kv head h / (heads / kv_heads).
    k = k.repeat_interleave(num_heads_ / num_kv_heads_, /*dim=*/1);
    v = v.repeat_interleave(num_heads_ / num_kv_heads_, /*dim=*/1);
  }
  torch::Tensor out = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/std::nullopt, /*dropout_p=*/0.0,
                                                       /*is_causal=*/true, /*scale=*/std::nullopt,
                                                       /*enable_gqa=*/native_gqa);
  return output_proj_(out.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_}));
}

FeedForwardImpl::FeedForwardImpl(const LlamaArgs& args, const LayerLora& lora, c10::TensorOptions options) {
  const auto adapter = AdapterIf(lora.mlp, lora);
  w1_ = register_module("w1", Linear(args.embed_dim, args.intermediate_dim, options, adapter));
  w2_ = register_module("w2", Linear(args.intermediate_dim, args.embed_dim, options, adapter));
  w3_ = register_module("w3", Linear(args.embed_dim, args.intermediate_dim, options, adapter));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) { return w2_(torch::silu(w1_(x)) * w3_(x)); }

TransformerLayerImpl::TransformerLayerImpl(const LlamaArgs& args, const LayerLora& lora,
                                           c10::TensorOptions options) {
  sa_norm_ = register_module("sa_norm", RMSNorm(args.embed_dim, args.norm_eps, options));
  attn_ = register_module("attn", Attention(args, lora, options));
  mlp_norm_ = register_module("mlp_norm", RMSNorm(args.embed_dim, args.norm_eps, options));
  mlp_ = register_module("mlp", FeedForward(args, lora, options));
}

torch::Tensor TransformerLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                            const torch::Tensor& sin) {
  torch::Tensor h = x + attn_(sa_norm_(x), cos, sin);
  return h + mlp_(mlp_norm_(h));
}

LlamaImpl::LlamaImpl(const LlamaArgs& args, std::optional<LoraArgs> lora, c10::TensorOptions options)
    : args_(args), lora_(std::move(lora)) {
  const Status valid = ValidateLlamaArgs(args_);
  TORCH_CHECK(valid.ok(), "Llama: ", valid.message());
  if (lora_) {
    const Status lora_valid = ValidateLoraArgs(*lora_, args_);
    TORCH_CHECK(lora_valid.ok(), "Llama: ", lora_valid.message());
  }
  options = options.requires_grad(false);
  inv_freq_ = RopeInverseFrequencies(args_.embed_dim / args_.num_heads, args_.rope_base, args_.rope_scaling);

  const LayerLora layer_lora = LayerLoraFor(lora_);
  tok_embeddings_ = register_module("tok_embeddings", Embedding(args_.vocab_size, args_.embed_dim, options));
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < args_.num_layers; ++i) {
    layer_list_.push_back(TransformerLayer(args_, layer_lora, options));
    layers_->push_back(layer_list_.back());
  }
  norm_ = register_module("norm", RMSNorm(args_.embed_dim, args_.norm_eps, options));
  if (!args_.tie_word_embeddings) {
    const bool adapt = lora_ && lora_->apply_to_output;
    output_ = register_module("output",
                              Linear(args_.embed_dim, args_.vocab_size, options, AdapterIf(adapt, layer_lora)));
  }
}

torch::Tensor LlamaImpl::forward(const torch::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() == 2, "Llama: expected tokens [batch, seq_len], got shape ", tokens.sizes());
  TORCH_CHECK(!tokens.is_floating_point() && !tokens.is_complex(), "Llama: expected integer tokens, got ",
              tokens.scalar_type());
  const int64_t t = tokens.size(1);
  TORCH_CHECK(t >= 1 && t <= args_.max_seq_len, "Llama: sequence length ", t, " is outside [1, max_seq_len=",
              args_.max_seq_len, "]");

  torch::Tensor h = tok_embeddings_(tokens);
  // Angles t * inv_freq in float32, as Meta's reference and torchtune compute them.
  torch::Tensor positions = torch::arange(t, torch::TensorOptions().dtype(torch::kFloat).device(h.device()));
  torch::Tensor angles = torch::outer(positions, inv_freq_.to(h.device()));
  const torch::Tensor cos = angles.cos();
  const torch::Tensor sin = angles.sin();

  const bool checkpoint = activation_checkpointing_ && torch::GradMode::is_enabled();
  for (TransformerLayer& layer : layer_list_) {
    if (checkpoint) {
      std::shared_ptr<TransformerLayerImpl> impl = layer.ptr();
      h = Checkpoint([impl, cos, sin](const torch::Tensor& x) { return impl->forward(x, cos, sin); }, h,
                     impl->parameters());
    } else {
      h = layer->forward(h, cos, sin);
    }
  }
  h = norm_(h);
  return output_ ? output_(h) : at::linear(h, tok_embeddings_->weight());
}

StatusOr<Llama> MakeLlama(const LlamaArgs& args, std::optional<LoraArgs> lora, c10::TensorOptions options) {
  TM_RETURN_IF_ERROR(ValidateLlamaArgs(args));
  if (lora) TM_RETURN_IF_ERROR(ValidateLoraArgs(*lora, args));
  try {
    return Llama(args, std::move(lora), options);
  } catch (const c10::OutOfMemoryError& e) {
    return Status::FailedPrecondition("building the Llama model on " + Str(options.device()) +
                                      ": out of memory; use a smaller model, a smaller dtype or another device (" +
                                      e.what_without_backtrace() + ")");
  }
}

int64_t CountParameters(const torch::nn::Module& m, bool trainable_only) {
  std::unordered_set<const c10::TensorImpl*> seen;
  int64_t total = 0;
  for (const torch::Tensor& p : m.parameters()) {
    if (trainable_only && !p.requires_grad()) continue;
    if (seen.insert(p.unsafeGetTensorImpl()).second) total += p.numel();
  }
  return total;
}

}  // namespace tmx::models
