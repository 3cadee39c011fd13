#include "recipes/finetune.h"

#include "recipes/trainer.h"

namespace tmx::recipes {

RecipeSpec FinetuneRecipe(TrainKind kind, RecipeLaunch launch) {
  const bool distributed = launch == RecipeLaunch::kRanks, lora = kind == TrainKind::kLora;
  TrainingRecipe r;
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
  r.kind = kind;
  r.launch = launch;
  if (distributed && !lora) {  // torchtune's full_finetune_distributed reads them
    r.fields = SelectiveCheckpointingFields();
    r.checks.push_back(SelectiveCheckpointingChecks);
  }
  return TrainingRecipeSpec(std::move(r));
}

}  // namespace tmx::recipes
