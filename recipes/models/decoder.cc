#include "recipes/models/decoder.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <unordered_set>

#include "base/text.h"
#include "harness/device_hooks.h"
#include "recipes/models/checkpointing.h"
#include "recipes/models/fault_injection.h"
#include "recipes/models/init.h"
#include "recipes/models/rms_norm.h"
#include "recipes/models/swiglu.h"

namespace tmx::models {
namespace {

template <typename T>
std::string Str(const T& v) {
  std::ostringstream out;
  out << std::boolalpha << v;
  return out.str();
}

Status NonNegativeNumber(const char* field, double value) {
  if (value >= 0 && std::isfinite(value)) return Status::OK();
  return Status::InvalidArgument(std::string(field) + ": must be 0 (off) or a positive number, got " + Str(value));
}


// SDPA's native grouped-query path is a fused kernel only in flash attention (the device table's
// native_gqa_attention: cuda, half precision); elsewhere it falls back to the math kernel, so repeating k/v
// keeps the memory-efficient and CPU fused kernels usable.
bool UseNativeGqa(const torch::Tensor& q) {
  if (q.scalar_type() != torch::kBFloat16 && q.scalar_type() != torch::kHalf) return false;
  const DeviceTypeTraits* type = DeviceTypeOf(q.device().type());
  return type != nullptr && type->native_gqa_attention;
}

// [T, S] booleans: query i (position S - T + i) may attend to key j (position j): j is not later, with a
// window fewer than `window` positions earlier, and with chunks in the same chunk of `chunk` positions.
torch::Tensor AllowedPositions(int64_t t, int64_t s, int64_t window, const torch::Device& device, int64_t chunk = 0) {
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(device);
  const torch::Tensor queries = torch::arange(s - t, s, options).unsqueeze(1);
  const torch::Tensor keys = torch::arange(s, options).unsqueeze(0);
  torch::Tensor distance = queries - keys;
  torch::Tensor allowed = distance >= 0;
  if (window > 0) allowed = allowed & (distance < window);
  if (chunk > 0) allowed = allowed & (torch::div(queries, chunk, "floor") == torch::div(keys, chunk, "floor"));
  return allowed;
}

// [B, T] long: each token's position within its document of `document_ids` [B, T] (documents contiguous, as
// packing lays them out), so chunks and temperatures of a packed document are those it has alone.
torch::Tensor DocumentPositions(const torch::Tensor& document_ids) {
  const int64_t t = document_ids.size(1);
  const torch::Tensor index =
      torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(document_ids.device())).expand_as(document_ids);
  torch::Tensor starts = torch::ones_like(document_ids, torch::kBool);
  if (t > 1) {
    starts.narrow(1, 1, t - 1).copy_(document_ids.narrow(1, 1, t - 1) != document_ids.narrow(1, 0, t - 1));
  }
  const torch::Tensor first = std::get<0>(torch::cummax(torch::where(starts, index, torch::zeros_like(index)), 1));
  return index - first;
}

// x / sqrt(mean(x^2) + eps) over the last dimension, in float32, cast back (Llama 4's parameter-free L2Norm).
torch::Tensor RmsNormalize(const torch::Tensor& x, double eps) {
  const torch::Tensor f = x.to(torch::kFloat);
  return (f * torch::rsqrt(f.pow(2).mean(-1, /*keepdim=*/true) + eps)).to(x.scalar_type());
}

torch::Tensor SoftCap(const torch::Tensor& x, double cap) { return torch::tanh(x / cap) * cap; }

Status NonNegative(const char* field, int64_t value, const char* off) {
  if (value >= 0) return Status::OK();
  return Status::InvalidArgument(std::string(field) + ": must be 0 (" + off + ") or positive, got " +
                                 std::to_string(value));
}

// The mixture-of-experts and Llama 4 attention options (decoder.h).
Status ValidateMoeArgs(const DecoderArgs& args) {
  TM_RETURN_IF_ERROR(NonNegative("num_experts", args.num_experts, "no experts"));
  TM_RETURN_IF_ERROR(NonNegative("dense_intermediate_dim", args.dense_intermediate_dim, "intermediate_dim"));
  TM_RETURN_IF_ERROR(NonNegative("nope_layer_interval", args.nope_layer_interval, "RoPE in every layer"));
  TM_RETURN_IF_ERROR(NonNegative("attention_chunk_size", args.attention_chunk_size, "no chunks"));
  TM_RETURN_IF_ERROR(NonNegativeNumber("attn_temperature_floor", args.attn_temperature_floor));
  if (!std::isfinite(args.attn_temperature_scale)) {
    return Status::InvalidArgument("attn_temperature_scale: must be a number, got " + Str(args.attn_temperature_scale));
  }
  if (args.num_experts == 0) return Status::OK();
  TM_RETURN_IF_ERROR(MustBePositive("moe_every_n_layers", args.moe_every_n_layers));
  if (args.experts_per_token < 1 || args.experts_per_token > args.num_experts) {
    return Status::InvalidArgument("experts_per_token: must be 1 to num_experts (" + std::to_string(args.num_experts) +
                                   "), got " + std::to_string(args.experts_per_token));
  }
  if (args.mlp_activation != MlpActivation::kSilu) {
    return Status::InvalidArgument("mlp_activation: experts are SwiGLU MLPs; a mixture of experts needs silu");
  }
  return Status::OK();
}

}  // namespace

