#include "recipes/builtin.h"

#include <iterator>

#include "recipes/checkpointers.h"
#include "recipes/components.h"
#include "recipes/estimate.h"
#include "recipes/finetune.h"
#include "recipes/model_components.h"
#include "recipes/models/presets.h"
#include "recipes/optimizers.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {
namespace {

// torchtune's single-device configs for the families implemented here, written by
// scripts/make_builtin_configs.py with torchtune's values (its FULL and LORA lists name the same configs).
const char* const kTorchtuneFullConfigs[] = {
    "llama2/7B_full_low_memory",       "llama3/8B_full_single_device",    "llama3_1/8B_full_single_device",
    "llama3_2/1B_full_single_device",  "llama3_2/3B_full_single_device",  "mistral/7B_full_low_memory",
    "phi3/mini_full_low_memory",       "phi4/14B_full_low_memory",        "qwen2/7B_full_single_device",
    "qwen2/0.5B_full_single_device",   "qwen2/1.5B_full_single_device",   "qwen2_5/0.5B_full_single_device",
    "qwen2_5/1.5B_full_single_device", "qwen2_5/3B_full_single_device",   "qwen2_5/7B_full_single_device",
    "qwen3/0.6B_full_single_device",   "qwen3/1.7B_full_single_device",   "qwen3/4B_full_single_device",
    "qwen3/8B_full_single_device"};
const char* const kTorchtuneLoraConfigs[] = {
    "llama2/7B_lora_single_device",    "llama3/8B_lora_single_device",    "llama3_1/8B_lora_single_device",
    "llama3_2/1B_lora_single_device",  "llama3_2/3B_lora_single_device",  "mistral/7B_lora_single_device",
    "gemma/2B_lora_single_device",     "gemma/7B_lora_single_device",     "gemma2/2B_lora_single_device",
    "gemma2/9B_lora_single_device",    "gemma2/27B_lora_single_device",   "phi3/mini_lora_single_device",
    "phi4/14B_lora_single_device",     "qwen2/7B_lora_single_device",     "qwen2/0.5B_lora_single_device",
    "qwen2/1.5B_lora_single_device",   "qwen2_5/0.5B_lora_single_device", "qwen2_5/1.5B_lora_single_device",
    "qwen2_5/3B_lora_single_device",   "qwen2_5/7B_lora_single_device",   "qwen2_5/14B_lora_single_device",
    "qwen3/0.6B_lora_single_device",   "qwen3/1.7B_lora_single_device",   "qwen3/4B_lora_single_device",
    "qwen3/8B_lora_single_device",     "qwen3/14B_lora_single_device"};

// A recipe's built-in configs: torchtune's, then one tiny config per tiny preset
// (tiny/<family>_{full,lora}_single_device; Llama 3.2's keep the first tiny configs' names).
std::vector<std::string> BuiltinConfigs(TrainKind kind) {
  const bool lora = kind == TrainKind::kLora;
  std::vector<std::string> names;
  if (lora) {
    names.assign(std::begin(kTorchtuneLoraConfigs), std::end(kTorchtuneLoraConfigs));
  } else {
    names.assign(std::begin(kTorchtuneFullConfigs), std::end(kTorchtuneFullConfigs));
  }
  const std::string suffix = lora ? "lora_single_device" : "full_single_device";
  for (const models::ModelPreset& p : models::ModelPresets()) {
    if (!p.tiny) continue;
    names.push_back("tiny/" + (p.family == "llama3_2" ? "" : p.family + "_") + suffix);
  }
  return names;
}

RecipeSpec FinetuneRecipe(TrainKind kind) {
  RecipeSpec r;
  bool lora = kind == TrainKind::kLora;
  r.name = lora ? "lora_finetune_single_device" : "full_finetune_single_device";
  r.doc = lora ? "LoRA fine-tuning on one device: base weights frozen, low-rank adapters trained"
               : "full fine-tuning of every weight on one device";
  r.configs = BuiltinConfigs(kind);
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
