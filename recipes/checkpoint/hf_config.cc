#include "recipes/checkpoint/hf_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/file_util.h"
#include "base/input_file.h"
#include "base/json_io.h"
#include "recipes/models/model_types.h"

namespace tmx::checkpoint {
namespace {

using models::DecoderArgs;
using models::MlpActivation;
using models::ModelTypeRecord;
using nlohmann::json;

std::string Str(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// Reads config.json fields with messages "<source>: <field>: <problem>".
class Fields {
 public:
  Fields(const json& j, const std::string& source) : j_(j), source_(source) {}

  Status Error(const std::string& field, const std::string& problem) const {
    return Status::InvalidArgument(source_ + ": " + field + ": " + problem);
  }
  bool Has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const json& Raw(const char* key) const { return j_[key]; }

  Status Int(const char* key, int64_t* out, std::optional<int64_t> fallback = std::nullopt) const {
    return Get(key, out, fallback, &json::is_number_integer, "an integer");
  }
  Status Number(const char* key, double* out, std::optional<double> fallback = std::nullopt) const {
    return Get(key, out, fallback, &json::is_number, "a number");
  }
  Status Bool(const char* key, bool* out, bool fallback) const {
    return Get(key, out, std::optional<bool>(fallback), &json::is_boolean, "true or false");
  }
  Status String(const char* key, std::string* out, const std::string& fallback) const {
    return Get(key, out, std::optional<std::string>(fallback), &json::is_string, "a string");
  }
  // A boolean that must be `allowed` (false by default) because the decoder has no such option.
  Status Refuse(const char* key, const std::string& why) const {
    bool on = false;
    TM_RETURN_IF_ERROR(Bool(key, &on, false));
    return on ? Error(key, "true is not implemented (" + why + ")") : Status::OK();
  }
  void set_model_type(const std::string& t) { model_type_ = t; }
  const std::string& source() const { return source_; }

 private:
  // `key`'s value when present and of the right JSON type, else `fallback` when given.
  template <typename T>
  Status Get(const char* key, T* out, const std::optional<T>& fallback, bool (json::*is_type)() const noexcept,
             const char* expected) const {
    if (!Has(key)) {
      if (!fallback) return Missing(key);
      *out = *fallback;
      return Status::OK();
    }
    if (!(j_[key].*is_type)())
      return Error(key, std::string("expected ") + expected + ", got " + JsonForMessage(j_[key]));
    *out = j_[key].get<T>();
    return Status::OK();
  }
  Status Missing(const char* key) const {
    return Error(key, model_type_.empty() ? "missing" : "missing; a " + model_type_ + " config.json needs it");
  }

  const json& j_;
  std::string source_;
  std::string model_type_;
};

Status ParseActivation(const Fields& f, const char* key, const std::string& fallback, MlpActivation* out) {
  std::string act;
  TM_RETURN_IF_ERROR(f.String(key, &act, fallback));
  if (act == "silu" || act == "swish") {
    *out = MlpActivation::kSilu;
  } else if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_fast") {
    *out = MlpActivation::kGeluTanh;
  } else if (act == "gelu") {
    *out = MlpActivation::kGelu;
  } else {
    return f.Error(key, "'" + act + "' is not implemented; supported: silu, gelu, gelu_pytorch_tanh");
  }
  return Status::OK();
}

Status ParseRopeScaling(const Fields& f, DecoderArgs* a) {
  if (!f.Has("rope_scaling")) return Status::OK();
  const json& s = f.Raw("rope_scaling");
  if (!s.is_object()) return f.Error("rope_scaling", "expected an object or null, got " + JsonForMessage(s));
  Fields rope(s, f.source() + ": rope_scaling");
  std::string type;
  TM_RETURN_IF_ERROR(rope.String("rope_type", &type, ""));
  if (type.empty()) TM_RETURN_IF_ERROR(rope.String("type", &type, ""));
  if (type == "default") return Status::OK();
  if (type != "llama3") {
    return f.Error("rope_scaling.rope_type",
                   "'" + type + "' is not implemented; supported: llama3 (or null for plain RoPE)");
  }
  models::RopeScaling r;
  const Status parsed = [&]() -> Status {
    TM_RETURN_IF_ERROR(rope.Number("factor", &r.factor));
    TM_RETURN_IF_ERROR(rope.Number("low_freq_factor", &r.low_freq_factor));
    TM_RETURN_IF_ERROR(rope.Number("high_freq_factor", &r.high_freq_factor));
    return rope.Int("original_max_position_embeddings", &r.old_context_len);
  }();
  TM_RETURN_IF_ERROR(parsed);
  a->rope_scaling = r;
  return Status::OK();
}

// transformers 5 saves RoPE settings as one `rope_parameters` object (rope_theta, rope_type, the scaling
// factors, partial_rotary_factor), or one such object per layer type, where 4.x wrote rope_theta and
// rope_scaling beside the other keys. Rewrites the 5.x form into the 4.x keys the reader takes, so a checkpoint
// saved by either reads the same; refuses what the decoder cannot express instead of falling back silently to
// base 10000 without scaling.
Status LegacyRopeKeys(json* j, const std::string& source) {
  auto error = [&](const std::string& key, const std::string& problem) {
    return Status::InvalidArgument(source + ": " + key + ": " + problem);
  };
  if (!j->contains("rope_parameters") || (*j)["rope_parameters"].is_null()) return Status::OK();
  json params = (*j)["rope_parameters"];
  if (!params.is_object()) return error("rope_parameters", "expected an object or null, got " + JsonForMessage(params));
  // One object per layer type (keys among the layer types): the decoder has one RoPE, so they must agree.
  bool per_layer = !params.empty();
  for (const auto& [key, value] : params.items()) {
    per_layer = per_layer && (key == "full_attention" || key == "sliding_attention") && value.is_object();
  }
  if (per_layer) {
    const json first = params.begin().value();
    for (const auto& [key, value] : params.items()) {
      if (value != first) {
        return error("rope_parameters." + key, "differs from the other layer types' (" + JsonForMessage(value) +
                                                   " vs " + JsonForMessage(first) +
                                                   "); per-layer RoPE is not implemented");
      }
    }
    params = first;
  }
  if (j->contains("rope_scaling") && !(*j)["rope_scaling"].is_null()) {
    return error("rope_scaling", "given beside rope_parameters; keep one (rope_parameters: transformers 5, "
                                 "rope_scaling: 4.x)");
  }
  json scaling = json::object();
  for (const auto& [key, value] : params.items()) {
    if (key == "rope_theta" || key == "partial_rotary_factor") {
      if (j->contains(key) && !(*j)[key].is_null() && (*j)[key] != value) {
        return error(key, JsonForMessage((*j)[key]) + " disagrees with rope_parameters." + key + " " +
                              JsonForMessage(value) + "; keep one");
      }
      (*j)[key] = value;
    } else {
      scaling[key] = value;
    }
  }
  const json type = scaling.contains("rope_type") ? scaling["rope_type"] : scaling.value("type", json("default"));
  (*j)["rope_scaling"] = type == "default" ? json(nullptr) : scaling;
  j->erase("rope_parameters");
  return Status::OK();
}

// [1 if layer i rotates else 0] for every layer: Hugging Face's no_rope_layers ("no rope" means NoPE-able).
json NoRopeLayers(const DecoderArgs& a) {
  json layers = json::array();
  for (int64_t i = 0; i < a.num_layers; ++i) layers.push_back(a.rope_in_layer(i) ? 1 : 0);
  return layers;
}

json MoeLayers(const DecoderArgs& a) {
  json layers = json::array();
  for (int64_t i = 0; i < a.num_layers; ++i) {
    if (a.moe_in_layer(i)) layers.push_back(i);
  }
  return layers;
}

// Llama 4's per-layer lists must follow the intervals DecoderArgs can express.
Status CheckLayerLists(const Fields& f, const DecoderArgs& a) {
  if (f.Has("no_rope_layers") && !f.Raw("no_rope_layers").empty()) {
    json given = f.Raw("no_rope_layers");
    for (json& v : given) {
      if (v.is_boolean()) v = v.get<bool>() ? 1 : 0;
    }
    if (given != NoRopeLayers(a)) {
      return f.Error("no_rope_layers", JsonForMessage(f.Raw("no_rope_layers")) +
                                           " is not a NoPE layer every no_rope_layer_interval (" +
                                           std::to_string(a.nope_layer_interval) +
                                           ") layers; other patterns are not implemented");
    }
  }
  if (f.Has("moe_layers") && f.Raw("moe_layers") != MoeLayers(a)) {
    return f.Error("moe_layers", JsonForMessage(f.Raw("moe_layers")) +
                                     " is not every interleave_moe_layer_step-th layer; other patterns are not "
                                     "implemented");
  }
  if (f.Has("layer_types")) {
    const json& types = f.Raw("layer_types");
    for (size_t i = 0; i < types.size(); ++i) {
      const bool chunked = a.attention_chunk_size > 0 && a.rope_in_layer(static_cast<int64_t>(i));
      if (types[i] != json(chunked ? "chunked_attention" : "full_attention")) {
        return f.Error("layer_types", "layer " + std::to_string(i) + " is " + JsonForMessage(types[i]) +
                                          "; only chunked attention on the RoPE layers is implemented");
      }
    }
  }
  return Status::OK();
}

// Llama 4's mixture-of-experts, NoPE, chunk, q/k norm and temperature keys (Llama4TextConfig's defaults).
Status ParseLlama4Options(const Fields& f, DecoderArgs* a) {
  TM_RETURN_IF_ERROR(f.Int("num_local_experts", &a->num_experts, 16));
  TM_RETURN_IF_ERROR(f.Int("num_experts_per_tok", &a->experts_per_token, 1));
  TM_RETURN_IF_ERROR(f.Int("interleave_moe_layer_step", &a->moe_every_n_layers, 1));
  TM_RETURN_IF_ERROR(f.Int("intermediate_size_mlp", &a->dense_intermediate_dim, 16384));
  TM_RETURN_IF_ERROR(f.Bool("use_qk_norm", &a->qk_l2_norm, true));
  TM_RETURN_IF_ERROR(f.Int("no_rope_layer_interval", &a->nope_layer_interval, 4));
  if (f.Has("no_rope_layers") && f.Raw("no_rope_layers").is_array() && !f.Raw("no_rope_layers").empty()) {
    // transformers saves the list, not the interval: the first NoPE layer gives it (CheckLayerLists checks the
    // rest); none at all: RoPE everywhere.
    const json& layers = f.Raw("no_rope_layers");
    a->nope_layer_interval = 0;
    for (size_t i = 0; i < layers.size(); ++i) {
      if (layers[i] == json(0) || layers[i] == json(false)) {
        a->nope_layer_interval = static_cast<int64_t>(i) + 1;
        break;
      }
    }
  }
  TM_RETURN_IF_ERROR(f.Int("attention_chunk_size", &a->attention_chunk_size, 8192));
  bool tuning = true;
  if (f.Has("attn_temperature_tuning") && f.Raw("attn_temperature_tuning").is_number()) {
    tuning = f.Raw("attn_temperature_tuning").get<double>() != 0;  // early Llama 4 files wrote a number
  } else {
    TM_RETURN_IF_ERROR(f.Bool("attn_temperature_tuning", &tuning, true));
  }
  double floor = 8192;
  TM_RETURN_IF_ERROR(f.Number("floor_scale", &floor, 8192.0));
  TM_RETURN_IF_ERROR(f.Number("attn_scale", &a->attn_temperature_scale, 0.1));
  a->attn_temperature_floor = tuning ? floor : 0;
  return CheckLayerLists(f, *a);
}

void WriteLlama4Options(const DecoderArgs& a, json* j) {
  json& o = *j;
  o["num_local_experts"] = a.num_experts;
  o["num_experts_per_tok"] = a.experts_per_token;
  o["interleave_moe_layer_step"] = a.moe_every_n_layers;
  o["moe_layers"] = MoeLayers(a);
  o["intermediate_size_mlp"] = a.dense_intermediate_dim > 0 ? a.dense_intermediate_dim : a.intermediate_dim;
  o["use_qk_norm"] = a.qk_l2_norm;
  o["no_rope_layer_interval"] = a.nope_layer_interval > 0 ? a.nope_layer_interval : a.num_layers + 1;
  o["no_rope_layers"] = NoRopeLayers(a);
  o["attention_chunk_size"] = a.attention_chunk_size > 0 ? json(a.attention_chunk_size) : json(nullptr);
  o["attn_temperature_tuning"] = a.attn_temperature_floor > 0;
  o["floor_scale"] = a.attn_temperature_floor > 0 ? a.attn_temperature_floor : 8192.0;
  o["attn_scale"] = a.attn_temperature_scale;
  o["attention_bias"] = false;
}

// The keys `type` reads beyond the common ones (its record's columns), and its fixed traits.
Status ParseTypeOptions(const ModelTypeRecord& type, const Fields& f, DecoderArgs* a) {
  models::ApplyFixedTraits(type, a);
  if (type.refuses_attention_bias) {
    TM_RETURN_IF_ERROR(f.Refuse("attention_bias", "the decoder's o_proj has no bias"));
  }
  if (type.refuses_mlp_bias) TM_RETURN_IF_ERROR(f.Refuse("mlp_bias", "the decoder's MLP has no bias"));
  if (type.reads_rope_scaling) {
    TM_RETURN_IF_ERROR(ParseRopeScaling(f, a));
  } else if (f.Has("rope_scaling")) {
    return f.Error("rope_scaling", JsonForMessage(f.Raw("rope_scaling")) + " is not implemented for " + type.name +
                                       "; only llama's \"llama3\" scaling is");
  }
  if (!type.sliding_window_refusal.empty()) {
    TM_RETURN_IF_ERROR(f.Refuse("use_sliding_window", type.sliding_window_refusal));
  }
  if (!f.Has(type.activation_key.c_str()) && !type.legacy_activation_key.empty() &&
      f.Has(type.legacy_activation_key.c_str())) {
    // Gemma's legacy hidden_act: "gelu" there meant the tanh approximation (model_types.cc says why).
    TM_RETURN_IF_ERROR(ParseActivation(f, type.legacy_activation_key.c_str(), "", &a->mlp_activation));
    if (a->mlp_activation == MlpActivation::kGelu) a->mlp_activation = MlpActivation::kGeluTanh;
  } else {
    TM_RETURN_IF_ERROR(
        ParseActivation(f, type.activation_key.c_str(), type.default_activation, &a->mlp_activation));
  }
  if (type.reads_sliding_window) TM_RETURN_IF_ERROR(f.Int("sliding_window", &a->sliding_window, 0));
  if (type.reads_softcaps) {
    TM_RETURN_IF_ERROR(f.Number("attn_logit_softcapping", &a->attn_softcap, 0.0));
    TM_RETURN_IF_ERROR(f.Number("final_logit_softcapping", &a->final_softcap, 0.0));
    TM_RETURN_IF_ERROR(f.Number("query_pre_attn_scalar", &a->query_pre_attn_scalar, 256.0));
    if (f.Has("layer_types")) {
      const json& layers = f.Raw("layer_types");
      for (size_t i = 0; i < layers.size(); ++i) {
        const std::string want = i % 2 == 0 ? "sliding_attention" : "full_attention";
        if (!layers[i].is_string() || layers[i].get<std::string>() != want) {
          return f.Error("layer_types", "layer " + std::to_string(i) + " is " + JsonForMessage(layers[i]) +
                                            "; only Gemma 2's alternation (sliding on even layers) is implemented");
        }
      }
    }
  }
  if (type.llama4_options) TM_RETURN_IF_ERROR(ParseLlama4Options(f, a));
  {
    // No type here rotates part of a head (Phi-3's configs say 1.0; transformers 5 may write it for any type).
    double partial = 1.0;
    TM_RETURN_IF_ERROR(f.Number("partial_rotary_factor", &partial, 1.0));
    if (partial != 1.0) return f.Error("partial_rotary_factor", Str(partial) + " is not implemented; only 1.0 is");
  }
  return Status::OK();
}

}  // namespace

std::string SupportedHfModelTypes() { return models::ModelTypeNames(); }

StatusOr<HfModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source) {
  StatusOr<json> parsed = ParseJsonText(source, json_text);
  if (!parsed.ok()) return parsed.status();
  json& j = *parsed;
  if (!j.is_object()) {
    return Status::InvalidArgument(source + ": not a JSON object; fix: point to a Hugging Face config.json");
  }
  // A multimodal wrapper's config.json (Llama 4's "llama4") holds the text model's under text_config.
  const bool wrapped = j.contains("model_type") && j["model_type"].is_string() &&
                       models::FindWrappedModelType(j["model_type"].get<std::string>()) != nullptr;
  if (wrapped) {
    if (!j.contains("text_config") || !j["text_config"].is_object()) {
      return Status::InvalidArgument(source + ": text_config: missing; a " + j["model_type"].get<std::string>() +
                                     " config.json holds the text model's config there");
    }
    j = json(j["text_config"]);
  }
  TM_RETURN_IF_ERROR(LegacyRopeKeys(&j, source));
  Fields f(j, source);
  HfModelConfig out;
  TM_RETURN_IF_ERROR(f.String("model_type", &out.model_type, ""));
  const ModelTypeRecord* type = models::FindModelType(out.model_type);
  if (type == nullptr) {
    return f.Error("model_type", "'" + out.model_type + "' is not supported; supported: " + SupportedHfModelTypes());
  }
  f.set_model_type(out.model_type);
  DecoderArgs& a = out.args;
  TM_RETURN_IF_ERROR(f.Int("vocab_size", &a.vocab_size));
  TM_RETURN_IF_ERROR(f.Int("num_hidden_layers", &a.num_layers));
  TM_RETURN_IF_ERROR(f.Int("num_attention_heads", &a.num_heads));
  TM_RETURN_IF_ERROR(f.Int("num_key_value_heads", &a.num_kv_heads, a.num_heads));
  TM_RETURN_IF_ERROR(f.Int("hidden_size", &a.embed_dim));
  TM_RETURN_IF_ERROR(f.Int("intermediate_size", &a.intermediate_dim));
  TM_RETURN_IF_ERROR(f.Int("max_position_embeddings", &a.max_seq_len));
  TM_RETURN_IF_ERROR(f.Int("head_dim", &a.head_dim, 0));
  TM_RETURN_IF_ERROR(f.Number("rope_theta", &a.rope_base, 10000.0));
  TM_RETURN_IF_ERROR(f.Number("rms_norm_eps", &a.norm_eps, 1e-6));
  TM_RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &a.tie_word_embeddings, type->tied_by_default));
  TM_RETURN_IF_ERROR(ParseTypeOptions(*type, f, &a));

  if (f.Has("architectures") && f.Raw("architectures").is_array() && !f.Raw("architectures").empty()) {
    const std::string arch = f.Raw("architectures")[0].is_string() ? f.Raw("architectures")[0].get<std::string>() : "";
    if (!type->classification.empty() && arch == type->classification) {
      a.num_classes = f.Has("id2label") && f.Raw("id2label").is_object() ? f.Raw("id2label").size() : 2;
      if (f.Has("num_labels")) TM_RETURN_IF_ERROR(f.Int("num_labels", &a.num_classes));
    } else if (arch != type->causal_lm) {
      return f.Error("architectures", "'" + arch + "' is not implemented for model_type " + out.model_type +
                                          "; supported: " + type->causal_lm +
                                          (type->classification.empty() ? "" : ", " + type->classification));
    }
  }
  if (a.num_classes > 0) a.tie_word_embeddings = false;  // transformers never ties a score head
  const Status valid = models::ValidateDecoderArgs(a);
  if (!valid.ok()) return Status::InvalidArgument(source + ": " + valid.message());
  return out;
}