LayerLora LayerLoraFor(const std::optional<LoraArgs>& lora) {
  LayerLora layer;
  if (!lora) return layer;
  layer.adapter = {lora->rank, lora->alpha, lora->dropout, lora->use_dora};
  for (const std::string& name : lora->attn_modules) {
    if (name == "q_proj") layer.q_proj = true;
    if (name == "k_proj") layer.k_proj = true;
    if (name == "v_proj") layer.v_proj = true;
    if (name == "output_proj") layer.output_proj = true;
  }
  layer.mlp = lora->apply_to_mlp;
  layer.quantize_base = lora->quantize_base;
  return layer;
}

std::optional<LoraAdapterOptions> AdapterIf(bool on, const LayerLora& lora) {
  return on ? std::optional<LoraAdapterOptions>(lora.adapter) : std::nullopt;
}

Status ValidateDecoderArgs(const DecoderArgs& args) {
  TM_RETURN_IF_ERROR(MustBePositive("vocab_size", args.vocab_size));
  TM_RETURN_IF_ERROR(MustBePositive("num_layers", args.num_layers));
  TM_RETURN_IF_ERROR(MustBePositive("num_heads", args.num_heads));
  TM_RETURN_IF_ERROR(MustBePositive("num_kv_heads", args.num_kv_heads));
  TM_RETURN_IF_ERROR(MustBePositive("embed_dim", args.embed_dim));
  TM_RETURN_IF_ERROR(MustBePositive("intermediate_dim", args.intermediate_dim));
  TM_RETURN_IF_ERROR(MustBePositive("max_seq_len", args.max_seq_len));
  if (args.num_heads % args.num_kv_heads != 0) {
    return Status::InvalidArgument("num_kv_heads: must divide num_heads (" + std::to_string(args.num_heads) +
                                   "), got " + std::to_string(args.num_kv_heads));
  }
  if (args.head_dim < 0) {
    return Status::InvalidArgument("head_dim: must be 0 (embed_dim / num_heads) or positive, got " +
                                   std::to_string(args.head_dim));
  }
  if (args.head_dim == 0) {
    if (args.embed_dim % args.num_heads != 0) {
      return Status::InvalidArgument("embed_dim: must be divisible by num_heads (" + std::to_string(args.num_heads) +
                                     "), got " + std::to_string(args.embed_dim));
    }
    if ((args.embed_dim / args.num_heads) % 2 != 0) {
      return Status::InvalidArgument("embed_dim / num_heads: the head dimension must be even for RoPE, got " +
                                     std::to_string(args.embed_dim / args.num_heads));
    }
  } else if (args.head_dim % 2 != 0) {
    return Status::InvalidArgument("head_dim: must be even for RoPE, got " + std::to_string(args.head_dim));
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
    // Equal factors (Llama 4 Scout: 1 and 1) leave no band between kept and scaled frequencies.
    if (!(s->low_freq_factor > 0 && s->low_freq_factor <= s->high_freq_factor) || !std::isfinite(s->high_freq_factor)) {
      return Status::InvalidArgument("rope_scaling: need 0 < low_freq_factor <= high_freq_factor, got " +
                                     Str(s->low_freq_factor) + " and " + Str(s->high_freq_factor));
    }
    TM_RETURN_IF_ERROR(MustBePositive("rope_scaling.old_context_len", s->old_context_len));
  }
  TM_RETURN_IF_ERROR(NonNegativeNumber("attn_softcap", args.attn_softcap));
  TM_RETURN_IF_ERROR(NonNegativeNumber("final_softcap", args.final_softcap));
  TM_RETURN_IF_ERROR(NonNegativeNumber("query_pre_attn_scalar", args.query_pre_attn_scalar));
  if (args.sliding_window < 0) {
    return Status::InvalidArgument("sliding_window: must be 0 (off) or positive, got " +
                                   std::to_string(args.sliding_window));
  }
  if (args.alternate_sliding_window && args.sliding_window == 0) {
    return Status::InvalidArgument(
        "alternate_sliding_window: set, but sliding_window is 0; set sliding_window or unset the alternation");
  }
  TM_RETURN_IF_ERROR(ValidateMoeArgs(args));
  if (args.num_classes < 0) {
    return Status::InvalidArgument("num_classes: must be 0 (language-model head) or positive, got " +
                                   std::to_string(args.num_classes));
  }
  if (args.num_classes > 0 && args.tie_word_embeddings) {
    return Status::InvalidArgument("tie_word_embeddings: a classifier head (num_classes " +
                                   std::to_string(args.num_classes) +
                                   ") cannot share the token embedding; set tie_word_embeddings to false");
  }
  return Status::OK();
}

