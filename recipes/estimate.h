// What a fine-tuning recipe predicts for a config on a device before it runs (RecipeSpec::estimate): peak
// memory and the work of a step. Conservative by design: the matrix does not start a cell predicted not to
// fit, so the prediction must not be below what a run needs.
#pragma once

#include "harness/config.h"
#include "harness/device.h"
#include "harness/registry.h"
#include "harness/status.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {

// Sequence length the estimate assumes when the tokenizer sets no max_seq_len: the longest sample of the
// shipped dataset in byte tokens, with the prompt template.
inline constexpr int64_t kTypicalSeqLen = 320;

// Weights of the whole model, gradients and optimizer state of the trained parameters, the activations
// kept for backward (one layer's with activation checkpointing), the logits in the model dtype plus their
// fp32 copy and its gradient for the loss, and the runtime's own footprint (counted in a host-memory
// device's reading). Work: forward and backward passes over the parameters for the step's tokens
// (3 for full fine-tuning, 2 for LoRA, whose frozen weights get no weight gradient).
// `ranks` processes train together (distributed recipes: the device type's matrix_ranks), each holding the
// whole model and batch_size samples; with `sharded`, each keeps 1/ranks of the optimizer state. Ranks that
// share host memory (cpu) add up; on an accelerator the prediction is one rank's. Work counts every rank's.
StatusOr<CellEstimate> EstimateFinetune(const Config& config, const Registry& registry, const DeviceInfo& device,
                                        TrainKind kind, int ranks = 1, bool sharded = false);

}  // namespace tmx::recipes
