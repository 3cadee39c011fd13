#include "recipes/checkpoint/hf_convert.h"

#include <torch/torch.h>

#include <cctype>
#include <set>
#include <sstream>

#include "recipes/models/model_types.h"

namespace tmx::checkpoint {
namespace {

using models::DecoderArgs;
using models::RopeLayout;
using Part = HfTensorMap::Part;

std::string ShapeText(c10::IntArrayRef shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

std::string TuneNames(const HfTensorMap& m) {
  std::string out;
  for (const Part& p : m.parts) out += (out.empty() ? "" : ", ") + p.tune_name;
  return out;
}

// Rows of `heads` heads, each [2, head_dim/2] (Hugging Face: halves) <-> [head_dim/2, 2] (interleaved pairs).
// Any trailing dims (the input features of a weight, a LoRA rank) ride along.
at::Tensor Repair(const at::Tensor& t, int64_t heads, bool to_interleaved) {
  const int64_t head_dim = t.size(0) / heads;
  std::vector<int64_t> view = {heads, to_interleaved ? 2 : head_dim / 2, to_interleaved ? head_dim / 2 : 2};
  for (int64_t d = 1; d < t.dim(); ++d) view.push_back(t.size(d));
  return t.reshape(view).transpose(1, 2).reshape(t.sizes()).contiguous();
}

// Builds the map of one model, tensor by tensor, in the decoder's order.
class MapBuilder {
 public:
  MapBuilder(const std::string& model_type, const DecoderArgs& args)
      : a_(args),
        type_(models::FindModelType(model_type)),
        fused_(type_ != nullptr && type_->fused_projections),
        llama4_(type_ != nullptr && type_->llama4_options),
        interleaved_(args.rope_layout == RopeLayout::kInterleaved &&
                     !(type_ != nullptr && type_->checkpoint_rope_interleaved)) {}

  std::vector<HfTensorMap> Build() {
    const int64_t dim = a_.embed_dim, hd = a_.resolved_head_dim();
    const int64_t q = a_.num_heads * hd, kv = a_.num_kv_heads * hd, hidden = a_.intermediate_dim;
    Add("model.embed_tokens.weight", {a_.vocab_size, dim}, "tok_embeddings.weight");
    for (int64_t i = 0; i < a_.num_layers; ++i) {
      const std::string hf = "model.layers." + std::to_string(i) + ".";
      const std::string tt = "layers." + std::to_string(i) + ".";
      Add(hf + "input_layernorm.weight", {dim}, tt + "sa_norm.scale");
      const int64_t qh = interleaved_ ? a_.num_heads : 0, kh = interleaved_ ? a_.num_kv_heads : 0;
      if (fused_) {
        Fused(hf + "self_attn.qkv_proj.weight", dim,
              {{tt + "attn.q_proj.weight", q, qh},
               {tt + "attn.k_proj.weight", kv, kh},
               {tt + "attn.v_proj.weight", kv, 0}});
      } else {
        Add(hf + "self_attn.q_proj.weight", {q, dim}, tt + "attn.q_proj.weight", qh);
        if (a_.qkv_bias) Add(hf + "self_attn.q_proj.bias", {q}, tt + "attn.q_proj.bias", qh);
        Add(hf + "self_attn.k_proj.weight", {kv, dim}, tt + "attn.k_proj.weight", kh);
        if (a_.qkv_bias) Add(hf + "self_attn.k_proj.bias", {kv}, tt + "attn.k_proj.bias", kh);
        Add(hf + "self_attn.v_proj.weight", {kv, dim}, tt + "attn.v_proj.weight");
        if (a_.qkv_bias) Add(hf + "self_attn.v_proj.bias", {kv}, tt + "attn.v_proj.bias");
      }
      Add(hf + "self_attn.o_proj.weight", {dim, q}, tt + "attn.output_proj.weight");
      if (a_.qk_norm) {
        Add(hf + "self_attn.q_norm.weight", {hd}, tt + "attn.q_norm.scale", interleaved_ ? 1 : 0);
        Add(hf + "self_attn.k_norm.weight", {hd}, tt + "attn.k_norm.scale", interleaved_ ? 1 : 0);
      }
      if (a_.post_norms) {
        Add(hf + "post_attention_layernorm.weight", {dim}, tt + "sa_scale.scale");
        Add(hf + "pre_feedforward_layernorm.weight", {dim}, tt + "mlp_norm.scale");
      } else {
        Add(hf + "post_attention_layernorm.weight", {dim}, tt + "mlp_norm.scale");
      }
      if (llama4_) {
        Llama4FeedForward(hf, tt, i);
      } else if (fused_) {
        Fused(hf + "mlp.gate_up_proj.weight", dim,
              {{tt + "mlp.w1.weight", hidden, 0}, {tt + "mlp.w3.weight", hidden, 0}});
      } else {
        Add(hf + "mlp.gate_proj.weight", {hidden, dim}, tt + "mlp.w1.weight");
        Add(hf + "mlp.up_proj.weight", {hidden, dim}, tt + "mlp.w3.weight");
      }
      if (!llama4_) Add(hf + "mlp.down_proj.weight", {dim, hidden}, tt + "mlp.w2.weight");
      if (a_.post_norms) Add(hf + "post_feedforward_layernorm.weight", {dim}, tt + "mlp_scale.scale");
    }
    Add("model.norm.weight", {dim}, a_.final_softcap > 0 ? "norm.rms_norm.scale" : "norm.scale");
    if (!a_.tie_word_embeddings) {
      Add(a_.num_classes > 0 ? "score.weight" : "lm_head.weight", {a_.output_dim(), dim}, "output.weight");
    }
    return std::move(maps_);
  }

 private:
  void Add(const std::string& hf, std::vector<int64_t> shape, const std::string& tune, int64_t permute_heads = 0) {
    maps_.push_back({hf, shape, {{tune, shape[0], permute_heads}}});
  }
  // Layer `layer`'s feed_forward: router, experts (gate and up side by side in gate_up_proj) and shared expert
  // in a mixture-of-experts layer, a gated MLP of the dense width otherwise.
  void Llama4FeedForward(const std::string& hf, const std::string& tt, int64_t layer) {
    const int64_t dim = a_.embed_dim, hidden = a_.mlp_dim_of_layer(layer), experts = a_.num_experts;
    const std::string mlp = a_.moe_in_layer(layer) && a_.shared_expert ? "feed_forward.shared_expert."
                                                                        : "feed_forward.";
    const std::string mine = a_.moe_in_layer(layer) ? "mlp.shared_expert." : "mlp.";
    if (a_.moe_in_layer(layer)) {
      Add(hf + "feed_forward.router.weight", {experts, dim}, tt + "mlp.router.gate.weight");
      maps_.push_back({hf + "feed_forward.experts.gate_up_proj",
                       {experts, dim, 2 * hidden},
                       {{tt + "mlp.experts.gate_proj", hidden, 0}, {tt + "mlp.experts.up_proj", hidden, 0}},
                       /*split_dim=*/2});
      Add(hf + "feed_forward.experts.down_proj", {experts, hidden, dim}, tt + "mlp.experts.down_proj");
      if (!a_.shared_expert) return;
    }
    Add(hf + mlp + "gate_proj.weight", {hidden, dim}, tt + mine + "w1.weight");
    Add(hf + mlp + "down_proj.weight", {dim, hidden}, tt + mine + "w2.weight");
    Add(hf + mlp + "up_proj.weight", {hidden, dim}, tt + mine + "w3.weight");
  }
  void Fused(const std::string& hf, int64_t cols, std::vector<Part> parts) {
    int64_t rows = 0;
    for (const Part& p : parts) rows += p.rows;
    maps_.push_back({hf, {rows, cols}, std::move(parts)});
  }

  const DecoderArgs& a_;
  const models::ModelTypeRecord* type_;
  const bool fused_, llama4_, interleaved_;
  std::vector<HfTensorMap> maps_;
};

// Whether `name` (after `prefix`, e.g. "model.layers.") is of a layer at or past `layers`.
bool OfLayerFrom(const std::string& name, const std::string& prefix, int64_t layers) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  size_t end = prefix.size();
  int64_t index = 0;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) index = index * 10 + (name[end++] - '0');
  return end > prefix.size() && end < name.size() && name[end] == '.' && index >= layers;
}

// A checkpoint tensor a model of `args` leaves alone: RoPE's cached frequencies, a tied output, and the layers
// a proxy cut off (DecoderArgs::layers_cut_from).
bool Ignorable(const std::string& hf_name, const DecoderArgs& args) {
  if (args.layers_cut_from > args.num_layers && OfLayerFrom(hf_name, "model.layers.", args.num_layers)) return true;
  const std::string rotary = "rotary_emb.inv_freq";
  if (hf_name.size() >= rotary.size() && hf_name.compare(hf_name.size() - rotary.size(), rotary.size(), rotary) == 0) {
    return true;
  }
  return args.tie_word_embeddings && hf_name == "lm_head.weight";
}

// "layers.0.attn.q_proj.weight" -> "layers.0.attn.q_proj"; "" when the name is not a weight.
std::string ModuleOfWeight(const std::string& name) {
  const std::string suffix = ".weight";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return "";
  return name.substr(0, name.size() - suffix.size());
}

std::string LeafName(const std::string& module) { return module.substr(module.rfind('.') + 1); }

// The first name in `tensors` that is neither in `used` nor skipped; "" when none.
template <typename Skip>
std::string FirstUnused(const NamedTensors& tensors, const std::set<std::string>& used, Skip skip) {
  for (const auto& [name, tensor] : tensors) {
    if (used.count(name) == 0 && !skip(name)) return name;
  }
  return "";
}

bool Never(const std::string&) { return false; }

// A multimodal checkpoint's tensor of another model than `type`'s (Llama 4's vision_model.*).
bool WrappedElsewhere(const models::ModelTypeRecord& type, const std::string& name) {
  for (const std::string& skipped : type.wrapper_skipped) {
    if (name.rfind(skipped, 0) == 0) return true;
  }
  return false;
}

// LoRA on Llama 4's grouped experts (moe.h's lora_{gate,up,down}_{a,b}) has no PEFT form: PEFT adapts linear
// modules, and Hugging Face's experts are stacked parameters. They are written beside the others under the
// Hugging Face module's name, "base_model.model.model.layers.N.feed_forward.experts.lora_gate_a", so the file
// keeps them (tune-matrix and torchtune read them back); PEFT itself ignores them, and the merged checkpoint
// carries their update.
void ExpertAdapters(const NamedTensors& adapters, std::set<std::string>* used, PeftAdapterTensors* out) {
  const std::string marker = ".mlp.experts.lora_";
  for (const auto& [name, tensor] : adapters) {
    const size_t at = name.find(marker);
    if (at == std::string::npos || name.rfind("layers.", 0) != 0) continue;
    const std::string hf = "base_model.model.model." + name.substr(0, at) + ".feed_forward.experts." +
                           name.substr(at + std::string(".mlp.experts.").size());
    out->tensors.emplace_back(hf, tensor.detach().contiguous());
    used->insert(name);
  }
}

}  // namespace