std::vector<std::string> DecoderFeatures(const DecoderArgs& a) {
  const std::pair<const char*, bool> features[] = {
      {"grouped-query attention", a.num_kv_heads < a.num_heads},
      {"decoupled head_dim", a.num_heads * a.resolved_head_dim() != a.embed_dim},
      {"llama3 rope scaling", a.rope_scaling.has_value()},
      {"half-split rope", a.rope_layout == RopeLayout::kHalf},
      {"qkv bias", a.qkv_bias},
      {"q/k norm", a.qk_norm},
      {"geglu (tanh)", a.mlp_activation == MlpActivation::kGeluTanh},
      {"geglu (erf)", a.mlp_activation == MlpActivation::kGelu},
      {"scaled embeddings", a.scale_embeddings},
      {"(1 + w) norms", a.norm_plus_one},
      {"post-norms", a.post_norms},
      {"attention soft-cap", a.attn_softcap > 0},
      {"final soft-cap", a.final_softcap > 0},
      {"query_pre_attn_scalar", a.query_pre_attn_scalar > 0},
      {"sliding window", a.sliding_window > 0},
      {"alternating sliding window", a.alternate_sliding_window},
      {"tied embeddings", a.tie_word_embeddings},
      {"classifier head", a.num_classes > 0},
      {"mixture of experts", a.num_experts > 0},
      {"shared expert", a.num_experts > 0 && a.shared_expert},
      {"interleaved dense layers", a.num_experts > 0 && a.moe_every_n_layers > 1},
      {"NoPE layers", a.nope_layer_interval > 0},
      {"chunked attention", a.attention_chunk_size > 0},
      {"q/k L2 norm", a.qk_l2_norm},
      {"attention temperature tuning", a.attn_temperature_floor > 0},
  };
  std::vector<std::string> on;
  for (const auto& [name, set] : features) {
    if (set) on.push_back(name);
  }
  return on;
}

std::vector<std::string> DecoderArgsDifferences(const DecoderArgs& a, const DecoderArgs& b) {
  std::vector<std::string> out;
  auto compare = [&out](const char* field, const auto& x, const auto& y) {
    if (!(x == y)) out.push_back(std::string(field) + " (" + Str(x) + " vs " + Str(y) + ")");
  };
  auto scalar = [](const DecoderArgs& d) {
    return d.query_pre_attn_scalar > 0 ? d.query_pre_attn_scalar : static_cast<double>(d.resolved_head_dim());
  };
  auto scaling = [](const DecoderArgs& d) {
    if (!d.rope_scaling) return std::string("none");
    const RopeScaling& r = *d.rope_scaling;
    return Str(r.factor) + "/" + Str(r.low_freq_factor) + "/" + Str(r.high_freq_factor) + "/" + Str(r.old_context_len);
  };
  compare("vocab_size", a.vocab_size, b.vocab_size);
  compare("num_layers", a.num_layers, b.num_layers);
  compare("num_heads", a.num_heads, b.num_heads);
  compare("num_kv_heads", a.num_kv_heads, b.num_kv_heads);
  compare("embed_dim", a.embed_dim, b.embed_dim);
  compare("intermediate_dim", a.intermediate_dim, b.intermediate_dim);
  compare("max_seq_len", a.max_seq_len, b.max_seq_len);
  compare("head_dim", a.resolved_head_dim(), b.resolved_head_dim());
  compare("rope_base", a.rope_base, b.rope_base);
  compare("norm_eps", a.norm_eps, b.norm_eps);
  compare("rope_scaling", scaling(a), scaling(b));
  auto layout = [](const DecoderArgs& d) {
    return std::string(d.rope_layout == RopeLayout::kHalf ? "half" : "interleaved");
  };
  compare("rope_layout", layout(a), layout(b));
  compare("tie_word_embeddings", a.tie_word_embeddings, b.tie_word_embeddings);
  compare("qkv_bias", a.qkv_bias, b.qkv_bias);
  compare("qk_norm", a.qk_norm, b.qk_norm);
  compare("mlp_activation", static_cast<int>(a.mlp_activation), static_cast<int>(b.mlp_activation));
  compare("scale_embeddings", a.scale_embeddings, b.scale_embeddings);
  compare("norm_plus_one", a.norm_plus_one, b.norm_plus_one);
  compare("post_norms", a.post_norms, b.post_norms);
  compare("attn_softcap", a.attn_softcap, b.attn_softcap);
  compare("final_softcap", a.final_softcap, b.final_softcap);
  compare("query_pre_attn_scalar", scalar(a), scalar(b));
  compare("sliding_window", a.sliding_window, b.sliding_window);
  compare("alternate_sliding_window", a.alternate_sliding_window, b.alternate_sliding_window);
  compare("num_classes", a.num_classes, b.num_classes);
  compare("num_experts", a.num_experts, b.num_experts);
  if (a.num_experts > 0 || b.num_experts > 0) {
    compare("experts_per_token", a.experts_per_token, b.experts_per_token);
    compare("moe_every_n_layers", a.moe_every_n_layers, b.moe_every_n_layers);
    compare("shared_expert", a.shared_expert, b.shared_expert);
  }
  auto dense = [](const DecoderArgs& d) { return d.dense_intermediate_dim > 0 ? d.dense_intermediate_dim : d.intermediate_dim; };
  compare("dense_intermediate_dim", dense(a), dense(b));
  compare("nope_layer_interval", a.nope_layer_interval, b.nope_layer_interval);
  compare("attention_chunk_size", a.attention_chunk_size, b.attention_chunk_size);
  compare("qk_l2_norm", a.qk_l2_norm, b.qk_l2_norm);
  compare("attn_temperature_floor", a.attn_temperature_floor, b.attn_temperature_floor);
  if (a.attn_temperature_floor > 0 || b.attn_temperature_floor > 0) {
    compare("attn_temperature_scale", a.attn_temperature_scale, b.attn_temperature_scale);
  }
  return out;
}

