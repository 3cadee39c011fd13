#include "recipes/model_components.h"

#include <c10/core/TensorOptions.h>

#include <cctype>
#include <optional>

#include "recipes/models/lora.h"

namespace tmx::recipes {
namespace {

// The layers a proxy cuts together: a mixture of experts every n-th layer makes blocks of n; else 1.
int64_t LayerPeriod(const models::DecoderArgs& args) {
  const bool whole = args.num_experts > 0 && args.moe_every_n_layers > 1 && args.num_layers % args.moe_every_n_layers == 0;
  return whole ? args.moe_every_n_layers : 1;
}

// The lower-case text of a YAML scalar ("" for anything else).
std::string LowerScalar(const YAML::Node& v) {
  std::string text = v.IsScalar() ? v.Scalar() : "";
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Llama 4's early-fusion switches (torchtune's EarlyFusionModel). Only the text decoder is built here: the
// vision encoder and its projection (the fusion parameters) are not, and on text data torchtune's never receive
// a gradient either, so encoder_trainable and fusion_trainable change nothing and any value torchtune takes is
// accepted. decoder_trainable must train the decoder: False (full builders) or "frozen" (LoRA builders) would
// train nothing, and torchtune's LoRA builders refuse "full".
std::optional<FieldSpec> TrainableField(const models::BuilderParam& p) {
  const std::string& d = p.default_value;
  const bool lora = d == "lora" || d == "frozen";  // the LoRA builders take strings, the full ones booleans
  if (p.name != "decoder_trainable" && p.name != "encoder_trainable" && p.name != "fusion_trainable") {
    return std::nullopt;
  }
  if (!lora) {
    FieldSpec f = Field(p.name, FieldType::kBool, d,
                        p.name == "decoder_trainable" ? "train the text decoder (only True: it is all that is built)"
                                                      : "train the vision " + std::string(p.name == "encoder_trainable"
                                                                                              ? "encoder"
                                                                                              : "projection") +
                                                            " (not built here: no effect)");
    if (p.name != "decoder_trainable") return f;
    return WithValueCheck(f, [](const YAML::Node& v) -> std::string {
      return LowerScalar(v) == "false" ? "False would train nothing: only Llama 4's text decoder is built here (the "
                                         "vision encoder is not); set it to True"
                                       : "";
    });
  }
  FieldSpec f = Field(p.name, FieldType::kString, d,
                      p.name == "decoder_trainable" ? "how the text decoder trains: lora (only lora here)"
                                                    : "how the vision " +
                                                          std::string(p.name == "encoder_trainable" ? "encoder"
                                                                                                    : "projection") +
                                                          " trains: lora or frozen (not built here: no effect)");
  const bool decoder = p.name == "decoder_trainable";
  return WithValueCheck(f, [decoder](const YAML::Node& v) -> std::string {
    const std::string value = LowerScalar(v);
    if (value == "full") {
      return "'full' is refused by torchtune's LoRA builders (no mixed LoRA and full fine-tuning); use the full "
             "builder (llama4_..._17b_...) to train everything, or 'lora'";
    }
    if (value != "lora" && value != "frozen") return "'" + value + "' is not one of lora, frozen";
    if (decoder && value == "frozen") {
      return "'frozen' would train nothing: only Llama 4's text decoder is built here; set it to lora";
    }
    return "";
  });
}

// A builder argument as a schema field: the type, default and constraints its name means in torchtune.
FieldSpec ParamField(const models::BuilderParam& p) {
  const std::string& d = p.default_value;
  if (p.name == "lora_attn_modules") {
    return Required(ElementsFrom(Field(p.name, FieldType::kStringList, "",
                                       "attention projections that get LoRA adapters: any of q_proj, k_proj, "
                                       "v_proj, output_proj"),
                                 models::LoraAttnModuleNames()));
  }
  if (p.name == "lora_rank") return AtLeast(Field(p.name, FieldType::kInt, d, "rank of the low-rank update"), 1);
  if (p.name == "vocab_size") {
    return AtLeast(Field(p.name, FieldType::kInt, d,
                         "ids of the embedding and output (tiny models only: sized to match a tokenizer)"),
                   1);
  }
  if (p.name == "lora_alpha") {
    return Above(Field(p.name, FieldType::kFloat, d, "scale of the update is lora_alpha / lora_rank"), 0);
  }
  if (p.name == "lora_dropout") {
    return Below(AtLeast(Field(p.name, FieldType::kFloat, d, "dropout on the adapter input"), 0), 1);
  }
  // The sizes of a builder that takes them (torchtune's llama2).
  struct Size {
    const char* name;
    const char* doc;
  } sizes[] = {{"num_layers", "transformer layers"},
               {"num_heads", "query heads"},
               {"num_kv_heads", "key/value heads; divides num_heads"},
               {"embed_dim", "model width"},
               {"max_seq_len", "longest sequence the model accepts"}};
  for (const Size& size : sizes) {
    if (p.name == size.name) return Required(AtLeast(Field(p.name, FieldType::kInt, d, size.doc), 1));
  }
  if (p.name == "intermediate_dim") {
    return Nullable(AtLeast(Field(p.name, FieldType::kInt, "null",
                                  "MLP width; null: torchtune's scale_hidden_dim_for_mlp(embed_dim)"),
                            1));
  }
  if (p.name == "attn_dropout") {
    return AtMost(AtLeast(Field(p.name, FieldType::kFloat, d, "attention dropout; only 0.0 (torchtune's default)"), 0),
                  0);
  }
  if (p.name == "norm_eps") return Above(Field(p.name, FieldType::kFloat, d, "RMSNorm epsilon"), 0);
  if (p.name == "rope_base") return Above(Field(p.name, FieldType::kFloat, d, "RoPE theta"), 0);
  if (const std::optional<FieldSpec> trainable = TrainableField(p)) return *trainable;
  if (p.name == "image_size") {
    return AtLeast(Field(p.name, FieldType::kInt, d, "Llama 4's image tile size; no effect here (text only)"), 1);
  }
  struct Flag {
    const char* name;
    const char* doc;
  } flags[] = {
      {"apply_lora_to_mlp", "also adapt the MLP projections"},
      {"apply_lora_to_output", "also adapt the final output projection"},
      {"use_dora", "DoRA (weight-decomposed LoRA): a trained magnitude per output row of every adapted layer"},
      {"quantize_base", "QLoRA: hold the frozen base of every attention and MLP projection as NF4 (torchao's "
                        "NF4Tensor), dequantised in forward"},
      {"tie_word_embeddings", "the output projection shares the token embedding"},
  };
  for (const Flag& f : flags) {
    if (p.name == f.name) return Field(p.name, FieldType::kBool, d, f.doc);
  }
  return Field(p.name, FieldType::kAny, d, "torchtune builder argument");
}

std::vector<FieldSpec> ParamFields(const std::vector<models::BuilderParam>& params) {
  std::vector<FieldSpec> fields;
  for (const models::BuilderParam& p : params) fields.push_back(ParamField(p));
  return fields;
}

// The full builder, its lora_ twin, or (quantized) torchtune's qlora_ builder: the lora_ builder with
// quantize_base defaulting to True (torchtune's partial(lora_..., quantize_base=True)).
ComponentSpec ModelSpec(const models::ModelPreset& p, bool lora, bool quantized = false) {
  const std::string builder = (quantized ? "q" : "") + (lora ? p.lora_builder : p.builder);
  ComponentSpec c;
  if (p.tiny) {
    c.name = "tune_matrix.models." + builder;
  } else {
    c.name = "tune_matrix.models." + p.family + "." + builder;
    c.aliases = {"torchtune.models." + p.family + "." + builder};
  }
  // The Llama tiny preset keeps the names the first tiny configs used.
  if (p.tiny && p.family == "llama3_2" && !quantized) {
    c.aliases = {lora ? "tune_matrix.models.lora_llama_tiny" : "tune_matrix.models.llama_tiny"};
  }
  c.kind = "model";
  c.doc = p.description + (quantized ? ", with LoRA adapters over an NF4 base (QLoRA)"
                                     : lora ? ", with LoRA adapters" : "");
  std::vector<models::BuilderParam> params = lora ? p.lora_params : p.builder_params;
  for (models::BuilderParam& param : params) {
    if (quantized && param.name == "quantize_base") param.default_value = "True";
  }
  c.params = ParamFields(params);
  if (!p.sized_by_config) {
    // Not torchtune's: how a matrix proxy (harness/proxy.h) builds the first layers of a preset. A model whose
    // mixture-of-experts layers come every n-th layer (Llama 4 Maverick: dense, MoE, dense, ...) is cut in blocks
    // of n layers, so every proxy keeps its experts and routing and its cost stays linear in the blocks.
    const int64_t period = LayerPeriod(p.args);
    const std::string unit = period > 1 ? " blocks of " + std::to_string(period) + " layers (" +
                                              std::to_string(period - 1) + " dense, then a mixture of experts)"
                                        : " layers";
    c.params.push_back(AtMost(Nullable(AtLeast(Field("num_layers", FieldType::kInt, "null",
                                                     "tune-matrix: build only the first N of the " +
                                                         std::to_string(p.args.num_layers / period) + unit +
                                                         " (a matrix proxy); null: all"),
                                               1)),
                              static_cast<double>(p.args.num_layers / period)));
    c.layers = p.args.num_layers / period;
    if (!p.tiny) {
      c.params.push_back(AtMost(Nullable(AtLeast(Field("vocab_size", FieldType::kInt, "null",
                                                       "tune-matrix: keep only the first N of the " +
                                                           std::to_string(p.args.vocab_size) +
                                                           " ids of the embedding and output, the data's ids "
                                                           "folded into them (a matrix proxy); null: all"),
                                                 1)),
                                static_cast<double>(p.args.vocab_size)));
    }
    c.vocab_size = p.args.vocab_size;
  }
  c.impl = std::make_shared<ModelComponent>(&p, lora, quantized);
  c.parameter_count = p.tiny ? 0 : p.published_params;
  if (quantized && p.tiny) c.doc += " at widths NF4 holds (embed_dim 256, intermediate_dim 512)";
  return c;
}

}  // namespace

models::DecoderArgs TinyNf4Widths(models::DecoderArgs args) {
  args.embed_dim = 256;
  args.intermediate_dim = 512;
  // A head_dim set apart from the width (Gemma's 16, Qwen3's 32) doubles until the k/v projections, the
  // narrowest, hold whole blocks of NF4 scales: kv_heads x head_dim x 256 a multiple of 64 x 256.
  while (args.head_dim > 0 && args.num_kv_heads * args.head_dim % 64 != 0) args.head_dim *= 2;
  return args;
}

void AddModelComponents(std::vector<ComponentSpec>* out) {
  for (const models::ModelPreset& p : models::ModelPresets()) {
    out->push_back(ModelSpec(p, /*lora=*/false));
    if (p.lora_builder.empty()) continue;
    out->push_back(ModelSpec(p, /*lora=*/true));
    // torchtune has no qlora_ builder for a mixture of experts (its grouped experts hold no NF4 base).
    if (p.args.num_experts == 0) out->push_back(ModelSpec(p, /*lora=*/true, /*quantized=*/true));
  }
  out->push_back(ModelSpec(models::SizedLlama2Preset(), /*lora=*/false));
  for (const models::ModelPreset& p : models::SizedClassifierPresets()) out->push_back(ModelSpec(p, /*lora=*/false));
}

namespace {

// A proxy's cut of a preset's size (harness/proxy.h): the config's `dotted` (null: none) between 1 and the
// preset's `*size` (`unit`: "layers") becomes `*size`, the preset's kept in `*cut_from` when smaller.
Status CutForProxy(const Config& config, const std::string& dotted, const std::string& unit, const std::string& name,
                   int64_t* size, int64_t* cut_from) {
  if (config.IsNull(dotted)) return Status::OK();
  StatusOr<int64_t> kept = config.GetInt(dotted);
  TM_RETURN_IF_ERROR(kept.status());
  if (*kept < 1 || *kept > *size) {
    return Status::InvalidArgument(config.OriginOf(dotted).ToString() + ": " + dotted + ": " + std::to_string(*kept) +
                                   " is not 1 to the " + std::to_string(*size) + " " + unit + " of '" + name + "'");
  }
  if (*kept < *size) {
    *cut_from = *size;
    *size = *kept;
  }
  return Status::OK();
}

// CutForProxy of `key`.num_layers, in blocks of LayerPeriod layers (ModelSpec says why).
Status CutLayersForProxy(const Config& config, const std::string& key, const std::string& name,
                         models::DecoderArgs* args) {
  const int64_t period = LayerPeriod(*args);
  int64_t blocks = args->num_layers / period, blocks_from = 0;
  TM_RETURN_IF_ERROR(
      CutForProxy(config, key + ".num_layers", period > 1 ? "blocks of layers" : "layers", name, &blocks, &blocks_from));
  args->num_layers = blocks * period;
  if (blocks_from > 0) args->layers_cut_from = blocks_from * period;
  return Status::OK();
}

// The model the config names with its builder arguments and LoRA settings as written, not yet checked
// against each other.
StatusOr<ModelChoice> ModelAsWritten(const Config& config, const Registry& registry, const std::string& key = "model") {
  YAML::Node node = config.Find(key + "._component_");
  std::string name = node.IsScalar() ? node.Scalar() : "";
  const ComponentSpec* spec = registry.FindComponent(name);
  const auto* model = spec == nullptr ? nullptr : dynamic_cast<const ModelComponent*>(spec->impl.get());
  if (model == nullptr) {
    return Status::InvalidArgument(config.OriginOf(key + "._component_").ToString() + ": " + key + " '" + name +
                                   "' cannot be built here (see `tune validate` for the models that can)");
  }
  ModelChoice choice;
  choice.component = spec->name;
  choice.preset = &model->preset();
  choice.args = model->qlora() && model->preset().tiny ? TinyNf4Widths(model->preset().args) : model->preset().args;
  if (model->preset().sized_by_config) {
    models::DecoderArgs& a = choice.args;
    for (auto [name, field] : {std::pair<const char*, int64_t*>{"vocab_size", &a.vocab_size},
                               {"num_layers", &a.num_layers},
                               {"num_heads", &a.num_heads},
                               {"num_kv_heads", &a.num_kv_heads},
                               {"embed_dim", &a.embed_dim},
                               {"max_seq_len", &a.max_seq_len},
                               {"num_classes", a.num_classes > 0 ? &a.num_classes : nullptr}}) {
      if (field == nullptr) continue;  // a language model's head: no num_classes
      if (config.IsNull(key + "." + name)) {
        return Status::InvalidArgument(config.OriginOf(key).ToString() + ": " + key + "." + name + ": '" + spec->name +
                                       "' takes the model's sizes from the config; set " + key + "." + name);
      }
      StatusOr<int64_t> v = config.GetInt(key + "." + name);
      TM_RETURN_IF_ERROR(v.status());
      *field = *v;
    }
    StatusOr<double> eps = config.GetDouble(key + ".norm_eps", a.norm_eps);
    StatusOr<double> base = config.GetDouble(key + ".rope_base", a.rope_base);
    TM_RETURN_IF_ERROR(eps.status());
    TM_RETURN_IF_ERROR(base.status());
    a.norm_eps = *eps;
    a.rope_base = *base;
    a.intermediate_dim = models::ScaleHiddenDimForMlp(a.embed_dim);
    if (!config.IsNull(key + ".intermediate_dim")) {
      StatusOr<int64_t> hidden = config.GetInt(key + ".intermediate_dim");
      TM_RETURN_IF_ERROR(hidden.status());
      a.intermediate_dim = *hidden;
    }
    Status valid = models::ValidateDecoderArgs(a);
    if (!valid.ok()) return valid.WithContext(config.OriginOf(key).ToString() + ": " + key);
  }
  if (!model->preset().sized_by_config) TM_RETURN_IF_ERROR(CutLayersForProxy(config, key, spec->name, &choice.args));
  if (!config.IsNull(key + ".tie_word_embeddings")) {
    StatusOr<bool> tied = config.GetBool(key + ".tie_word_embeddings");
    TM_RETURN_IF_ERROR(tied.status());
    choice.args.tie_word_embeddings = *tied;
  }
  if (model->preset().tiny && !config.IsNull(key + ".vocab_size")) {
    StatusOr<int64_t> vocab = config.GetInt(key + ".vocab_size");
    TM_RETURN_IF_ERROR(vocab.status());
    choice.args.vocab_size = *vocab;
  } else if (!model->preset().sized_by_config) {
    TM_RETURN_IF_ERROR(CutForProxy(config, key + ".vocab_size", "ids", spec->name, &choice.args.vocab_size,
                                   &choice.args.vocab_cut_from));
  }
  if (!model->lora()) return choice;
  StatusOr<models::LoraArgs> lora = LoraFromConfig(config, key);
  TM_RETURN_IF_ERROR(lora.status());
  choice.lora = *lora;
  return choice;
}

}  // namespace

StatusOr<models::LoraArgs> LoraFromConfig(const Config& config, const std::string& key) {
  models::LoraArgs lora;
  StatusOr<std::vector<std::string>> modules = config.GetStringList(key + ".lora_attn_modules");
  StatusOr<bool> mlp = config.GetBool(key + ".apply_lora_to_mlp");
  // Builders without apply_lora_to_output (tied embeddings) never adapt the output.
  StatusOr<bool> out = config.GetBool(key + ".apply_lora_to_output", false);
  StatusOr<int64_t> rank = config.GetInt(key + ".lora_rank");
  StatusOr<double> alpha = config.GetDouble(key + ".lora_alpha");
  StatusOr<double> dropout = config.GetDouble(key + ".lora_dropout");
  // Builders without use_dora (lora_llama3_1_405b) are LoRA.
  StatusOr<bool> dora = config.GetBool(key + ".use_dora", false);
  StatusOr<bool> quantize = config.GetBool(key + ".quantize_base", false);
  for (const Status& s : {modules.status(), mlp.status(), out.status(), rank.status(), alpha.status(),
                          dropout.status(), dora.status(), quantize.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  lora.attn_modules = *modules;
  lora.apply_to_mlp = *mlp;
  lora.apply_to_output = *out;
  lora.rank = *rank;
  lora.alpha = *alpha;
  lora.dropout = *dropout;
  lora.use_dora = *dora;
  lora.quantize_base = *quantize;
  return lora;
}

StatusOr<ModelChoice> ModelFromConfig(const Config& config, const Registry& registry, const std::string& key) {
  StatusOr<ModelChoice> choice = ModelAsWritten(config, registry, key);
  if (!choice.ok() || !choice->lora) return choice;
  Status valid = models::ValidateLoraArgs(*choice->lora, choice->args);
  if (!valid.ok()) return valid.WithContext(config.OriginOf(key).ToString() + ": " + key);
  return choice;
}

std::vector<Problem> ModelSizeChecks(const Config& config, const Registry& registry, const DeviceInfo*) {
  const ComponentSpec* spec = registry.FindComponent(config.Find("model._component_").IsScalar()
                                                         ? config.Find("model._component_").Scalar()
                                                         : std::string());
  const auto* model = spec == nullptr ? nullptr : dynamic_cast<const ModelComponent*>(spec->impl.get());
  if (model == nullptr || !model->preset().sized_by_config) return {};
  StatusOr<ModelChoice> choice = ModelAsWritten(config, registry);
  if (choice.ok()) return {};
  // The message starts with the position of `model`; the problem carries it apart.
  const std::string origin = config.OriginOf("model").ToString() + ": model: ";
  std::string message = choice.status().message();
  if (message.rfind(origin, 0) == 0) message = message.substr(origin.size());
  return {{config.OriginOf("model").ToString(), "model", message}};
}

std::vector<Problem> LoraChecks(const Config& config, const Registry& registry, const DeviceInfo*) {
  StatusOr<ModelChoice> choice = ModelAsWritten(config, registry);
  if (!choice.ok() || !choice->lora) return {};  // the schema names an unknown model or a mistyped field
  // Names and ranges of the settings alone are the schema's problems; here only what the shapes add.
  if (!models::ValidateLoraArgs(*choice->lora).ok()) return {};
  Status valid = models::ValidateLoraArgs(*choice->lora, choice->args);
  if (valid.ok()) return {};
  return {{config.OriginOf("model").ToString(), "model", valid.message()}};
}

std::vector<Problem> FakeQuantizationProblems(const Config& config, const Registry& registry, bool lora) {
  StatusOr<ModelChoice> choice = ModelAsWritten(config, registry);
  StatusOr<int64_t> group = config.GetInt("quantizer.groupsize");
  if (!choice.ok() || !group.ok() || *group < 2) return {};  // the schema's problems
  if (lora != choice->lora.has_value()) return {};  // the recipe's model check names it
  if (choice->lora && !models::ValidateLoraArgs(*choice->lora, choice->args).ok()) return {};  // LoraChecks
  models::Decoder model(choice->args, choice->lora, c10::TensorOptions().device(c10::kMeta));
  StatusOr<int64_t> attached = models::AttachFakeQuantization(
      *model, *group,
      lora ? models::FakeQuantScope::kAdaptedLinears : models::FakeQuantScope::kEveryLinear);
  const std::string key = "quantizer.groupsize";
  if (!attached.ok()) {
    const std::string& message = attached.status().message();
    const std::string prefix = key + ": ";
    if (message.rfind(prefix, 0) != 0) return {{config.OriginOf("model").ToString(), "model", message}};
    return {{config.OriginOf(key).ToString(), key, message.substr(prefix.size())}};
  }
  if (*attached > 0) return {};
  return {{config.OriginOf(key).ToString(), key,
           std::to_string(*group) + " divides the inputs of no linear of '" + choice->component + "' (width " +
               std::to_string(choice->args.embed_dim) + ", hidden " + std::to_string(choice->args.intermediate_dim) +
               "), so nothing would be fake-quantised; use a power of two that divides them (torchtune uses 256)"}};
}

ParameterCounts CountModelParameters(const ModelChoice& choice) {
  models::Decoder model(choice.args, choice.lora, c10::TensorOptions().device(c10::kMeta));
  if (choice.lora) models::FreezeBaseParameters(*model);
  ParameterCounts c;
  c.total = models::CountParameters(*model);
  c.trainable = models::CountParameters(*model, /*trainable_only=*/true);
  c.quantized = models::CountQuantizedParameters(*model);
  c.outside_layers = c.total;
  c.trainable_outside_layers = c.trainable;
  for (const models::TransformerLayer& layer : model->layers()) {
    c.outside_layers -= models::CountParameters(*layer);
    c.trainable_outside_layers -= models::CountParameters(*layer, /*trainable_only=*/true);
  }
  return c;
}

}  // namespace tmx::recipes
