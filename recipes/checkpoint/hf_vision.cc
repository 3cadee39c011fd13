#include "recipes/checkpoint/hf_vision.h"

#include <torch/torch.h>

#include <map>
#include <set>
#include <utility>

namespace tmx::checkpoint {
namespace {

using models::VisionModelArgs;

constexpr const char* kFusionEmbedding = "decoder.tok_embeddings.fusion_embedding.weight";

class MapBuilder {
 public:
  explicit MapBuilder(const VisionModelArgs& args) : a_(args) {}

  std::vector<MllamaTensorMap> Build() {
    Encoder();
    Decoder();
    return std::move(maps_);
  }

 private:
  void Add(std::string hf, std::string tune, MllamaLayout layout = MllamaLayout::kSame, int64_t count = 0) {
    maps_.push_back({std::move(hf), std::move(tune), layout, count});
  }

  void Both(const std::string& hf, const std::string& tune) {
    Add(hf + ".weight", tune + ".weight");
    Add(hf + ".bias", tune + ".bias");
  }

  // An attention's four projections: HF's q/k/v/o_proj under `hf`, torchtune's q/k/v/output_proj under `tune`.
  void Projections(const std::string& hf, const std::string& tune) {
    for (const auto& [h, t] : {std::pair<const char*, const char*>{"q_proj", "q_proj"}, {"k_proj", "k_proj"},
                               {"v_proj", "v_proj"}, {"o_proj", "output_proj"}}) {
      Add(hf + h + ".weight", tune + t + ".weight");
    }
  }

  void VisionLayer(const std::string& hf, const std::string& tune, bool gated) {
    Projections(hf + "self_attn.", tune + "attn.");
    Both(hf + "mlp.fc1", tune + "mlp.w1");
    Both(hf + "mlp.fc2", tune + "mlp.w2");
    Both(hf + "input_layernorm", tune + "sa_norm");
    Both(hf + "post_attention_layernorm", tune + "mlp_norm");
    if (gated) {
      Add(hf + "gate_attn", tune + "sa_scale.scale");
      Add(hf + "gate_ffn", tune + "mlp_scale.scale");
    }
  }

  void Encoder() {
    const models::VisionEncoderArgs& e = a_.encoder;
    Add("vision_model.patch_embedding.weight", "encoder.clip.conv.weight");
    Add("vision_model.class_embedding", "encoder.clip.cls_token_embedding.weight");
    if (e.max_num_tiles > 1) {
      Add("vision_model.gated_positional_embedding.embedding",
          "encoder.clip.token_pos_embedding.local_token_positional_embedding");
      Add("vision_model.gated_positional_embedding.tile_embedding.weight",
          "encoder.clip.token_pos_embedding.global_token_positional_embedding", MllamaLayout::kTileTable,
          e.tokens_per_tile());
      Add("vision_model.gated_positional_embedding.gate", "encoder.clip.token_pos_embedding.gate");
      for (const char* which : {"pre", "post"}) {
        const std::string hf = std::string("vision_model.") + which + "_tile_positional_embedding.";
        const std::string tune = std::string("encoder.clip.") + which + "_tile_pos_embed.";
        Add(hf + "embedding.weight", tune + "embedding", MllamaLayout::kTileTable, 1);
        Add(hf + "gate", tune + "gate");
      }
    } else {
      Add("vision_model.gated_positional_embedding.embedding",
          "encoder.clip.token_pos_embedding.positional_embedding");
    }
    Both("vision_model.layernorm_pre", "encoder.clip.ln_pre");
    Both("vision_model.layernorm_post", "encoder.clip.ln_post");
    for (int64_t i = 0; i < e.num_layers; ++i) {
      VisionLayer("vision_model.transformer.layers." + std::to_string(i) + ".",
                  "encoder.clip.layers." + std::to_string(i) + ".", false);
    }
    for (int64_t i = 0; i < e.num_layers_projection; ++i) {
      VisionLayer("vision_model.global_transformer.layers." + std::to_string(i) + ".",
                  "encoder.projection.layers." + std::to_string(i) + ".", true);
    }
    Both("multi_modal_projector", "encoder.projection.output");
  }

  void Mlp(const std::string& hf, const std::string& tune) {
    Add(hf + "mlp.gate_proj.weight", tune + "mlp.w1.weight");
    Add(hf + "mlp.up_proj.weight", tune + "mlp.w3.weight");
    Add(hf + "mlp.down_proj.weight", tune + "mlp.w2.weight");
  }

  void CrossLayer(const std::string& hf, const std::string& tune) {
    Add(hf + "input_layernorm.weight", tune + "ca_norm.scale");
    Projections(hf + "cross_attn.", tune + "attn.");
    Add(hf + "cross_attn.q_norm.weight", tune + "attn.q_norm.scale");
    Add(hf + "cross_attn.k_norm.weight", tune + "attn.k_norm.scale");
    Add(hf + "cross_attn_attn_gate", tune + "ca_scale.scale");
    Add(hf + "post_attention_layernorm.weight", tune + "mlp_norm.scale");
    Mlp(hf, tune);
    Add(hf + "cross_attn_mlp_gate", tune + "mlp_scale.scale");
  }