Status ValidateLoraArgs(const LoraArgs& lora, const DecoderArgs& args) {
  TM_RETURN_IF_ERROR(ValidateLoraArgs(lora));
  // A rank above the smaller side of an adapted layer adds parameters and memory but no expressiveness: the
  // update of a [out, in] weight has rank min(out, in) at most. (A hostile rank of a million would otherwise
  // try to allocate adapters larger than the model.)
  const int64_t head_dim = args.resolved_head_dim();
  int64_t smallest = args.embed_dim;
  for (const std::string& name : lora.attn_modules) {
    const bool kv = name == "k_proj" || name == "v_proj";
    smallest = std::min(smallest, (kv ? args.num_kv_heads : args.num_heads) * head_dim);
  }
  if (lora.apply_to_mlp) smallest = std::min(smallest, args.intermediate_dim);
  if (smallest > 0 && lora.rank > smallest) {
    return Status::InvalidArgument("lora.rank " + std::to_string(lora.rank) + " is above " + std::to_string(smallest) +
                                   ", the smaller side of the smallest adapted layer, so the update can have no "
                                   "higher rank; set lora_rank to at most " + std::to_string(smallest));
  }
  if (lora.apply_to_output && args.tie_word_embeddings) {
    return Status::InvalidArgument(
        "lora.apply_to_output: this model ties its output projection to the token embedding, so there is no "
        "output layer to adapt; set apply_to_output to false");
  }
  if (args.num_experts > 0 && (lora.quantize_base || lora.use_dora)) {
    return Status::InvalidArgument(std::string(lora.quantize_base ? "quantize_base" : "use_dora") +
                                   ": not implemented for a mixture-of-experts model (torchtune's LoRAGroupedExperts "
                                   "has neither an NF4 base nor DoRA); set it to false");
  }
  if (lora.quantize_base) {
    // NF4 holds only weights of whole blocks of scales (nf4.h); the same in every layer, so layer 0 names them.
    const int64_t q = args.num_heads * head_dim, kv = args.num_kv_heads * head_dim;
    const std::pair<const char*, std::vector<int64_t>> shapes[] = {
        {"layers.0.attn.q_proj.weight", {q, args.embed_dim}},
        {"layers.0.attn.k_proj.weight", {kv, args.embed_dim}},
        {"layers.0.mlp.w1.weight", {args.intermediate_dim, args.embed_dim}}};
    for (const auto& [name, shape] : shapes) {
      Status s = CheckNf4Shape(name, shape);
      if (!s.ok()) return Status::InvalidArgument("quantize_base: " + s.message());
    }
  }
  return Status::OK();
}

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t dim, c10::TensorOptions options, bool tied)
    : tied_(tied) {
  weight_ = register_parameter("weight", torch::empty({num_embeddings, dim}, options.requires_grad(false)));
  torch::NoGradGuard no_grad;
  NormalInit(weight_, 0, 1.0 / std::sqrt(static_cast<double>(dim)));
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& tokens) {
  return at::embedding(weight_, tokens, /*padding_idx=*/-1, /*scale_grad_by_freq=*/false, /*sparse=*/tied_);
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps, c10::TensorOptions options, bool plus_one)
    : eps_(eps), plus_one_(plus_one) {
  options = options.requires_grad(false);
  scale_ = register_parameter("scale", plus_one ? torch::zeros({dim}, options) : torch::ones({dim}, options));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  return InjectFault(FaultKernel::kNorm, RmsNorm(x, scale_, eps_, plus_one_));
}

std::pair<torch::Tensor, torch::Tensor> RMSNormImpl::add_and_forward(const torch::Tensor& x,
                                                                     const torch::Tensor& addend) {
  auto [h, y] = AddRmsNorm(x, addend, scale_, eps_, plus_one_);
  return {h, InjectFault(FaultKernel::kNorm, y)};
}

