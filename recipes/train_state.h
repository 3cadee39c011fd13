// Training state around the loop: setting the learning rate, loading starting weights, and
// saving/restoring epoch checkpoints (weights, adapters, optimizer state and progress), all in the
// safetensors format.
//
// An epoch checkpoint folder <checkpointer.output_dir>/epoch_<N>/ holds the weights in the checkpointer's format
// (checkpointers.h) and
//   recipe_state.safetensors    optimizer state per trained parameter ("<name>.exp_avg", ...; bitsandbytes'
//                               AdamW: "<name>.state1" and ".state2", uint8 codes or float32, and ".absmax1"
//                               and ".absmax2" per block of 256, restored as saved), for LoRA the
//                               adapters ("adapter:<name>"), and progress (next_epoch, global_step, seed) in
//                               the metadata
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "base/status.h"
#include "harness/config.h"
#include "recipes/checkpoint/safetensors.h"

namespace tmx::recipes {

using NamedParameters = std::vector<std::pair<std::string, torch::Tensor>>;

void SetLearningRate(torch::optim::Optimizer& optimizer, double lr);
// torchtune's get_cosine_schedule_with_warmup: the learning rate's multiplier at optimizer step `step` (0-based)
// of `total`, linear over `warmup` steps, then a cosine of `num_cycles` periods.
double LrScheduleFactor(int64_t step, int64_t total, int64_t warmup, double num_cycles);

// Loads starting weights. For LoRA models the adapters are not expected in the checkpoint, but every base
// weight is; a mismatch names the first offending tensor.
Status LoadBaseWeights(torch::nn::Module& model, const checkpoint::NamedTensors& tensors, bool lora);

struct Progress {
  int64_t next_epoch = 0;
  int64_t global_step = 0;
  uint64_t seed = 0;
};

// Writes <dir>/recipe_state.safetensors: the optimizer state per trained parameter, the progress, and for
// LoRA the trained adapters themselves. The epoch's weights are the checkpointer's (checkpointers.h).
Status SaveTrainState(const std::string& dir, const NamedParameters& trained, const torch::optim::Optimizer& optimizer,
                      bool lora, const Progress& progress);

struct ResumePoint {
  std::string directory;
  int64_t next_epoch = 0;
  int64_t global_step = 0;
};

// Restores the newest epoch checkpoint under `checkpoint_dir` (or checkpointer.recipe_checkpoint when the
// config names one): the trained weights (LoRA adapters from the recipe state; for full fine-tuning
// `load_weights` reads the epoch's folder), the optimizer state and the progress. NotFound when there is none.
StatusOr<ResumePoint> LoadTrainState(const std::string& checkpoint_dir, const Config& config,
                                     const NamedParameters& trained, torch::optim::Optimizer& optimizer, bool lora,
                                     const std::function<Status(const std::string& dir)>& load_weights);

}  // namespace tmx::recipes
