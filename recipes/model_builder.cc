#include "recipes/model_builder.h"

namespace tmx::recipes {

StatusOr<ModelChoice> ModelFromConfig(const Config& config, const Registry& registry) {
  YAML::Node node = config.Find("model._component_");
  const ComponentSpec* spec = registry.FindComponent(node.IsScalar() ? node.Scalar() : "");
  if (spec == nullptr) return Status::InvalidArgument("model._component_ does not name a known model");
  const std::string& n = spec->name;
  ModelChoice choice;
  choice.component = n;
  if (n.find("llama3_2_1b") != std::string::npos) {
    choice.args = models::Llama3_2_1BArgs();
  } else if (n.find("llama3_2_3b") != std::string::npos) {
    choice.args = models::Llama3_2_3BArgs();
  } else if (n.find("llama3_1_8b") != std::string::npos) {
    choice.args = models::Llama3_1_8BArgs();
  } else if (n.find("llama_tiny") != std::string::npos) {
    choice.args = models::LlamaTinyArgs();
  } else {
    return Status::InvalidArgument(config.OriginOf("model._component_").ToString() + ": model '" + n +
                                   "' is not a Llama 3.x builder this project can build");
  }
  bool is_lora = n.rfind("lora_") != std::string::npos;
  if (is_lora) {
    models::LoraArgs lora;
    YAML::Node modules = config.Find("model.lora_attn_modules");
    for (const auto& m : modules) lora.attn_modules.push_back(m.as<std::string>());
    StatusOr<bool> mlp = config.GetBool("model.apply_lora_to_mlp", false);
    StatusOr<bool> out = config.GetBool("model.apply_lora_to_output", false);
    StatusOr<int64_t> rank = config.GetInt("model.lora_rank", 8);
    StatusOr<double> alpha = config.GetDouble("model.lora_alpha", 16);
    StatusOr<double> dropout = config.GetDouble("model.lora_dropout", 0.0);
    for (const Status& s : {mlp.status(), out.status(), rank.status(), alpha.status(), dropout.status()}) {
      TM_RETURN_IF_ERROR(s);
    }
    lora.apply_to_mlp = *mlp;
    lora.apply_to_output = *out;
    lora.rank = *rank;
    lora.alpha = *alpha;
    lora.dropout = *dropout;
    Status valid = models::ValidateLoraArgs(lora, choice.args);
    if (!valid.ok()) return valid.WithContext(config.OriginOf("model").ToString() + ": model");
    choice.lora = lora;
  }
  return choice;
}

}  // namespace tmx::recipes