AttentionImpl::AttentionImpl(const DecoderArgs& args, const LayerLora& lora, c10::TensorOptions options, int64_t layer)
    : num_heads_(args.num_heads),
      num_kv_heads_(args.num_kv_heads),
      head_dim_(args.resolved_head_dim()),
      window_(args.window_of_layer(layer)),
      scale_(1.0 / std::sqrt(args.query_pre_attn_scalar > 0 ? args.query_pre_attn_scalar
                                                            : static_cast<double>(args.resolved_head_dim()))),
      custom_scale_(args.query_pre_attn_scalar > 0),
      softcap_(args.attn_softcap),
      rope_layout_(args.rope_layout),
      use_rope_(args.rope_in_layer(layer)),
      chunk_(args.rope_in_layer(layer) ? args.attention_chunk_size : 0),
      l2_norm_eps_(args.qk_l2_norm && args.rope_in_layer(layer) ? args.norm_eps : 0),
      temperature_floor_(args.rope_in_layer(layer) ? 0 : args.attn_temperature_floor),
      temperature_scale_(args.attn_temperature_scale) {
  const int64_t dim = args.embed_dim;
  const bool bias = args.qkv_bias;
  q_proj_ = register_module("q_proj", Linear(dim, num_heads_ * head_dim_, options, AdapterIf(lora.q_proj, lora), bias,
                                             lora.quantize_base));
  k_proj_ =
      register_module("k_proj", Linear(dim, num_kv_heads_ * head_dim_, options, AdapterIf(lora.k_proj, lora), bias,
                                       lora.quantize_base));
  v_proj_ =
      register_module("v_proj", Linear(dim, num_kv_heads_ * head_dim_, options, AdapterIf(lora.v_proj, lora), bias,
                                       lora.quantize_base));
  output_proj_ =
      register_module("output_proj", Linear(num_heads_ * head_dim_, dim, options, AdapterIf(lora.output_proj, lora),
                                            /*bias=*/false, lora.quantize_base));
  if (args.qk_norm) {
    q_norm_ = register_module("q_norm", RMSNorm(head_dim_, args.norm_eps, options, args.norm_plus_one));
    k_norm_ = register_module("k_norm", RMSNorm(head_dim_, args.norm_eps, options, args.norm_plus_one));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                     const torch::Tensor& document_ids, LayerKvCache* cache, int64_t start) {
  const int64_t b = x.size(0);
  const int64_t t = x.size(1);
  torch::Tensor q = q_proj_(x).view({b, t, num_heads_, head_dim_});
  torch::Tensor k = k_proj_(x).view({b, t, num_kv_heads_, head_dim_});
  torch::Tensor v = v_proj_(x).view({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);
  if (q_norm_) {
    q = q_norm_(q);
    k = k_norm_(k);
  }
  // [B, T, heads, head_dim] -> RoPE -> [B, heads, T, head_dim]
  if (use_rope_) {
    q = ApplyRotaryEmbedding(q, cos, sin, rope_layout_);
    k = ApplyRotaryEmbedding(k, cos, sin, rope_layout_);
  }
  if (l2_norm_eps_ > 0) {
    q = RmsNormalize(q, l2_norm_eps_);
    k = RmsNormalize(k, l2_norm_eps_);
  }
  const torch::Tensor doc_positions =
      document_ids.defined() && (chunk_ > 0 || temperature_floor_ > 0) ? DocumentPositions(document_ids) : torch::Tensor();
  if (temperature_floor_ > 0) q = TemperatureTuned(q, start, doc_positions);
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  // Keys run over s positions: the cached ones before these t, then these.
  int64_t s = t;
  if (cache != nullptr) {
    TORCH_CHECK(!document_ids.defined(), "Attention: a KV cache holds whole sequences, not packed documents");
    s = start + t;
    cache->k.narrow(2, start, t).copy_(k);
    cache->v.narrow(2, start, t).copy_(v);
    k = cache->k.narrow(2, 0, s);
    v = cache->v.narrow(2, 0, s);
  }
  const bool grouped = num_heads_ != num_kv_heads_;
  const bool native_gqa = grouped && softcap_ == 0 && UseNativeGqa(q);
  if (grouped && !native_gqa) {
    // Query head h reads kv head h / (heads / kv_heads).
    k = k.repeat_interleave(num_heads_ / num_kv_heads_, /*dim=*/1);
    v = v.repeat_interleave(num_heads_ / num_kv_heads_, /*dim=*/1);
  }
  const bool windowed = window_ > 0 && window_ < s;
  const int64_t chunk = chunk_ > 0 && chunk_ < s ? chunk_ : 0;
  // [T, S], or [B, 1, T, T] when packed documents must not see each other.
  torch::Tensor allowed;
  if (document_ids.defined()) {
    allowed = AllowedPositions(t, t, windowed ? window_ : 0, x.device()) &
              (document_ids.unsqueeze(2) == document_ids.unsqueeze(1));
    if (chunk_ > 0) {
      const torch::Tensor chunks = torch::div(doc_positions, chunk_, "floor");
      allowed = allowed & (chunks.unsqueeze(2) == chunks.unsqueeze(1));
    }
    allowed = allowed.unsqueeze(1);
  }
  torch::Tensor out;
  if (softcap_ > 0) {
    // Soft-capping acts on the scores themselves, which no fused kernel exposes: the scores, in float32.
    torch::Tensor scores = SoftCap(torch::matmul(q, k.transpose(-2, -1)).to(torch::kFloat) * scale_, softcap_);
    if (!allowed.defined()) allowed = AllowedPositions(t, s, windowed ? window_ : 0, x.device(), chunk);
    scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
    out = torch::matmul(torch::softmax(scores, -1).to(v.scalar_type()), v);
  } else {
    // SDPA's default scale is head_dim^-0.5; pass ours only when it differs, so the default path is unchanged.
    const std::optional<double> scale = custom_scale_ ? std::optional<double>(scale_) : std::nullopt;
    std::optional<torch::Tensor> mask;
    if (allowed.defined()) {
      mask = allowed;
    } else if (windowed || chunk > 0 || (s > t && t > 1)) {
      mask = AllowedPositions(t, s, windowed ? window_ : 0, x.device(), chunk);
    }
    // Unmasked: causal when queries and keys are the same positions; a single new query sees every cached key.
    const bool causal = !mask.has_value() && s == t;
    out = at::scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0, causal, scale,
                                           /*enable_gqa=*/native_gqa);
  }
  out = InjectFault(FaultKernel::kAttention, out);  // tests only (models/fault_injection.h)
  return output_proj_(out.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_}));
}

