// Activation checkpointing for LibTorch C++, which has no torch.utils.checkpoint: run a block without keeping
// its intermediate activations, and recompute them during backward. Trades one extra forward of the block per
// backward for storing only the block's input.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <vector>

namespace tmx::models {

// The random generator states a recompute must replay: the CPU generator's and, for a device whose type has
// a generator of its own (the device table's own_generator: cuda, xpu), that device's. Used by Checkpoint
// below and by the fully sharded layers' recompute.
struct RngStates {
  at::Tensor cpu;
  std::optional<at::Device> device;  // set when the device's own generator was captured
  at::Tensor device_state;

  static RngStates Capture(const at::Device& device);
  void Restore() const;
};

// Sets the generators to `replay` for its lifetime, then puts back the states they had before.
class ScopedRngReplay {
 public:
  ScopedRngReplay(const RngStates& replay, const at::Device& device);
  ~ScopedRngReplay();
  ScopedRngReplay(const ScopedRngReplay&) = delete;
  ScopedRngReplay& operator=(const ScopedRngReplay&) = delete;

 private:
  RngStates previous_;
};

// The checkpointed block: a pure function of its input tensor and of the tensors it captures.
using CheckpointFunction = std::function<at::Tensor(const at::Tensor& input)>;

// Returns fn(input), computed without recording a graph; in backward, fn is run again on the saved input with
// grad enabled and the gradient flows to `input` and to `params`.
//
// REQUIRES:
//  - `params` lists every tensor that fn reads and that needs a gradient (typically a module's parameters);
//    captured tensors not listed get no gradient. Listing them as inputs also makes the output require grad
//    when only parameters do (e.g. LoRA with a frozen embedding), which a reentrant checkpoint would miss.
//  - fn returns a single tensor that is not a view of `input`, and behaves identically when re-run: the CPU
//    RNG state (and the input's CUDA device's RNG state) is saved before the first run and restored around the
//    recompute, so dropout masks are replayed; other global state (autocast, grad mode of nested calls) is not.
//  - `input` and `params` are not modified in place between forward and backward (checked by autograd's
//    version counters when backward runs).
//  - Everything fn captures lives until backward has run.
// When grad mode is off, or neither `input` nor any of `params` requires grad, this is just fn(input).
// Supports backward() and autograd::grad(); does not support double backward (create_graph=true).
//
// With `offload_input` (torchtune's enable_activation_offloading, which it too applies with checkpointing), the
// saved input is kept in host memory instead of on its device: copied out as forward returns (page-locked
// memory and a copy that does not wait, when the input is on an accelerator), so the device's copy is freed
// with its last other reference, and copied back for the recompute. Both copies run on the device's current
// stream, ordered with the computation but not overlapped with it (torchtune overlaps them on a side stream).
// A CPU input is copied to another CPU tensor, which saves nothing and exists to test the path.
at::Tensor Checkpoint(CheckpointFunction fn, const at::Tensor& input, const std::vector<at::Tensor>& params,
                      bool offload_input = false);

}  // namespace tmx::models
