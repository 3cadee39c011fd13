// How a training run spreads over devices, behind one interface: one device, or ranks of a process group that
// replicate the model (DDP), shard gradients and optimizer state (FSDP's SHARD_GRAD_OP) or shard the layers'
// weights too (FULL_SHARD). The trainer (finetune.cc) asks it which tensors to step, how to zero, reduce and
// clip gradients, how to sum a number over the ranks, how to convert optimizer state to and from the
// per-parameter checkpoint format, and whether this process writes; it never asks whether it is distributed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
#include "harness/run_summary.h"
#include "recipes/optimizers.h"
#include "recipes/train_setup.h"

namespace tmx::recipes {

class Parallelism {
 public:
  virtual ~Parallelism() = default;

  virtual int rank() const { return 0; }
  virtual int world_size() const { return 1; }
  // The process that prints, writes metrics and writes checkpoints.
  bool lead() const { return rank() == 0; }
  // The device this process trains on, given the one the config names (one accelerator per rank).
  virtual c10::Device LocalDevice(c10::Device configured) const { return configured; }
  // ", 2 ranks over gloo (gradients and optimizer state sharded)" for the start-up line; "" on one device.
  virtual std::string Describe() const { return ""; }

  // Takes charge of the model's trained tensors (reading the layout keys of `config`) and returns what the
  // optimizer steps. Call once, before building the optimizer.
  virtual StatusOr<std::vector<at::Tensor>> Wrap(const Config& config, const TrainableModel& model) = 0;
  // Before a step's backward passes.
  virtual void ZeroGrad(torch::optim::Optimizer& optimizer) = 0;
  // After the backward passes: the gradients the optimizer sees, summed over the ranks and, with `max_norm`,
  // clipped to it; returns the whole gradient's norm when clipping (torch's clip_grad_norm_).
  virtual std::optional<double> ReduceAndClip(std::optional<double> max_norm) = 0;
  // After the optimizer step: the updated weights whole where the next forward needs them.
  virtual void AfterStep() {}
  // A number summed (or its maximum) over the ranks; every rank must call it.
  virtual double Sum(double v) const { return v; }
  virtual double Max(double v) const { return v; }
  // A tensor summed over the ranks in place (tensor parallelism's partial sums); every rank must call it.
  virtual void AllReduce(at::Tensor& /*tensor*/) const {}

  // Resuming: `per_param`'s state (an optimizer over the model's trained tensors, read from a checkpoint) into
  // `optimizer` (the one over Wrap's tensors).
  virtual void LoadOptimizerState(torch::optim::Optimizer& per_param, torch::optim::Optimizer* optimizer) = 0;
  // Saving, around the writes: BeginSave makes every weight whole on the lead process; the state to save is
  // `optimizer`'s unless ShardsOptimizerState(), when GatherOptimizerState fills `per_param` (an optimizer
  // over the model's trained tensors) from every rank's shards. EndSave waits until every rank is done.
  virtual void BeginSave() {}
  virtual bool ShardsOptimizerState() const { return false; }
  virtual void GatherOptimizerState(const torch::optim::Optimizer& optimizer, torch::optim::Optimizer* per_param) {}
  virtual void EndSave() {}
};

// One device: the optimizer steps the trained tensors, gradients are clipped locally.
std::unique_ptr<Parallelism> SingleDevice();

// This process's rank of a run launched with torchrun's environment, joined over the device type's
// collective backend. Unavailable (rendezvous) when the group cannot form.
StatusOr<std::unique_ptr<Parallelism>> JoinRanks(const RunContext& context);

// What every recipe's run does around its work, in one place (a context without a registry is Internal): a
// summary named after `recipe`, the config, the
// device and torch; one device or (`distributed`) this process's rank, joined here; `work` on it; an exception
// becomes the run's error (out of memory as error kind "out_of_memory", its message ending with
// `out_of_memory_fix`), a failed rendezvous error kind "rendezvous"; then the statistics (RunSummary::Finish)
// and the peak memory (each rank's own; over ranks the largest on an accelerator, their sum on the shared
// host). Rank 0 writes <output_dir>/summary.json, failed or not, and, when the run succeeded, calls `report`
// with the finished summary (its last lines); another rank returns only its own failure, naming the rank.
Status RunInProcessOrRanks(const Config& config, const RunContext& context, const std::string& recipe,
                           bool distributed, const std::string& out_of_memory_fix,
                           const std::function<Status(Parallelism& parallel, RunSummary* summary)>& work,
                           const std::function<void(const RunSummary& summary)>& report);

}  // namespace tmx::recipes