std::vector<HfTensorMap> HfTensorMaps(const std::string& model_type, const DecoderArgs& args) {
  return MapBuilder(model_type, args).Build();
}

StatusOr<NamedTensors> HfToTune(const NamedTensors& hf, const std::string& model_type, const DecoderArgs& args,
                                const std::string& source) {
  std::map<std::string, const at::Tensor*> by_name;
  const models::ModelTypeRecord* type = models::FindModelType(model_type);
  std::set<std::string> wrapper_tensors;  // a multimodal checkpoint's tensors this text model leaves alone
  for (const auto& [name, tensor] : hf) {
    std::string own = name;
    if (type != nullptr && !type->wrapper_prefix.empty()) {
      if (WrappedElsewhere(*type, name)) {
        wrapper_tensors.insert(name);
        continue;
      }
      if (name.rfind(type->wrapper_prefix, 0) == 0) own = name.substr(type->wrapper_prefix.size());
    }
    if (!by_name.emplace(own, &tensor).second) {
      return Status::InvalidArgument(source + ": " + own + ": the checkpoint holds this tensor twice");
    }
  }
  const std::string fix =
      "; fix: build the model from the checkpoint's config.json, or choose the preset the checkpoint was published "
      "for";
  NamedTensors out;
  std::set<std::string> used;
  for (const HfTensorMap& m : HfTensorMaps(model_type, args)) {
    auto it = by_name.find(m.hf_name);
    if (it == by_name.end()) {
      return Status::InvalidArgument(source + ": " + m.hf_name + " (" + TuneNames(m) +
                                     "): missing from the checkpoint, "
                                     "expected with shape " +
                                     ShapeText(m.hf_shape) + fix);
    }
    at::Tensor t = *it->second;
    // A proxy with a cut vocabulary (DecoderArgs::vocab_cut_from) keeps the first rows of the embedding and
    // output of the model it was cut from.
    if (args.vocab_cut_from > args.vocab_size && t.dim() == 2 && t.size(0) == args.vocab_cut_from &&
        m.hf_shape.size() == 2 && m.hf_shape[0] == args.vocab_size && t.size(1) == m.hf_shape[1] &&
        (m.hf_name == "model.embed_tokens.weight" || m.hf_name == "lm_head.weight")) {
      t = t.narrow(0, 0, args.vocab_size);
    }
    if (t.sizes() != c10::IntArrayRef(m.hf_shape)) {
      return Status::InvalidArgument(source + ": " + m.hf_name + " (" + TuneNames(m) + "): shape " +
                                     ShapeText(t.sizes()) + " in the checkpoint, " + ShapeText(m.hf_shape) +
                                     " expected by the model" + fix);
    }
    used.insert(m.hf_name);
    int64_t row = 0;
    for (const Part& p : m.parts) {
      at::Tensor part = m.parts.size() == 1 ? t : t.narrow(m.split_dim, row, p.rows);
      row += p.rows;
      out.emplace_back(p.tune_name, p.permute_heads > 0 ? Repair(part, p.permute_heads, true) : part);
    }
  }
  const std::string prefix = type != nullptr ? type->wrapper_prefix : "";
  const std::string extra = FirstUnused(hf, used, [&](const std::string& n) {
    if (wrapper_tensors.count(n) > 0) return true;
    const bool wrapped = !prefix.empty() && n.rfind(prefix, 0) == 0;
    const std::string own = wrapped ? n.substr(prefix.size()) : n;
    return (wrapped && used.count(own) > 0) || Ignorable(own, args);
  });
  if (!extra.empty()) {
    return Status::InvalidArgument(source + ": " + extra + ": in the checkpoint, but a " + model_type +
                                   " model with this configuration has no such tensor" + fix);
  }
  return out;
}