torch::Tensor AttentionImpl::TemperatureTuned(const torch::Tensor& q, int64_t start,
                                              const torch::Tensor& doc_positions) const {
  // Positions start .. start+T-1 (or within each packed document), in float32 as Hugging Face's cache_position.
  const torch::Tensor positions =
      doc_positions.defined()
          ? doc_positions.to(torch::kFloat)
          : torch::arange(start, start + q.size(1), torch::TensorOptions().dtype(torch::kFloat).device(q.device()))
                .unsqueeze(0);
  const torch::Tensor scales =
      torch::log1p(torch::floor((positions + 1.0) / temperature_floor_)) * temperature_scale_ + 1.0;
  return (q * scales.unsqueeze(-1).unsqueeze(-1)).to(q.scalar_type());
}

FeedForwardImpl::FeedForwardImpl(const DecoderArgs& args, const LayerLora& lora, c10::TensorOptions options,
                                 int64_t hidden)
    : activation_(args.mlp_activation) {
  const auto adapter = AdapterIf(lora.mlp, lora);
  const bool nf4 = lora.quantize_base;
  if (hidden <= 0) hidden = args.intermediate_dim;
  w1_ = register_module("w1", Linear(args.embed_dim, hidden, options, adapter, /*bias=*/false, nf4));
  w2_ = register_module("w2", Linear(hidden, args.embed_dim, options, adapter, /*bias=*/false, nf4));
  w3_ = register_module("w3", Linear(args.embed_dim, hidden, options, adapter, /*bias=*/false, nf4));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  torch::Tensor gate = w1_(x);
  switch (activation_) {
    case MlpActivation::kSilu:
      return w2_(InjectFault(FaultKernel::kMlp, SiluMul(gate, w3_(x))));
    case MlpActivation::kGeluTanh:
      gate = torch::gelu(gate, "tanh");
      break;
    case MlpActivation::kGelu:
      gate = torch::gelu(gate);
      break;
  }
  return w2_(gate * w3_(x));
}

namespace {

// Layer's mixture of experts, its shared expert a FeedForward of the experts' width.
Moe MakeMoe(const DecoderArgs& args, const LayerLora& lora, c10::TensorOptions options) {
  MoeOptions moe;
  moe.dim = args.embed_dim;
  moe.hidden = args.intermediate_dim;
  moe.num_experts = args.num_experts;
  moe.experts_per_token = args.experts_per_token;
  moe.shared_expert = args.shared_expert;
  moe.adapter = AdapterIf(lora.mlp, lora);
  if (!args.shared_expert) return Moe(moe, options, nullptr, nullptr);
  FeedForward shared(args, lora, options);
  FeedForwardImpl* impl = shared.ptr().get();
  return Moe(moe, options, shared.ptr(), [impl](const torch::Tensor& x) { return impl->forward(x); });
}

}  // namespace

TransformerLayerImpl::TransformerLayerImpl(const DecoderArgs& args, const LayerLora& lora, c10::TensorOptions options,
                                           int64_t layer) {
  const auto norm = [&] { return RMSNorm(args.embed_dim, args.norm_eps, options, args.norm_plus_one); };
  sa_norm_ = register_module("sa_norm", norm());
  attn_ = register_module("attn", Attention(args, lora, options, layer));
  if (args.post_norms) sa_scale_ = register_module("sa_scale", norm());
  mlp_norm_ = register_module("mlp_norm", norm());
  if (args.moe_in_layer(layer)) {
    moe_ = register_module("mlp", MakeMoe(args, lora, options));
  } else {
    mlp_ = register_module("mlp", FeedForward(args, lora, options, args.mlp_dim_of_layer(layer)));
  }
  if (args.post_norms) mlp_scale_ = register_module("mlp_scale", norm());
}

torch::Tensor TransformerLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                            const torch::Tensor& sin, const torch::Tensor& document_ids,
                                            LayerKvCache* cache, int64_t start) {
  torch::Tensor attn = attn_->forward(sa_norm_(x), cos, sin, document_ids, cache, start);
  if (partial_sum_) attn = partial_sum_(attn);
  auto [h, normed] = mlp_norm_->add_and_forward(x, sa_scale_ ? sa_scale_(attn) : attn);
  torch::Tensor mlp = moe_ ? moe_(normed) : mlp_(normed);
  if (partial_sum_) mlp = partial_sum_(mlp);
  return h + (mlp_scale_ ? mlp_scale_(mlp) : mlp);
}

DecoderImpl::DecoderImpl(const DecoderArgs& args, std::optional<LoraArgs> lora, c10::TensorOptions options)
    : args_(args), lora_(std::move(lora)) {
  const Status valid = ValidateDecoderArgs(args_);
  TORCH_CHECK(valid.ok(), "Decoder: ", valid.message());
  if (lora_) {
    const Status lora_valid = ValidateLoraArgs(*lora_, args_);
    TORCH_CHECK(lora_valid.ok(), "Decoder: ", lora_valid.message());
  }
  options = options.requires_grad(false);
  inv_freq_ = RopeInverseFrequencies(args_.resolved_head_dim(), args_.rope_base, args_.rope_scaling);

  const LayerLora layer_lora = LayerLoraFor(lora_);
  tok_embeddings_ = register_module(
      "tok_embeddings", Embedding(args_.vocab_size, args_.embed_dim, options, args_.tie_word_embeddings));
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < args_.num_layers; ++i) {
    layer_list_.push_back(TransformerLayer(args_, layer_lora, options, i));
    layers_->push_back(layer_list_.back());
  }
  RMSNorm norm(args_.embed_dim, args_.norm_eps, options, args_.norm_plus_one);
  if (args_.final_softcap > 0) {
    // torchtune's Gemma2FinalNorm wraps the norm, so its state dict says norm.rms_norm.scale.
    auto wrapper = register_module("norm", std::make_shared<torch::nn::Module>("FinalNorm"));
    norm_ = wrapper->register_module("rms_norm", norm);
  } else {
    norm_ = register_module("norm", norm);
  }
  if (!args_.tie_word_embeddings) {
    const bool adapt = lora_ && lora_->apply_to_output;
    output_ =
        register_module("output", Linear(args_.embed_dim, args_.output_dim(), options, AdapterIf(adapt, layer_lora)));
  }
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& tokens, const torch::Tensor& input_pos,
                                   const torch::Tensor& document_ids) {
  return OutputLogits(Hidden(tokens, input_pos, document_ids));
}

