// What a fine-tuning recipe predicts for a config on a device before it runs (RecipeSpec::estimate): peak
// memory and the work of a step. Conservative by design: the matrix does not start a cell predicted not to
// fit, so the prediction must not be below what a run needs.
#pragma once

#include "base/status.h"
#include "harness/config.h"
#include "harness/device.h"
#include "harness/registry.h"
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
// How the ranks of a distributed run split the model (recipes/distributed/): every rank whole (replicated, or
// one process), gradients and optimizer state sharded (SHARD_GRAD_OP), or the layers' weights too (FULL_SHARD).
enum class Sharding { kNone, kGradients, kFull };

// `ranks` processes train together (distributed recipes: the device type's matrix_ranks), batch_size samples
// each. Sharded, a rank keeps 1/ranks of the optimizer state (and, fully sharded, of the weights and
// gradients, plus one layer whole while computing it, whose activations are recomputed). Ranks that share host
// memory (cpu) add up; on an accelerator the prediction is one rank's. Work counts every rank's tokens.
StatusOr<CellEstimate> EstimateFinetune(const Config& config, const Registry& registry, const DeviceInfo& device,
                                        TrainKind kind, int ranks = 1, Sharding sharding = Sharding::kNone);

}  // namespace tmx::recipes