StatusOr<NamedTensors> TuneToHf(const NamedTensors& tune, const std::string& model_type, const DecoderArgs& args) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : tune) by_name.emplace(name, &tensor);
  NamedTensors out;
  std::set<std::string> used;
  for (const HfTensorMap& m : HfTensorMaps(model_type, args)) {
    std::vector<at::Tensor> parts;
    for (const Part& p : m.parts) {
      auto it = by_name.find(p.tune_name);
      if (it == by_name.end()) {
        return Status::InvalidArgument(p.tune_name + ": missing from the state dict to save as " + m.hf_name +
                                       "; fix: save the state dict of a model built with these args");
      }
      used.insert(p.tune_name);
      const at::Tensor t = it->second->detach();
      parts.push_back(p.permute_heads > 0 ? Repair(t, p.permute_heads, false) : t);
    }
    out.emplace_back(m.hf_name, parts.size() == 1 ? parts[0] : torch::cat(parts, m.split_dim));
  }
  const std::string extra = FirstUnused(tune, used, Never);
  if (!extra.empty()) {
    return Status::InvalidArgument(extra + ": has no place in a " + model_type +
                                   " checkpoint; fix: save MergedStateDict(model) (LoRA adapters merged) or the "
                                   "adapters separately with SavePeftAdapter");
  }
  return out;
}

