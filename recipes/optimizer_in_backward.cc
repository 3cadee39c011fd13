#include "recipes/optimizer_in_backward.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace tmx::recipes {
namespace {

class StepHook final : public torch::autograd::PostAccumulateGradHook {
 public:
  StepHook(torch::optim::Optimizer* optimizer, std::shared_ptr<int64_t> stepped)
      : optimizer_(optimizer), stepped_(std::move(stepped)) {}

  void operator()(const torch::autograd::Variable& tensor) override {
    optimizer_->step();             // the only tensor with a gradient now: every other one is freed or pending
    tensor.mutable_grad().reset();  // freed at once; the next step's backward computes it afresh
    ++*stepped_;
  }

 private:
  torch::optim::Optimizer* optimizer_;
  std::shared_ptr<int64_t> stepped_;
};

}  // namespace

OptimizerInBackward::OptimizerInBackward(torch::optim::Optimizer* optimizer, std::vector<at::Tensor> params)
    : params_(std::move(params)), stepped_(std::make_shared<int64_t>(0)) {
  for (const at::Tensor& p : params_) {
    TORCH_CHECK(p.is_leaf() && p.requires_grad(), "optimizer_in_bwd: a stepped tensor must be a trained leaf");
    TORCH_CHECK(torch::autograd::impl::post_acc_grad_hooks(p) == nullptr,
                "optimizer_in_bwd: a tensor already has a post-accumulate-grad hook");
    torch::autograd::impl::set_post_acc_grad_hooks(p, std::make_unique<StepHook>(optimizer, stepped_));
  }
}

OptimizerInBackward::~OptimizerInBackward() {
  for (const at::Tensor& p : params_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

}  // namespace tmx::recipes
