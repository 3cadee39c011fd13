// Knowledge distillation (torchtune's knowledge_distillation_single_device and _distributed, its *_KD_lora_*
// configs): a frozen teacher (teacher_model, loaded from teacher_checkpointer) beside the LoRA student, whose loss
// is (1 - kd_ratio) x cross-entropy + kd_ratio x the forward KL to the teacher's next-token distribution
// (recipes/loss.h), as torchtune's recipes compute it. The teacher is whole on every rank.
#pragma once

#include "base/status.h"
#include "harness/config.h"
#include "harness/device.h"
#include "harness/registry.h"

namespace tmx::recipes {

RecipeSpec KnowledgeDistillationRecipe(RecipeLaunch launch);

// The teacher's share of a cell: its weights (teacher_model, in the config's dtype, whole on every rank; ranks on
// the host add up), its logits in the model dtype and their float32 softmax, the distillation loss's float32
// [tokens, vocab] temporaries, and its forward pass over the step's tokens as work.
StatusOr<CellEstimate> EstimateTeacher(const Config& config, const Registry& registry, const DeviceInfo& device,
                                       int ranks = 1);

}  // namespace tmx::recipes