StatusOr<HfModelConfig> ReadHfConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  StatusOr<std::string> text = ReadFile(path, ConfigInput());
  if (!text.ok()) {
    return Status(text.status()).WithContext("reading the Hugging Face config (a checkpoint folder needs config.json)");
  }
  return ParseHfConfig(*text, path);
}

StatusOr<std::string> HfConfigJson(const std::string& model_type, const DecoderArgs& args, const std::string& dtype) {
  const ModelTypeRecord* type = models::FindModelType(model_type);
  if (type == nullptr) {
    return Status::InvalidArgument("model_type: '" + model_type +
                                   "' is not supported; supported: " + SupportedHfModelTypes());
  }
  json j;
  const bool classifier = args.num_classes > 0;
  j["architectures"] = {classifier && !type->classification.empty() ? type->classification : type->causal_lm};
  j["model_type"] = model_type;
  j["vocab_size"] = args.vocab_size;
  j["hidden_size"] = args.embed_dim;
  j["intermediate_size"] = args.intermediate_dim;
  j["num_hidden_layers"] = args.num_layers;
  j["num_attention_heads"] = args.num_heads;
  j["num_key_value_heads"] = args.num_kv_heads;
  j["head_dim"] = args.resolved_head_dim();
  j["max_position_embeddings"] = args.max_seq_len;
  j["rope_theta"] = args.rope_base;
  j["rms_norm_eps"] = args.norm_eps;
  j["tie_word_embeddings"] = args.tie_word_embeddings;
  j["torch_dtype"] = dtype;
  j["pad_token_id"] = nullptr;  // Phi3Config's default (32000) would not fit a smaller vocabulary
  const char* act = args.mlp_activation == MlpActivation::kSilu       ? "silu"
                    : args.mlp_activation == MlpActivation::kGeluTanh ? "gelu_pytorch_tanh"
                                                                      : "gelu";
  j["hidden_act"] = act;
  if (type->writes_hidden_activation) j["hidden_activation"] = act;
  if (classifier) {
    j["num_labels"] = args.num_classes;
    json labels = json::object();
    for (int64_t i = 0; i < args.num_classes; ++i) labels[std::to_string(i)] = "LABEL_" + std::to_string(i);
    j["id2label"] = labels;
  }
  if (args.rope_scaling) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", args.rope_scaling->factor},
                         {"low_freq_factor", args.rope_scaling->low_freq_factor},
                         {"high_freq_factor", args.rope_scaling->high_freq_factor},
                         {"original_max_position_embeddings", args.rope_scaling->old_context_len}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["sliding_window"] = args.sliding_window > 0 ? json(args.sliding_window) : json(nullptr);
  if (type->llama4_options) WriteLlama4Options(args, &j);
  if (type->reads_softcaps) {
    j["attn_logit_softcapping"] = args.attn_softcap > 0 ? json(args.attn_softcap) : json(nullptr);
    j["final_logit_softcapping"] = args.final_softcap > 0 ? json(args.final_softcap) : json(nullptr);
    j["query_pre_attn_scalar"] =
        args.query_pre_attn_scalar > 0 ? args.query_pre_attn_scalar : static_cast<double>(args.resolved_head_dim());
    json layers = json::array();
    for (int64_t i = 0; i < args.num_layers; ++i) layers.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    j["layer_types"] = layers;
  }
  const std::string text = DumpJson(j, 2) + "\n";

  // What this model_type cannot express shows up as a difference after reading the text back.
  StatusOr<HfModelConfig> back = ParseHfConfig(text, "config.json for " + model_type);
  if (!back.ok()) return back.status();
  const std::vector<std::string> lost = models::DecoderArgsDifferences(args, back->args);
  if (!lost.empty()) {
    return Status::InvalidArgument("model_type " + model_type + " cannot express this model's " + lost.front() +
                                   " (this model vs what config.json would say); fix: save with the model_type of the "
                                   "model's family (see ModelPreset::hf_model_type)");
  }
  return text;
}

}  // namespace tmx::checkpoint
