// The optimizer state of sharded weights in the single-device checkpoint format. A sharded rank's optimizer
// steps one flat shard per group of weights; a checkpoint stores the state per parameter by name
// (recipes/train_state.h). These convert between the two, so a sharded run saves checkpoints any run can
// resume, at any number of ranks.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include "recipes/distributed/flat_layout.h"
#include "recipes/distributed/process_group.h"

namespace tmx::recipes {

// One group of weights laid out flat (flat_layout.h) and sharded: this rank steps its shard as `shard`. The
// layout's params are the keys of a per-parameter optimizer's state.
struct ShardedFlat {
  FlatLayout layout;
  at::Tensor shard;
};

// Fills `per_param`'s state for every parameter of `flat` from `sharded`'s state of the shard, gathered from
// every rank. Every rank must call it for the same groups in the same order (it all-gathers); a shard not
// stepped yet is skipped on every rank alike. AdamW and SGD states.
void GatherOptimizerState(ProcessGroup& group, const ShardedFlat& flat, const torch::optim::Optimizer& sharded,
                          torch::optim::Optimizer* per_param);

// Sets `sharded`'s state of this rank's shard from `per_param`'s state of the parameters (no collective).
void ScatterOptimizerState(int rank, const ShardedFlat& flat, const torch::optim::Optimizer& per_param,
                           torch::optim::Optimizer* sharded);

}  // namespace tmx::recipes