  void SelfLayer(const std::string& hf, const std::string& tune) {
    const models::DecoderArgs& d = a_.decoder;
    Add(hf + "input_layernorm.weight", tune + "sa_norm.scale");
    Add(hf + "self_attn.q_proj.weight", tune + "attn.q_proj.weight", MllamaLayout::kRopeHeads, d.num_heads);
    Add(hf + "self_attn.k_proj.weight", tune + "attn.k_proj.weight", MllamaLayout::kRopeHeads, d.num_kv_heads);
    Add(hf + "self_attn.v_proj.weight", tune + "attn.v_proj.weight");
    Add(hf + "self_attn.o_proj.weight", tune + "attn.output_proj.weight");
    Add(hf + "post_attention_layernorm.weight", tune + "mlp_norm.scale");
    Mlp(hf, tune);
  }

  void Decoder() {
    Add("language_model.model.embed_tokens.weight", "decoder.tok_embeddings.weight", MllamaLayout::kEmbeddings);
    const std::vector<int64_t> fused = a_.fusion_layers();
    int64_t hf_index = 0;
    for (int64_t i = 0; i < a_.decoder.num_layers; ++i) {
      const std::string tune = "decoder.layers." + std::to_string(i) + ".";
      if (std::find(fused.begin(), fused.end(), i) != fused.end()) {
        CrossLayer("language_model.model.layers." + std::to_string(hf_index++) + ".", tune + "fusion_layer.");
      }
      SelfLayer("language_model.model.layers." + std::to_string(hf_index++) + ".", tune);
    }
    Add("language_model.model.norm.weight", "decoder.norm.scale");
    Add("language_model.lm_head.weight", "decoder.output.weight");
  }

