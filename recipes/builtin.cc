#include "recipes/builtin.h"

#include "harness/config_manifest.h"
#include "recipes/checkpointers.h"
#include "recipes/components.h"
#include "recipes/estimate.h"
#include "recipes/finetune.h"
#include "recipes/model_components.h"
#include "recipes/optimizers.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {
namespace {

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
  r.launch = distributed ? RecipeLaunch::kRanks : RecipeLaunch::kOneProcess;
  r.configs = ManifestConfigsOf(BuiltinConfigManifest(), r.name);
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
  // A config listed for a recipe that is not registered would be silently left out.
  for (const ManifestEntry& e : BuiltinConfigManifest()) {
    if (registry->FindRecipe(e.recipe) == nullptr) {
      return Status::InvalidArgument("configs/MANIFEST:" + std::to_string(e.line) + ": '" + e.name +
                                     "' names recipe '" + e.recipe + "', which is not registered");
    }
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