torch::Tensor DecoderImpl::OutputLogits(const torch::Tensor& hidden) {
  torch::Tensor logits = output_ ? output_(hidden) : at::linear(hidden, tok_embeddings_->weight());
  return args_.final_softcap > 0 ? SoftCap(logits, args_.final_softcap) : logits;
}

torch::Tensor DecoderImpl::PlainOutputWeight() const {
  if (!output_) return tok_embeddings_->weight();
  if (output_->has_adapter() || output_->bias().defined()) return {};
  return output_->weight();
}

torch::Tensor DecoderImpl::Hidden(const torch::Tensor& tokens, const torch::Tensor& input_pos,
                                  const torch::Tensor& document_ids) {
  TORCH_CHECK(tokens.dim() == 2, "Decoder: expected tokens [batch, seq_len], got shape ", tokens.sizes());
  TORCH_CHECK(!tokens.is_floating_point() && !tokens.is_complex(), "Decoder: expected integer tokens, got ",
              tokens.scalar_type());
  const int64_t t = tokens.size(1);
  TORCH_CHECK(t >= 1 && t <= args_.max_seq_len, "Decoder: sequence length ", t,
              " is outside [1, max_seq_len=", args_.max_seq_len, "]");
  const bool cached = caches_enabled();
  const int64_t start = cache_position_;
  if (cached) {
    TORCH_CHECK(!input_pos.defined() && !document_ids.defined(),
                "Decoder: with the KV cache on, positions follow the cache; pass no input_pos or document_ids");
    TORCH_CHECK(!layer_runner_, "Decoder: the KV cache does not work under a layer runner (sharded layers)");
    TORCH_CHECK(tokens.size(0) == kv_caches_.front().k.size(0), "Decoder: the KV cache was set up for batch ",
                kv_caches_.front().k.size(0), ", got tokens ", tokens.sizes());
    TORCH_CHECK(start + t <= cache_capacity(), "Decoder: ", t, " more tokens after position ", start,
                " pass the KV cache's capacity of ", cache_capacity(), " positions");
  }

  torch::Tensor h = tok_embeddings_(tokens);
  if (args_.scale_embeddings) {
    // sqrt(dim) rounded to the model dtype first, as torchtune's GemmaNormEmbeddings and Hugging Face do.
    h = h * torch::scalar_tensor(std::sqrt(static_cast<double>(args_.embed_dim)), h.options());
  }
  TORCH_CHECK(!input_pos.defined() || input_pos.sizes() == tokens.sizes(), "Decoder: input_pos ",
              input_pos.sizes(), " must have the tokens' shape ", tokens.sizes());
  TORCH_CHECK(!document_ids.defined() || document_ids.sizes() == tokens.sizes(), "Decoder: document_ids ",
              document_ids.sizes(), " must have the tokens' shape ", tokens.sizes());
  // Angles t * inv_freq in float32, as Meta's reference and torchtune compute them: [T, head_dim/2], or
  // [B, T, head_dim/2] from each row's own positions.
  torch::Tensor angles;
  if (input_pos.defined()) {
    angles = input_pos.to(h.device(), torch::kFloat).unsqueeze(-1) * inv_freq_.to(h.device());
  } else {
    torch::Tensor positions =
        torch::arange(start, start + t, torch::TensorOptions().dtype(torch::kFloat).device(h.device()));
    angles = torch::outer(positions, inv_freq_.to(h.device()));
  }
  const torch::Tensor docs = document_ids.defined() ? document_ids.to(h.device()) : document_ids;
  const torch::Tensor cos = angles.cos();
  const torch::Tensor sin = angles.sin();

  const bool checkpoint = activation_checkpointing_ && torch::GradMode::is_enabled();
  for (size_t i = 0; i < layer_list_.size(); ++i) {
    TransformerLayer& layer = layer_list_[i];
    if (cached) {
      h = layer->forward(h, cos, sin, docs, &kv_caches_[i], start);
    } else if (layer_runner_) {
      h = layer_runner_(i, h, cos, sin, docs);
    } else if (checkpoint && checkpoints_layer(i)) {
      std::shared_ptr<TransformerLayerImpl> impl = layer.ptr();
      h = Checkpoint([impl, cos, sin, docs](const torch::Tensor& x) { return impl->forward(x, cos, sin, docs); },
                     h, impl->parameters(), activation_offloading_);
    } else {
      h = layer->forward(h, cos, sin, docs);
    }
  }
  if (cached) cache_position_ += t;
  return norm_(h);
}

