#include "recipes/vision_components.h"

#include <memory>

#include "recipes/model_components.h"

namespace tmx::recipes {
namespace {

FieldSpec TrainableField(const char* name, bool lora, const char* full_default, const char* lora_default,
                         const char* part) {
  const std::string doc = std::string("what trains of the ") + part;
  if (!lora) return Field(name, FieldType::kBool, full_default, doc + ": True every weight, False none");
  // torchtune's lora_ builders accept "full" and then assert it away ("mixed LoRA + Full Finetuning").
  return Choices(Field(name, FieldType::kString, std::string("\"") + lora_default + "\"",
                       doc + ": lora (its adapters) or frozen; full is torchtune's llama3_2_vision_* builder"),
                 {"lora", "frozen"});
}

std::vector<FieldSpec> VisionParams(const models::VisionPreset& p, bool lora, bool qlora) {
  std::vector<FieldSpec> f = {
      TrainableField("decoder_trainable", lora, "False", "frozen", "text decoder"),
      TrainableField("encoder_trainable", lora, "True", "lora", "image encoder (CLIP layers and embeddings)"),
      TrainableField("fusion_trainable", lora, "True", "lora",
                     "fusion weights (projection head, cross-attention layers, fusion embedding)"),
      AtLeast(Field("image_size", FieldType::kInt, std::to_string(p.args.encoder.tile_size),
                    "pixels on a side of one tile (560 Instruct, 448 base); a multiple of the patch size " +
                        std::to_string(p.args.encoder.patch_size)),
              static_cast<double>(p.args.encoder.patch_size)),
  };
  if (!lora) return f;
  f.insert(f.begin(), Required(ElementsFrom(Field("lora_attn_modules", FieldType::kStringList, "",
                                                  "attention projections that get LoRA adapters: any of q_proj, "
                                                  "k_proj, v_proj, output_proj"),
                                            models::LoraAttnModuleNames())));
  f.push_back(Field("apply_lora_to_mlp", FieldType::kBool, "False", "also adapt the MLP projections"));
  f.push_back(Field("apply_lora_to_output", FieldType::kBool, "False",
                    "also adapt the decoder's output projection (with a LoRA decoder) and the projection head's "
                    "output (with LoRA fusion)"));
  f.push_back(AtLeast(Field("lora_rank", FieldType::kInt, "8", "rank of the low-rank update"), 1));
  f.push_back(Above(Field("lora_alpha", FieldType::kFloat, "16", "scale of the update is lora_alpha / lora_rank"), 0));
  f.push_back(Below(AtLeast(Field("lora_dropout", FieldType::kFloat, "0.0", "dropout on the adapter input"), 0), 1));
  f.push_back(Field("use_dora", FieldType::kBool, "False", "DoRA: a trained magnitude per output row"));
  f.push_back(Field("quantize_base", FieldType::kBool, qlora ? "True" : "False",
                    "QLoRA: the frozen bases of the adapted parts' projections as NF4"));
  return f;
}

ComponentSpec VisionSpec(const models::VisionPreset& p, bool lora, bool qlora) {
  const std::string builder = qlora ? p.qlora_builder : lora ? p.lora_builder : p.builder;
  ComponentSpec c;
  if (p.tiny) {
    c.name = "tune_matrix.models." + builder;
  } else {
    c.name = "tune_matrix.models.llama3_2_vision." + builder;
    c.aliases = {"torchtune.models.llama3_2_vision." + builder};
  }
  c.kind = "model";
  c.doc = p.description + (qlora ? ", with LoRA adapters over an NF4 base (QLoRA)" : lora ? ", with LoRA adapters" : "");
  c.params = VisionParams(p, lora, qlora);
  c.impl = std::make_shared<VisionModelComponent>(&p, lora, qlora);
  c.parameter_count = p.published_params;
  return c;
}

StatusOr<models::Trainable> TrainableOf(const Config& config, const std::string& key, bool lora) {
  if (!lora) {
    StatusOr<bool> on = config.GetBool(key);
    TM_RETURN_IF_ERROR(on.status());
    return *on ? models::Trainable::kFull : models::Trainable::kFrozen;
  }
  StatusOr<std::string> how = config.GetString(key);
  TM_RETURN_IF_ERROR(how.status());
  if (*how == "lora") return models::Trainable::kLora;
  if (*how == "frozen") return models::Trainable::kFrozen;
  return Status::InvalidArgument(config.OriginOf(key).ToString() + ": " + key + ": '" + *how +
                                 "' is not lora or frozen; fix: use the full builder for full fine-tuning");
}

StatusOr<models::LoraArgs> LoraOf(const Config& config, const std::string& key) {
  StatusOr<models::LoraArgs> lora = LoraFromConfig(config, key);
  TM_RETURN_IF_ERROR(lora.status());
  Status valid = models::ValidateLoraArgs(*lora);
  if (!valid.ok()) return valid.WithContext(config.OriginOf(key).ToString() + ": " + key);
  return lora;
}

}  // namespace

void AddVisionModelComponents(std::vector<ComponentSpec>* out) {
  for (const models::VisionPreset& p : models::VisionPresets()) {
    out->push_back(VisionSpec(p, false, false));
    out->push_back(VisionSpec(p, true, false));
    out->push_back(VisionSpec(p, true, true));
  }
}

const VisionModelComponent* VisionComponentOf(const Config& config, const Registry& registry,
                                              const std::string& key) {
  YAML::Node node = config.Find(key + "._component_");
  const ComponentSpec* spec = registry.FindComponent(node.IsScalar() ? node.Scalar() : "");
  return spec == nullptr ? nullptr : dynamic_cast<const VisionModelComponent*>(spec->impl.get());
}

StatusOr<VisionModelChoice> VisionModelFromConfig(const Config& config, const Registry& registry,
                                                  const std::string& key) {
  const VisionModelComponent* model = VisionComponentOf(config, registry, key);
  if (model == nullptr) {
    return Status::FailedPrecondition(config.OriginOf(key + "._component_").ToString() + ": " + key +
                                      " is not a Llama 3.2 Vision model");
  }
  VisionModelChoice choice;
  choice.component = registry.FindComponent(config.Find(key + "._component_").Scalar())->name;
  choice.preset = &model->preset();
  choice.args = model->preset().args;
  StatusOr<int64_t> image_size = config.GetInt(key + ".image_size");
  TM_RETURN_IF_ERROR(image_size.status());
  choice.args.encoder.tile_size = *image_size;
  Status valid = models::ValidateVisionModelArgs(choice.args);
  if (!valid.ok()) return valid.WithContext(config.OriginOf(key + ".image_size").ToString() + ": " + key);
  const bool lora = model->lora();
  StatusOr<models::Trainable> decoder = TrainableOf(config, key + ".decoder_trainable", lora);
  StatusOr<models::Trainable> encoder = TrainableOf(config, key + ".encoder_trainable", lora);
  StatusOr<models::Trainable> fusion = TrainableOf(config, key + ".fusion_trainable", lora);
  for (const Status& s : {decoder.status(), encoder.status(), fusion.status()}) TM_RETURN_IF_ERROR(s);
  choice.trainable = {*decoder, *encoder, *fusion};
  if (lora) {
    StatusOr<models::LoraArgs> args = LoraOf(config, key);
    TM_RETURN_IF_ERROR(args.status());
    choice.lora = *args;
  }
  return choice;
}

VisionParameterCounts CountVisionParameters(const VisionModelChoice& choice) {
  models::VisionModel model(choice.args, choice.lora, choice.trainable, c10::TensorOptions().device(c10::kMeta));
  VisionParameterCounts c;
  c.total = models::CountParameters(*model);
  c.trainable = models::CountParameters(*model, /*trainable_only=*/true);
  c.quantized = models::CountQuantizedParameters(*model);
  c.encoder = models::CountParameters(model->encoder());
  return c;
}

}  // namespace tmx::recipes
