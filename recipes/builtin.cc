#include "recipes/builtin.h"

#include "harness/config_manifest.h"
#include "recipes/checkpointers.h"
#include "recipes/components.h"
#include "recipes/distillation.h"
#include "recipes/dpo.h"
#include "recipes/eleuther_eval.h"
#include "recipes/finetune.h"
#include "recipes/generate.h"
#include "recipes/model_components.h"
#include "recipes/optimizers.h"
#include "recipes/ppo_recipe.h"
#include "recipes/qat.h"
#include "recipes/quantize.h"
#include "recipes/vision_components.h"

namespace tmx::recipes {

Status RegisterBuiltins(Registry* registry) {
  std::vector<ComponentSpec> components;
  AddModelComponents(&components);
  AddVisionModelComponents(&components);
  AddDataComponents(&components);
  AddOptimizerComponents(&components);
  AddCheckpointerComponents(&components);
  AddTrainingComponents(&components);
  for (ComponentSpec& c : components) TM_RETURN_IF_ERROR(registry->AddComponent(std::move(c)));
  for (bool distributed : {false, true}) {
    const RecipeLaunch launch = distributed ? RecipeLaunch::kRanks : RecipeLaunch::kOneProcess;
    TM_RETURN_IF_ERROR(registry->AddRecipe(FinetuneRecipe(TrainKind::kFull, launch)));
    TM_RETURN_IF_ERROR(registry->AddRecipe(FinetuneRecipe(TrainKind::kLora, launch)));
    TM_RETURN_IF_ERROR(registry->AddRecipe(KnowledgeDistillationRecipe(launch)));
    TM_RETURN_IF_ERROR(registry->AddRecipe(QatRecipe(TrainKind::kFull, launch)));
    TM_RETURN_IF_ERROR(registry->AddRecipe(DpoRecipe(TrainKind::kLora, launch)));
    // torchtune has no full_dpo_single_device.
    if (distributed) TM_RETURN_IF_ERROR(registry->AddRecipe(DpoRecipe(TrainKind::kFull, launch)));
  }
  // torchtune has QAT with LoRA across ranks only.
  TM_RETURN_IF_ERROR(registry->AddRecipe(QatRecipe(TrainKind::kLora, RecipeLaunch::kRanks)));
  TM_RETURN_IF_ERROR(registry->AddRecipe(PpoRecipe()));
  for (const char* name : {"generate", "dev/generate_v2", "dev/generate_v2_distributed"}) TM_RETURN_IF_ERROR(registry->AddRecipe(GenerateRecipe(name)));
  TM_RETURN_IF_ERROR(registry->AddRecipe(QuantizeRecipe()));
  TM_RETURN_IF_ERROR(registry->AddRecipe(EleutherEvalRecipe()));
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