void DecoderImpl::set_partial_sum(std::function<torch::Tensor(const torch::Tensor&)> sum) {
  for (TransformerLayer& layer : layer_list_) layer->set_partial_sum(sum);
}

StatusOr<DecoderArgs> TensorParallelArgs(const DecoderArgs& args, int64_t ranks) {
  if (ranks < 1) return Status::InvalidArgument("tensor parallelism needs at least 1 rank, got " + Str(ranks));
  if (args.num_experts > 0 && ranks > 1) {
    return Status::InvalidArgument("tensor parallelism of a mixture-of-experts model is not implemented; use 1 rank");
  }
  for (const auto& [name, size] : {std::pair<const char*, int64_t>{"num_heads", args.num_heads},
                                   {"num_kv_heads", args.num_kv_heads},
                                   {"intermediate_dim", args.intermediate_dim}}) {
    if (size % ranks != 0) {
      return Status::InvalidArgument("tensor parallelism over " + Str(ranks) + " ranks splits the model's " + name +
                                     " (" + Str(size) + ") evenly, which it cannot; use a number of ranks that "
                                     "divides num_heads, num_kv_heads and intermediate_dim");
    }
  }
  DecoderArgs local = args;
  local.head_dim = args.resolved_head_dim();
  local.num_heads /= ranks;
  local.num_kv_heads /= ranks;
  local.intermediate_dim /= ranks;
  return local;
}

void CopyTensorParallelShard(const DecoderImpl& full, int64_t rank, int64_t ranks, DecoderImpl& shard) {
  TORCH_CHECK(!full.lora() && !shard.lora(), "CopyTensorParallelShard: models with adapters are not split");
  torch::NoGradGuard no_grad;
  const auto whole = full.named_parameters();
  for (auto& item : shard.named_parameters()) {
    const std::string& name = item.key();
    const torch::Tensor* source = whole.find(name);
    TORCH_CHECK(source != nullptr, "CopyTensorParallelShard: the whole model has no ", name);
    torch::Tensor part = *source;
    const bool rows = EndsWith(name, "q_proj.weight") || EndsWith(name, "k_proj.weight") ||
                      EndsWith(name, "v_proj.weight") || EndsWith(name, "q_proj.bias") ||
                      EndsWith(name, "k_proj.bias") || EndsWith(name, "v_proj.bias") ||
                      EndsWith(name, "mlp.w1.weight") || EndsWith(name, "mlp.w3.weight");
    const bool columns = EndsWith(name, "output_proj.weight") || EndsWith(name, "mlp.w2.weight");
    if (rows || columns) {
      const int64_t dim = rows ? 0 : 1;
      const int64_t size = item.value().size(dim);
      TORCH_CHECK(size * ranks == source->size(dim), "CopyTensorParallelShard: ", name, " of the shard is ",
                  item.value().sizes(), ", not 1/", ranks, " of ", source->sizes());
      part = source->narrow(dim, rank * size, size);
    }
    item.value().copy_(part);
  }
}

void DecoderImpl::SetupCaches(int64_t batch_size, int64_t capacity) {
  TORCH_CHECK(batch_size >= 1, "Decoder: KV cache batch size must be at least 1, got ", batch_size);
  TORCH_CHECK(capacity >= 1 && capacity <= args_.max_seq_len, "Decoder: KV cache capacity ", capacity,
              " is outside [1, max_seq_len=", args_.max_seq_len, "]");
  const c10::TensorOptions options = tok_embeddings_->weight().options().requires_grad(false);
  const std::vector<int64_t> shape = {batch_size, args_.num_kv_heads, capacity, args_.resolved_head_dim()};
  kv_caches_.clear();
  for (size_t i = 0; i < layer_list_.size(); ++i) {
    kv_caches_.push_back({torch::zeros(shape, options), torch::zeros(shape, options)});
  }
  cache_position_ = 0;
}

void DecoderImpl::ClearCaches() {
  kv_caches_.clear();
  cache_position_ = 0;
}

StatusOr<Decoder> MakeDecoder(const DecoderArgs& args, std::optional<LoraArgs> lora, c10::TensorOptions options) {
  TM_RETURN_IF_ERROR(ValidateDecoderArgs(args));
  if (lora) TM_RETURN_IF_ERROR(ValidateLoraArgs(*lora, args));
  try {
    return Decoder(args, std::move(lora), options);
  } catch (const c10::OutOfMemoryError& e) {
    return Status::FailedPrecondition("building the model on " + Str(options.device()) +
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

std::vector<LinearShape> LinearShapes(const DecoderArgs& args) {
  const int64_t dim = args.embed_dim, hd = args.resolved_head_dim();
  std::vector<LinearShape> shapes = {{"q_proj", dim, args.num_heads * hd},
                                     {"k_proj", dim, args.num_kv_heads * hd},
                                     {"v_proj", dim, args.num_kv_heads * hd},
                                     {"output_proj", args.num_heads * hd, dim},
                                     {"w1", dim, args.intermediate_dim},
                                     {"w2", args.intermediate_dim, dim},
                                     {"w3", dim, args.intermediate_dim}};
  if (!args.tie_word_embeddings) shapes.push_back({"output", dim, args.output_dim()});
  return shapes;
}

Status MustBePositive(const std::string& field, int64_t value) {
  if (value > 0) return Status::OK();
  return Status::InvalidArgument(field + ": must be positive, got " + std::to_string(value));
}

}  // namespace tmx::models
