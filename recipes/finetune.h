// The fine-tuning recipes: full_finetune_single_device, lora_finetune_single_device, full_finetune_distributed
// and lora_finetune_distributed. Plain next-token cross-entropy on SFT samples: the shared loop
// (recipes/trainer.h) with its default Objective.
#pragma once

#include "harness/registry.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {

// The registry entry of the fine-tuning recipe training `kind` (every weight, or LoRA adapters) in one process
// or across ranks (data parallel; gradients and optimizer state sharded unless data_parallel_shard_dim=1).
RecipeSpec FinetuneRecipe(TrainKind kind, RecipeLaunch launch);

}  // namespace tmx::recipes
