// torchtune's `optimizer_in_bwd: True`: each trained tensor is stepped inside the backward pass, as soon as its
// gradient is complete, and that gradient is freed at once, so a step never holds every gradient at the same
// time (for full fine-tuning, the saving is about one copy of the weights).
//
// One optimizer over every trained tensor keeps the state, the learning rate and the checkpoint format as
// without it; a post-accumulate-grad hook on each tensor calls its `step()` while that tensor is the only
// one with a gradient (every other gradient is either freed already or not computed yet), so each call
// updates exactly one tensor. Gradients are therefore neither accumulated over micro-batches nor clipped:
// torchtune refuses both with it, and so do this project's checks (recipes/train_schema.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

namespace tmx::recipes {

class OptimizerInBackward {
 public:
  // Hooks every tensor of `params` (leaves that require gradients, all stepped by `optimizer`, which must
  // outlive this object). A tensor that already has a post-accumulate-grad hook is a programming error.
  OptimizerInBackward(torch::optim::Optimizer* optimizer, std::vector<at::Tensor> params);
  // Removes the hooks: the tensors train as usual afterwards.
  ~OptimizerInBackward();
  OptimizerInBackward(const OptimizerInBackward&) = delete;
  OptimizerInBackward& operator=(const OptimizerInBackward&) = delete;

  // Tensors stepped inside backward passes so far.
  int64_t tensors_stepped() const { return *stepped_; }

 private:
  std::vector<at::Tensor> params_;
  std::shared_ptr<int64_t> stepped_;
};

}  // namespace tmx::recipes
