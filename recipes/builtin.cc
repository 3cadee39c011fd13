#include "recipes/builtin.h"

#include "recipes/checkpointers.h"
#include "recipes/components.h"
#include "recipes/estimate.h"
#include "recipes/finetune.h"
#include "recipes/model_components.h"
#include "recipes/optimizers.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {
namespace {

RecipeSpec FinetuneRecipe(TrainKind kind) {
  RecipeSpec r;
  bool lora = kind == TrainKind::kLora;
  r.name = lora ? "lora_finetune_single_device" : "full_finetune_single_device";
  r.doc = lora ? "LoRA fine-tuning on one device: base weights frozen, low-rank adapters trained"
               : "full fine-tuning of every weight on one device";
  std::string suffix = lora ? "_lora_single_device" : "_full_single_device";
  r.configs = {"llama3_2/1B" + suffix, "llama3_2/3B" + suffix, "llama3_1/8B" + suffix,
               std::string("tiny/") + (lora ? "lora" : "full") + "_single_device"};
  r.fields = TrainingFields(kind);
  r.checks = {TrainingChecks};
  r.run = lora ? RunLoraFinetune : RunFullFinetune;
  r.estimate = [kind](const Config& config, const Registry& registry, const DeviceInfo& device) {
    return EstimateFinetune(config, registry, device, kind);
  };
  // A cell: one epoch of `steps` optimizer steps of one micro-batch each, every step logged, nothing saved.
  r.cell_overrides = [](int steps) -> std::vector<std::string> {
    return {"epochs=1",          "max_steps_per_epoch=" + std::to_string(steps), "gradient_accumulation_steps=1",
            "log_every_n_steps=1", "save_checkpoints=False",                      "resume_from_checkpoint=False"};
  };
  return r;
}

}  // namespace

Status RegisterBuiltins(Registry* registry) {
  std::vector<ComponentSpec> components;
  AddModelComponents(&components);
  AddDataComponents(&components);
  AddOptimizerComponents(&components);
  AddCheckpointerComponents(&components);
  AddTrainingComponents(&components);
  for (ComponentSpec& c : components) TM_RETURN_IF_ERROR(registry->AddComponent(std::move(c)));
  TM_RETURN_IF_ERROR(registry->AddRecipe(FinetuneRecipe(TrainKind::kFull)));
  TM_RETURN_IF_ERROR(registry->AddRecipe(FinetuneRecipe(TrainKind::kLora)));
  return Status::OK();
}

const Registry& BuiltinRegistry() {
  static const Registry registry = [] {
    Registry r;
    Status s = RegisterBuiltins(&r);
    if (!s.ok()) throw std::logic_error("built-in registry is inconsistent: " + s.message());
    return r;
  }();
  return registry;
}

}  // namespace tmx::recipes
