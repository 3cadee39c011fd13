// Direct preference optimization (torchtune's lora_dpo_single_device, lora_dpo_distributed, full_dpo_distributed):
// batches of chosen/rejected pairs from a preference dataset; the loss (torchtune's DPOLoss, `loss.beta`,
// `loss.label_smoothing`) compares the policy's summed log-probabilities of each response with a frozen
// reference's. The reference is the LoRA model with its adapters off (models/adapters_off.h), or for full DPO a
// second model (`model` again, loaded from ref_checkpointer; the policy's own starting weights when its
// checkpoint_dir is null), whole on each rank. The loss averages over the step's pairs (over every rank's); logged
// steps add torchtune's rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, log_probs/chosen and
// log_probs/rejected, each the mean over the step's pairs (torchtune's single-device recipe logs its last
// micro-batch's; with one micro-batch a step, as in every cell, the same).
#pragma once

#include "base/status.h"
#include "harness/config.h"
#include "harness/device.h"
#include "harness/registry.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {

// kind kLora: lora_dpo_single_device or lora_dpo_distributed; kFull: full_dpo_distributed (ref_checkpointer
// required).
RecipeSpec DpoRecipe(TrainKind kind, RecipeLaunch launch);

// The reference's share of a cell (the policy's own is EstimateFinetune's with the pairs' 2 x batch_size rows):
// the reference's forward over those rows as work, the float32 log-probabilities of its logits and of the
// policy's (DPO needs every row's whole distribution, which the fused cross-entropy counted by EstimateFinetune
// avoids), and with `own_weights` (full DPO) a second copy of the model's weights in the config's dtype, whole on
// every rank (ranks on the host add up).
StatusOr<CellEstimate> EstimateDpoReference(const Config& config, const Registry& registry, const DeviceInfo& device,
                                            bool own_weights, int ranks = 1);

}  // namespace tmx::recipes
