#include "recipes/model_components.h"

#include <c10/core/TensorOptions.h>

#include "recipes/models/lora.h"

namespace tmx::recipes {
namespace {

struct Preset {
  const char* family;   // torchtune's module: torchtune.models.<family>
  const char* builder;  // torchtune's builder name; the LoRA builder is lora_<builder>
  models::LlamaArgs (*args)();
  int64_t parameters;   // published parameter count (checked against a meta build in the tests)
  const char* doc;
};

// The presets. tiny has no torchtune counterpart (family "" keeps its historical names).
const Preset kPresets[] = {
    {"llama3_2", "llama3_2_1b", models::Llama3_2_1BArgs, 1235814400, "Llama 3.2 1B (tied embeddings)"},
    {"llama3_2", "llama3_2_3b", models::Llama3_2_3BArgs, 3212749824, "Llama 3.2 3B (tied embeddings)"},
    {"llama3_1", "llama3_1_8b", models::Llama3_1_8BArgs, 8030261248, "Llama 3.1 8B"},
    {"", "llama_tiny", models::LlamaTinyArgs, 155968,
     "a Llama 3.2-shaped model with 2 layers and dim 64, for tests and quick runs"},
};

std::vector<FieldSpec> LoraParams() {
  return {
      Required(ElementsFrom(Field("lora_attn_modules", FieldType::kStringList, "",
                                  "attention projections that get LoRA adapters: any of q_proj, k_proj, v_proj, "
                                  "output_proj"),
                            models::LoraAttnModuleNames())),
      Field("apply_lora_to_mlp", FieldType::kBool, "False", "also adapt the MLP projections w1, w2, w3"),
      Field("apply_lora_to_output", FieldType::kBool, "False", "also adapt the final output projection"),
      AtLeast(Field("lora_rank", FieldType::kInt, "8", "rank of the low-rank update"), 1),
      Above(Field("lora_alpha", FieldType::kFloat, "16", "scale of the update is lora_alpha / lora_rank"), 0),
      Below(AtLeast(Field("lora_dropout", FieldType::kFloat, "0.0", "dropout on the adapter input"), 0), 1),
      Field("use_dora", FieldType::kBool, "False", "DoRA (weight-decomposed LoRA); only False is implemented"),
      Field("quantize_base", FieldType::kBool, "False", "QLoRA base quantisation; only False is implemented"),
  };
}

ComponentSpec ModelSpec(const Preset& p, bool lora) {
  std::string builder = std::string(lora ? "lora_" : "") + p.builder;
  std::string module = *p.family ? std::string(p.family) + "." : "";
  ComponentSpec c;
  c.name = "tune_matrix.models." + module + builder;
  if (*p.family) c.aliases = {"torchtune.models." + module + builder};
  c.kind = "model";
  c.doc = std::string(p.doc) + (lora ? ", with LoRA adapters" : "");
  if (lora) c.params = LoraParams();
  c.impl = std::make_shared<ModelComponent>(p.family, p.args(), lora);
  c.parameter_count = p.parameters;
  return c;
}

}  // namespace

void AddModelComponents(std::vector<ComponentSpec>* out) {
  for (const Preset& p : kPresets) {
    out->push_back(ModelSpec(p, /*lora=*/false));
    out->push_back(ModelSpec(p, /*lora=*/true));
  }
  const std::string other = "only the Llama 3.x architectures are implemented in tune-matrix";
  for (const char* name : {"torchtune.models.qwen2_5.qwen2_5_0_5b", "torchtune.models.mistral.lora_mistral_7b",
                           "torchtune.models.gemma.lora_gemma_2b", "torchtune.models.gemma.gemma_2b",
                           "torchtune.models.mistral.mistral_7b"}) {
    ComponentSpec c;
    c.name = name;
    c.kind = "model";
    c.unsupported_reason = other;
    out->push_back(c);
  }
}

StatusOr<ModelChoice> ModelFromConfig(const Config& config, const Registry& registry) {
  YAML::Node node = config.Find("model._component_");
  std::string name = node.IsScalar() ? node.Scalar() : "";
  const ComponentSpec* spec = registry.FindComponent(name);
  const auto* model = spec == nullptr ? nullptr : dynamic_cast<const ModelComponent*>(spec->impl.get());
  if (model == nullptr) {
    return Status::InvalidArgument(config.OriginOf("model._component_").ToString() + ": model '" + name +
                                   "' cannot be built here (see `tune validate` for the models that can)");
  }
  ModelChoice choice;
  choice.component = spec->name;
  choice.args = model->args();
  if (!model->lora()) return choice;
  models::LoraArgs lora;
  StatusOr<std::vector<std::string>> modules = config.GetStringList("model.lora_attn_modules");
  StatusOr<bool> mlp = config.GetBool("model.apply_lora_to_mlp");
  StatusOr<bool> out = config.GetBool("model.apply_lora_to_output");
  StatusOr<int64_t> rank = config.GetInt("model.lora_rank");
  StatusOr<double> alpha = config.GetDouble("model.lora_alpha");
  StatusOr<double> dropout = config.GetDouble("model.lora_dropout");
  for (const Status& s : {modules.status(), mlp.status(), out.status(), rank.status(), alpha.status(),
                          dropout.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  lora.attn_modules = *modules;
  lora.apply_to_mlp = *mlp;
  lora.apply_to_output = *out;
  lora.rank = *rank;
  lora.alpha = *alpha;
  lora.dropout = *dropout;
  Status valid = models::ValidateLoraArgs(lora, choice.args);
  if (!valid.ok()) return valid.WithContext(config.OriginOf("model").ToString() + ": model");
  choice.lora = lora;
  return choice;
}

void CountModelParameters(const ModelChoice& choice, int64_t* total, int64_t* trainable) {
  models::Llama model(choice.args, choice.lora, c10::TensorOptions().device(c10::kMeta));
  if (choice.lora) models::FreezeBaseParameters(*model);
  *total = models::CountParameters(*model);
  *trainable = models::CountParameters(*model, /*trainable_only=*/true);
}

}  // namespace tmx::recipes