namespace {

// DoRA on a fused module: PEFT keeps one magnitude over its rows, so rows without an adapter get their weight's
// row norms (from `base`), which scale them by exactly 1.
Status FillUnadaptedMagnitudes(const HfTensorMap& m, const std::string& hf_module,
                               const std::map<std::string, const at::Tensor*>& base, int64_t first_adapted,
                               std::vector<at::Tensor>* magnitudes) {
  const c10::ScalarType dtype = (*magnitudes)[static_cast<size_t>(first_adapted)].scalar_type();
  for (size_t i = 0; i < m.parts.size(); ++i) {
    if ((*magnitudes)[i].defined()) continue;
    auto weight = base.find(m.parts[i].tune_name);
    if (weight == base.end()) {
      return Status::InvalidArgument(
          m.parts[i].tune_name + ": DoRA on the fused " + hf_module + " needs this weight's row norms for " +
          "the rows without an adapter (PEFT keeps one magnitude for the whole module); fix: pass the model's " +
          "weights (ModuleTensors(model)) as the base");
    }
    const at::Tensor norms = at::linalg_vector_norm(weight->second->detach().to(torch::kFloat), 2, {1});
    const int64_t heads = m.parts[i].permute_heads;
    const at::Tensor norms_hf = heads > 0 ? Repair(norms, heads, false) : norms;
    (*magnitudes)[i] = norms_hf.to(dtype);
  }
  return Status::OK();
}

// A fused module's B, block-diagonal over its rows: part i's rows read only part i's slice of A (the parts in
// `adapted`, whose B's are `b_parts` in order).
at::Tensor BlockDiagonalB(const HfTensorMap& m, const std::vector<at::Tensor>& b_parts,
                          const std::vector<int64_t>& adapted) {
  const int64_t rank = b_parts[0].size(1);
  at::Tensor lora_b =
      torch::zeros({m.hf_shape[0], rank * static_cast<int64_t>(adapted.size())}, b_parts[0].options());
  int64_t row = 0, slot = 0;
  for (size_t i = 0; i < m.parts.size(); ++i) {
    if (slot < static_cast<int64_t>(adapted.size()) && adapted[slot] == static_cast<int64_t>(i)) {
      lora_b.narrow(0, row, m.parts[i].rows).narrow(1, slot * rank, rank).copy_(b_parts[slot]);
      ++slot;
    }
    row += m.parts[i].rows;
  }
  return lora_b;
}

}  // namespace

