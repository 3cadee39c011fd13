// What a fine-tuning recipe predicts for a config on a device before it runs (RecipeSpec::estimate): peak
// memory and the work of a step. Conservative by design: the matrix does not start a cell predicted not to
// fit, so the prediction must not be below what a run needs.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "harness/config.h"
#include "harness/device.h"
#include "harness/registry.h"
#include "recipes/model_components.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {

// Sequence length the estimate assumes when the tokenizer sets no max_seq_len: the longest sample of the
// shipped dataset in byte tokens, with the prompt template.
inline constexpr int64_t kTypicalSeqLen = 320;

// Weights of the whole model, gradients and optimizer state of the trained parameters, the activations
// kept for backward (one layer's with activation checkpointing), the logits in the model dtype plus their
// fp32 copy and its gradient for the loss, the output projection's gradient in flight where ranks keep
// gradient buffers, and the runtime's own footprint (counted in a host-memory device's reading). Work: forward and backward passes over the parameters for the step's tokens
// (3 for full fine-tuning, 2 for LoRA, whose frozen weights get no weight gradient).
// How the ranks of a distributed run split the model (recipes/distributed/): every rank whole (replicated, or
// one process), gradients and optimizer state sharded (SHARD_GRAD_OP), or the layers' weights too (FULL_SHARD).
enum class Sharding { kNone, kGradients, kFull };

// `ranks` processes train together (distributed recipes: the device type's matrix_ranks), batch_size samples
// each. Sharded, a rank keeps 1/ranks of the optimizer state (and, fully sharded, of the layers' weights and
// gradients, plus one layer whole while computing it, whose activations are recomputed; the embeddings, final
// norm and output stay whole). Ranks that share host
// memory (cpu) add up; on an accelerator the prediction is one rank's. Work counts every rank's tokens.
StatusOr<CellEstimate> EstimateFinetune(const Config& config, const Registry& registry, const DeviceInfo& device,
                                        TrainKind kind, int ranks = 1, Sharding sharding = Sharding::kNone);

// What the estimate of a recipe's extra model starts from (a teacher's, a reference's, fake-quantised copies):
// `model_key`'s model, the config's dtype and its bytes per weight, and a micro-batch's tokens per row of
// batch_size (batch_size x the tokenizer's max_seq_len, at most kTypicalSeqLen).
struct ExtraModelInputs {
  ModelChoice model;
  std::string dtype;  // "bf16", "fp32"
  double bytes = 0;   // per weight
  double tokens = 0;
};
StatusOr<ExtraModelInputs> ReadExtraModelInputs(const Config& config, const Registry& registry,
                                                const std::string& model_key = "model");

// What the epoch checkpoints of a fine-tuning run of `config` write (recipes/train_state.h's layout), counted
// without building anything and on the safe side: every epoch's folder is kept (nothing deletes one), each
// file is counted with 1 MiB for its header, and the merged LoRA model is counted with its adapters.
struct CheckpointBytes {
  int64_t weights = 0;      // per epoch: model.safetensors (the whole model; the merged one for LoRA)
  int64_t adapters = 0;     // per epoch: the LoRA adapters (adapter_model.safetensors)
  int64_t train_state = 0;  // per epoch: recipe_state.safetensors (optimizer state, for LoRA the adapters again)
  int64_t epochs = 0;       // checkpoints written: `epochs`, or 0 with save_checkpoints=False
  int64_t parameters = 0;   // of the model, adapters included
  std::string dtype;        // the weights' ("bf16", "fp32")
  int64_t per_epoch() const { return weights + adapters + train_state; }
  int64_t total() const { return per_epoch() * epochs; }
  // "3 epochs x 2.47 GiB (weights 2.30 GiB, optimizer state 0.17 GiB)".
  std::string Describe() const;
};
StatusOr<CheckpointBytes> EstimateCheckpointBytes(const Config& config, const Registry& registry);

}  // namespace tmx::recipes
