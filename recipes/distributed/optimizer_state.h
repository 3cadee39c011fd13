// The optimizer state of sharded weights in the single-device checkpoint format. A sharded rank's optimizer
// steps one flat shard per group of weights; a checkpoint stores the state per parameter by name
// (recipes/train_state.h). These convert between the two, so a sharded run saves checkpoints any run can
// resume, at any number of ranks.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include "recipes/distributed/process_group.h"

namespace tmx::recipes {

// One group of weights laid out flat and sharded: parameter i is elements [offset_i, offset_i + numel_i) of the
// flat weights, where offsets follow the order of `params`; rank r steps elements [r * shard_size, (r + 1) *
// shard_size) as `shard`.
struct ShardedFlat {
  std::vector<at::Tensor> params;  // the parameters (keys of a per-parameter optimizer's state)
  std::vector<std::vector<int64_t>> shapes;
  at::Tensor shard;
  int64_t shard_size = 0;
};

// Fills `per_param`'s state for every parameter of `flat` from `sharded`'s state of the shard, gathered from
// every rank. Every rank must call it for the same groups in the same order (it all-gathers); a shard not
// stepped yet is skipped on every rank alike. AdamW and SGD states.
void GatherOptimizerState(ProcessGroup& group, const ShardedFlat& flat, const torch::optim::Optimizer& sharded,
                          torch::optim::Optimizer* per_param);

// Sets `sharded`'s state of this rank's shard from `per_param`'s state of the parameters (no collective).
void ScatterOptimizerState(int rank, int ranks, const ShardedFlat& flat, const torch::optim::Optimizer& per_param,
                           torch::optim::Optimizer* sharded);

}  // namespace tmx::recipes