StatusOr<PeftAdapterTensors> TuneAdaptersToPeft(const NamedTensors& adapters, const std::string& model_type,
                                                const DecoderArgs& args, const NamedTensors& base) {
  std::map<std::string, const at::Tensor*> by_name, base_by_name;
  for (const auto& [name, tensor] : adapters) by_name.emplace(name, &tensor);
  for (const auto& [name, tensor] : base) base_by_name.emplace(name, &tensor);
  PeftAdapterTensors out;
  std::set<std::string> used, targets;
  for (const HfTensorMap& m : HfTensorMaps(model_type, args)) {
    const std::string hf_module = ModuleOfWeight(m.hf_name);
    if (hf_module.empty()) continue;  // biases carry no adapter
    std::vector<at::Tensor> a_parts, b_parts;
    std::vector<at::Tensor> magnitudes(m.parts.size());  // DoRA's, in Hugging Face row order; undefined for LoRA
    std::vector<int64_t> adapted;                        // indices of the parts with an adapter
    for (size_t i = 0; i < m.parts.size(); ++i) {
      const std::string module = ModuleOfWeight(m.parts[i].tune_name);
      auto a = by_name.find(module + ".lora_a.weight");
      auto b = by_name.find(module + ".lora_b.weight");
      if (a == by_name.end() || b == by_name.end()) continue;
      used.insert({a->first, b->first});
      adapted.push_back(static_cast<int64_t>(i));
      a_parts.push_back(a->second->detach());
      const int64_t heads = m.parts[i].permute_heads;
      const at::Tensor lora_b = b->second->detach();
      b_parts.push_back(heads > 0 ? Repair(lora_b, heads, false) : lora_b);
      // A magnitude belongs to its output rows, so it is permuted as they are.
      auto magnitude = by_name.find(module + ".magnitude");
      if (magnitude == by_name.end()) continue;
      used.insert(magnitude->first);
      const at::Tensor mag = magnitude->second->detach();
      magnitudes[i] = heads > 0 ? Repair(mag, heads, false) : mag;
    }
    if (adapted.empty()) continue;
    const bool dora = magnitudes[static_cast<size_t>(adapted[0])].defined();
    if (dora) {
      Status filled = FillUnadaptedMagnitudes(m, hf_module, base_by_name, adapted[0], &magnitudes);
      if (!filled.ok()) return filled;
    }
    at::Tensor lora_a = a_parts.size() == 1 ? a_parts[0] : torch::cat(a_parts, 0);
    at::Tensor lora_b = b_parts[0];
    if (m.parts.size() > 1) {
      lora_b = BlockDiagonalB(m, b_parts, adapted);
      if (adapted.size() > 1) out.rank_multiple[LeafName(hf_module)] = static_cast<int64_t>(adapted.size());
    }
    out.tensors.emplace_back("base_model.model." + hf_module + ".lora_A.weight", lora_a.contiguous());
    out.tensors.emplace_back("base_model.model." + hf_module + ".lora_B.weight", lora_b.contiguous());
    if (dora) {
      at::Tensor magnitude = magnitudes.size() == 1 ? magnitudes[0] : torch::cat(magnitudes, 0);
      out.tensors.emplace_back("base_model.model." + hf_module + ".lora_magnitude_vector", magnitude.contiguous());
    }
    if (targets.insert(LeafName(hf_module)).second) out.target_modules.push_back(LeafName(hf_module));
  }
  ExpertAdapters(adapters, &used, &out);
  const std::string extra = FirstUnused(adapters, used, Never);
  if (!extra.empty()) {
    return Status::InvalidArgument(extra + ": not an adapter of a tensor a " + model_type +
                                   " checkpoint holds; fix: pass AdapterParameters(model) of a model built with these "
                                   "args");
  }
  return out;
}

}  // namespace tmx::checkpoint