  const VisionModelArgs& a_;
  std::vector<MllamaTensorMap> maps_;
};

// Rows of q/k for `heads` heads: Hugging Face's halves <-> interleaved pairs.
at::Tensor PermuteHeads(const at::Tensor& t, int64_t heads, bool to_interleaved) {
  const int64_t head_dim = t.size(0) / heads;
  std::vector<int64_t> view = {heads, to_interleaved ? 2 : head_dim / 2, to_interleaved ? head_dim / 2 : 2};
  for (int64_t d = 1; d < t.dim(); ++d) view.push_back(t.size(d));
  return t.reshape(view).transpose(1, 2).reshape(t.sizes()).contiguous();
}

at::Tensor GridFromRatios(const at::Tensor& rows, int64_t tiles, int64_t count) {
  const int64_t dim = rows.size(1) / (tiles * count);
  at::Tensor grid = torch::zeros({tiles, tiles, count, dim}, rows.options());
  at::Tensor by_tile = rows.view({rows.size(0), tiles, count, dim});
  const auto ratios = models::SupportedAspectRatios(tiles);
  for (size_t id = 0; id < ratios.size(); ++id) {
    const auto [h, w] = ratios[id];
    for (int64_t t = 0; t < h * w; ++t) grid[t / w][t % w].copy_(by_tile[id + 1][t]);
  }
  return grid;
}

at::Tensor RatiosFromGrid(const at::Tensor& grid, int64_t tiles) {
  const auto ratios = models::SupportedAspectRatios(tiles);
  at::Tensor rows = torch::zeros({static_cast<int64_t>(ratios.size()) + 1, tiles, grid.size(2), grid.size(3)},
                                 grid.options());
  for (size_t id = 0; id < ratios.size(); ++id) {
    const auto [h, w] = ratios[id];
    for (int64_t t = 0; t < h * w; ++t) rows[id + 1][t].copy_(grid[t / w][t % w]);
  }
  return rows.reshape({rows.size(0), -1});
}

std::string ShapeOf(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The expected shape of a tensor whose layout is not kSame/kRopeHeads (those are checked by the loader).
std::vector<int64_t> SpecialShape(const MllamaTensorMap& m, const VisionModelArgs& a) {
  if (m.layout == MllamaLayout::kEmbeddings) return {a.decoder.vocab_size + a.num_special_tokens, a.decoder.embed_dim};
  const int64_t t = a.encoder.max_num_tiles;
  return {static_cast<int64_t>(models::SupportedAspectRatios(t).size()) + 1, t * m.count * a.encoder.embed_dim};
}

Status AppendTune(const MllamaTensorMap& m, const at::Tensor& t, const VisionModelArgs& a, NamedTensors* out) {
  switch (m.layout) {
    case MllamaLayout::kSame:
      out->emplace_back(m.tune_name, t);
      return Status::OK();
    case MllamaLayout::kRopeHeads:
      if (t.dim() != 2 || t.size(0) % (2 * m.count) != 0) {
        return Status::InvalidArgument(m.hf_name + ": shape " + ShapeOf(t.sizes()) + " is not " +
                                       std::to_string(m.count) + " heads of even size");
      }
      out->emplace_back(m.tune_name, PermuteHeads(t, m.count, true));
      return Status::OK();
    default:
      break;
  }
  const std::vector<int64_t> shape = SpecialShape(m, a);
  if (t.sizes() != at::IntArrayRef(shape)) {
    return Status::InvalidArgument(m.hf_name + ": shape " + ShapeOf(t.sizes()) + " in the checkpoint, " +
                                   ShapeOf(shape) + " expected by the model");
  }
  if (m.layout == MllamaLayout::kEmbeddings) {
    out->emplace_back(m.tune_name, t.narrow(0, 0, a.decoder.vocab_size));
    out->emplace_back(kFusionEmbedding, t.narrow(0, a.decoder.vocab_size, a.num_special_tokens));
  } else {
    out->emplace_back(m.tune_name, GridFromRatios(t, a.encoder.max_num_tiles, m.count));
  }
  return Status::OK();
}

}  // namespace

std::vector<MllamaTensorMap> MllamaTensorMaps(const VisionModelArgs& args) { return MapBuilder(args).Build(); }

std::string HubMllamaName(const std::string& name) {
  static const std::pair<const char*, const char*> kPrefixes[] = {
      {"model.language_model.", "language_model.model."},
      {"model.vision_model.", "vision_model."},
      {"model.multi_modal_projector.", "multi_modal_projector."},
      {"lm_head.", "language_model.lm_head."}};
  for (const auto& [from, to] : kPrefixes) {
    if (name.rfind(from, 0) == 0) return to + name.substr(std::string(from).size());
  }
  return name;
}

StatusOr<NamedTensors> MllamaHfToTune(const NamedTensors& hf, const VisionModelArgs& args,
                                      const std::string& source) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : hf) {
    if (!by_name.emplace(HubMllamaName(name), &tensor).second) {
      return Status::InvalidArgument(source + ": " + name + ": the checkpoint holds this tensor twice");
    }
  }
  const std::string fix = "; fix: choose the preset the checkpoint was published for";
  NamedTensors out;
  std::set<std::string> used;
  for (const MllamaTensorMap& m : MllamaTensorMaps(args)) {
    auto it = by_name.find(m.hf_name);
    if (it == by_name.end()) {
      return Status::InvalidArgument(source + ": " + m.hf_name + " (" + m.tune_name +
                                     "): missing from the checkpoint" + fix);
    }
    used.insert(m.hf_name);
    const Status s = AppendTune(m, *it->second, args, &out);
    if (!s.ok()) return Status::InvalidArgument(source + ": " + s.message() + fix);
  }
  for (const auto& [name, tensor] : by_name) {
    if (used.count(name) == 0) {
      return Status::InvalidArgument(source + ": " + name +
                                     ": in the checkpoint, but this Llama 3.2 Vision model has no such tensor" + fix);
    }
  }
  return out;
}

StatusOr<NamedTensors> MllamaTuneToHf(const NamedTensors& tune, const VisionModelArgs& args) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : tune) by_name.emplace(name, &tensor);
  std::set<std::string> used;
  auto find = [&](const std::string& name) -> const at::Tensor* {
    auto it = by_name.find(name);
    if (it == by_name.end()) return nullptr;
    used.insert(name);
    return it->second;
  };
  NamedTensors out;
  for (const MllamaTensorMap& m : MllamaTensorMaps(args)) {
    const at::Tensor* t = find(m.tune_name);
    const at::Tensor* fusion = m.layout == MllamaLayout::kEmbeddings ? find(kFusionEmbedding) : t;
    if (t == nullptr || fusion == nullptr) {
      return Status::InvalidArgument((t == nullptr ? m.tune_name : std::string(kFusionEmbedding)) +
                                     ": missing from the state dict to save as " + m.hf_name +
                                     "; fix: save the state dict of a model built with these args");
    }
    const at::Tensor v = t->detach();
    switch (m.layout) {
      case MllamaLayout::kSame: out.emplace_back(m.hf_name, v); break;
      case MllamaLayout::kRopeHeads: out.emplace_back(m.hf_name, PermuteHeads(v, m.count, false)); break;
      case MllamaLayout::kEmbeddings: out.emplace_back(m.hf_name, torch::cat({v, fusion->detach()}, 0)); break;
      case MllamaLayout::kTileTable: out.emplace_back(m.hf_name, RatiosFromGrid(v, args.encoder.max_num_tiles)); break;
    }
  }
  for (const auto& [name, tensor] : tune) {
    if (used.count(name) == 0) {
      return Status::InvalidArgument(name + ": has no place in a Mllama checkpoint; fix: save the merged state "
                                            "dict (LoRA adapters folded in)");
    }
  }
  return out;
}

}  // namespace tmx::checkpoint
