// Quantisation-aware training (torchtune's qat_single_device, qat_distributed and qat_lora_finetune_distributed):
// fine-tuning whose linears (every linear the quantizer's groupsize fits for full training, the adapted ones for
// LoRA) compute with torchao's 8da4w fake quantisation (int8 dynamic per-token activations, int4 per-group
// weights, straight-through gradients; train_setup.h SetupModel attaches it). fake_quant_after_n_steps trains that
// many steps plainly first. The saved model is unquantised.
#pragma once

#include "base/status.h"
#include "harness/config.h"
#include "harness/device.h"
#include "harness/registry.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {

// kind kFull: qat_single_device or qat_distributed; kLora: qat_lora_finetune_distributed (ranks).
RecipeSpec QatRecipe(TrainKind kind, RecipeLaunch launch);

// What fake quantisation adds to a fine-tuning cell: every fake-quantised linear keeps its fake-quantised weight
// and input for backward (one layer's when layers recompute), and quantising the largest weight by operations
// needs float32 temporaries (none where the one-pass loop runs). Ranks on the host add up. Its work is a few
// elementwise passes over the weights, small beside a step's products, and is not counted.
StatusOr<double> EstimateFakeQuantizationBytes(const Config& config, const Registry& registry,
                                               const DeviceInfo& device, TrainKind kind, int ranks);

}  // namespace tmx::recipes
