// Data parallelism over a process group for the distributed recipes: every rank holds the whole model and
// trains on its own share of each global batch; gradients are summed over the ranks before the optimizer step.
//
// The trained parameters are laid out in one flat buffer per dtype (each parameter and its .grad are views
// into a flat parameter and a flat gradient buffer), so each step moves one buffer per dtype. Two layouts:
//  - sharded (FSDP's SHARD_GRAD_OP, ZeRO stage 2; torchtune's distributed recipes shard by default): the
//    gradients are reduce-scattered, each rank keeps and steps only its 1/N shard of every flat buffer (so the
//    optimizer state is 1/N per rank, and the full gradient buffer is freed before the optimizer step), then
//    the updated shards are all-gathered back into the parameters;
//  - replicated (DDP): gradients are all-reduced and every rank steps every parameter.
// Parameters stay whole on every rank between steps in both layouts (no sharding of the weights at rest).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "recipes/distributed/optimizer_state.h"
#include "recipes/distributed/process_group.h"

namespace tmx::recipes {

// Sum of squares of the tensors' gradients (those defined), in fp32; and scaling them in place.
double GradSquaredSum(const std::vector<at::Tensor>& tensors);
void ScaleGrads(const std::vector<at::Tensor>& tensors, double factor);

struct DataParallelOptions {
  // Shard gradients and optimizer state over the ranks (see above); false: replicate them. Default on.
  bool shard = true;
  // Keep each rank's shard and its optimizer state in CPU memory and step it there (torchtune's
  // fsdp_cpu_offload); only meaningful with `shard` on an accelerator. Default off.
  bool cpu_offload = false;
};

class DataParallel;
class ShardedLayers;

// The norm of the whole gradient a distributed step sums over the ranks (`data_parallel`'s and, when fully
// sharded, `layers`'s), from every rank's shards; when it exceeds `max_norm`, the gradients the optimizer sees
// are scaled by max_norm / (norm + 1e-6), as torch's clip_grad_norm_ does. Every rank must call it.
double ClipGradNorm(ProcessGroup& group, DataParallel& data_parallel, ShardedLayers* layers,
                    std::optional<double> max_norm);

class DataParallel {
 public:
  // `params`: the trained parameters (leaf tensors that require grad), all on one device. `group` must
  // outlive this object. Every rank must pass parameters of the same shapes in the same order.
  DataParallel(ProcessGroup* group, const std::vector<at::Tensor>& params, const DataParallelOptions& options = {});

  // Copies rank 0's values of the trained parameters to every rank.
  void BroadcastParameters();
  // What the optimizer steps: this rank's shard of each flat buffer (sharded), or the parameters (replicated).
  // Build the optimizer over these, and never call its zero_grad(): use ZeroGrad() below.
  const std::vector<at::Tensor>& optimizer_tensors() const { return optimizer_tensors_; }
  // Before a step's backward passes: zeroed gradient buffers behind every parameter's .grad.
  void ZeroGrad();
  // After the step's backward passes: the gradients summed over the ranks, in optimizer_tensors()' .grad.
  // The loss each rank back-propagated must already be divided by the number of tokens of the global batch.
  void ReduceGradients();
  // This rank's sum of squares of the gradients the optimizer sees: of its shards when sharded (sum them over
  // the ranks for the whole gradient's), of every gradient when replicated.
  double LocalGradSquares() const;
  void ScaleGrads(double factor);
  // After the optimizer step: every rank's updated shard copied into every rank's parameters (sharded);
  // nothing to do when replicated.
  void GatherParameters();

  bool sharded() const { return options_.shard; }
  // The sharded groups (one per dtype), for converting optimizer state (optimizer_state.h); empty when
  // replicated, where the optimizer steps the parameters themselves.
  std::vector<ShardedFlat> flats() const;
  // Elements of optimizer state this rank keeps per state tensor (the shard sizes, or every parameter).
  int64_t optimizer_elements() const;

 private:
  struct FlatGroup {
    FlatLayout layout;  // the parameters of one dtype, each a view into `flat`
    at::Tensor flat;    // [padded] their values
    at::Tensor grad;    // [padded] their gradients (undefined between ReduceGradients and ZeroGrad when sharded)
    at::Tensor shard;   // sharded: what the optimizer steps (a view of `flat`, or a CPU copy when offloaded)
  };
  ProcessGroup* group_;
  DataParallelOptions options_;
  std::vector<FlatGroup> groups_;
  std::vector<at::Tensor> optimizer_tensors_;
};

}  // namespace tmx::recipes
