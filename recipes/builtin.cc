#include "recipes/builtin.h"

#include <algorithm>
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

// torchtune's distributed configs for the same families and sizes (the script's DIST_FULL and DIST_LORA).
const char* const kTorchtuneFullDistributedConfigs[] = {
    "llama2/7B_full",    "llama3/8B_full",    "llama3_1/8B_full",  "llama3_2/1B_full",  "llama3_2/3B_full",
    "mistral/7B_full",   "gemma/2B_full",     "gemma/7B_full",     "gemma2/2B_full",    "gemma2/9B_full",
    "gemma2/27B_full",   "phi3/mini_full",    "phi4/14B_full",     "qwen2/0.5B_full",   "qwen2/1.5B_full",
    "qwen2/7B_full",     "qwen2_5/0.5B_full", "qwen2_5/1.5B_full", "qwen2_5/3B_full",   "qwen2_5/7B_full",
    "qwen3/0.6B_full",   "qwen3/1.7B_full",   "qwen3/4B_full",     "qwen3/8B_full"};
const char* const kTorchtuneLoraDistributedConfigs[] = {
    "llama2/7B_lora",    "llama3/8B_lora",    "llama3_1/8B_lora",  "llama3_2/1B_lora",  "llama3_2/3B_lora",
    "mistral/7B_lora",   "gemma/2B_lora",     "gemma/7B_lora",     "gemma2/2B_lora",    "gemma2/9B_lora",
    "gemma2/27B_lora",   "phi3/mini_lora",    "phi4/14B_lora",     "qwen2/0.5B_lora",   "qwen2/1.5B_lora",
    "qwen2/7B_lora",     "qwen2_5/0.5B_lora", "qwen2_5/1.5B_lora", "qwen2_5/3B_lora",   "qwen2_5/7B_lora",
    "qwen3/0.6B_lora",   "qwen3/1.7B_lora",   "qwen3/4B_lora",     "qwen3/8B_lora"};
// The tiny presets with distributed configs too (the script's TINY_DIST_FAMILIES).
const char* const kTinyDistributedFamilies[] = {"llama3_2", "qwen2_5"};

// A recipe's built-in configs: torchtune's, then its tiny configs (tiny/<family>_{full,lora}_<suffix>; Llama
// 3.2's keep the first tiny configs' names): one per tiny preset for the single-device recipes, the
// kTinyDistributedFamilies for the distributed ones.
std::vector<std::string> BuiltinConfigs(TrainKind kind, bool distributed) {
  const bool lora = kind == TrainKind::kLora;
  std::vector<std::string> names;
  if (distributed) {
    if (lora) {
      names.assign(std::begin(kTorchtuneLoraDistributedConfigs), std::end(kTorchtuneLoraDistributedConfigs));
    } else {
      names.assign(std::begin(kTorchtuneFullDistributedConfigs), std::end(kTorchtuneFullDistributedConfigs));
    }
  } else if (lora) {
    names.assign(std::begin(kTorchtuneLoraConfigs), std::end(kTorchtuneLoraConfigs));
  } else {
    names.assign(std::begin(kTorchtuneFullConfigs), std::end(kTorchtuneFullConfigs));
  }
  const std::string suffix = std::string(lora ? "lora_" : "full_") + (distributed ? "distributed" : "single_device");
  for (const models::ModelPreset& p : models::ModelPresets()) {
    if (!p.tiny) continue;
    if (distributed && std::find(std::begin(kTinyDistributedFamilies), std::end(kTinyDistributedFamilies),
                                 p.family) == std::end(kTinyDistributedFamilies)) {
      continue;
    }
    names.push_back("tiny/" + (p.family == "llama3_2" ? "" : p.family + "_") + suffix);
  }
  return names;
}

RecipeSpec FinetuneRecipe(TrainKind kind, bool distributed) {
  RecipeSpec r;
  bool lora = kind == TrainKind::kLora;
  r.name = std::string(lora ? "lora_finetune_" : "full_finetune_") + (distributed ? "distributed" : "single_device");
  if (distributed) {
    r.doc = lora ? "LoRA fine-tuning across ranks (tune run --nproc_per_node N): data parallel, adapters' gradients "
                   "and optimizer state sharded"
                 : "full fine-tuning across ranks (tune run --nproc_per_node N): data parallel, gradients and "
                   "optimizer state sharded";
  } else {
    r.doc = lora ? "LoRA fine-tuning on one device: base weights frozen, low-rank adapters trained"
                 : "full fine-tuning of every weight on one device";
  }
  r.distributed = distributed;
  r.configs = BuiltinConfigs(kind, distributed);
  r.fields = TrainingFields(kind);
  r.checks = {TrainingChecks};
  if (distributed) {
    for (FieldSpec& f : DistributedFields()) r.fields.push_back(std::move(f));
    r.checks.push_back(DistributedChecks);
  }
  r.run = [kind, distributed](const Config& config, const RunContext& context) {
    return RunFinetune(config, context, kind, distributed);
  };
  r.estimate = [kind, distributed](const Config& config, const Registry& registry, const DeviceInfo& device) {
    if (!distributed) return EstimateFinetune(config, registry, device, kind);
    StatusOr<int64_t> shard_dim = config.GetInt("data_parallel_shard_dim");
    StatusOr<bool> reshard = config.GetBool("fsdp_reshard_after_forward");
    if (!shard_dim.ok()) return StatusOr<CellEstimate>(shard_dim.status());
    if (!reshard.ok()) return StatusOr<CellEstimate>(reshard.status());
    const Sharding sharding = *shard_dim == 1 ? Sharding::kNone : *reshard ? Sharding::kFull : Sharding::kGradients;
    return EstimateFinetune(config, registry, device, kind, device.traits().matrix_ranks, sharding);
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
  for (bool distributed : {false, true}) {
    TM_RETURN_IF_ERROR(registry->AddRecipe(FinetuneRecipe(TrainKind::kFull, distributed)));
    TM_RETURN_IF_ERROR(registry->AddRecipe(FinetuneRecipe(TrainKind::kLora, distributed)));
  }
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
