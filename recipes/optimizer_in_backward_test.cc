// optimizer_in_bwd: stepping each tensor inside backward gives the weights the ordinary step gives.
#include "recipes/optimizer_in_backward.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tmx::recipes {
namespace {

// A small model with a tensor used twice (tied, like an embedding and its output) and one never used.
struct Net {
  std::vector<at::Tensor> params;
  explicit Net(uint64_t seed) {
    torch::manual_seed(seed);
    params = {torch::randn({6, 5}).requires_grad_(), torch::randn({5, 6}).requires_grad_(),
              torch::randn({6}).requires_grad_(), torch::randn({3}).requires_grad_()};
  }
  torch::Tensor Loss(const torch::Tensor& x) const {
    torch::Tensor h = torch::tanh(x.matmul(params[0]) + params[2].slice(0, 0, 5));
    torch::Tensor y = h.matmul(params[1]).matmul(params[0]);  // params[0] twice
    return (y * y).mean();
  }
};

std::unique_ptr<torch::optim::Optimizer> AdamW(const std::vector<at::Tensor>& params) {
  return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(0.05).weight_decay(0.01));
}

TEST(OptimizerInBackwardTest, SameWeightsAsTheOrdinaryStepAfterSeveralSteps) {
  Net plain(3), in_bwd(3);
  auto a = AdamW(plain.params), b = AdamW(in_bwd.params);
  OptimizerInBackward hooks(b.get(), in_bwd.params);
  for (int step = 0; step < 6; ++step) {
    torch::manual_seed(50 + step);
    torch::Tensor x = torch::randn({4, 6});
    if (step == 4) {
      for (auto* opt : {a.get(), b.get()}) {
        for (auto& group : opt->param_groups()) group.options().set_lr(0.01);
      }
    }
    a->zero_grad();
    plain.Loss(x).backward();
    a->step();
    b->zero_grad();
    in_bwd.Loss(x).backward();
    for (const at::Tensor& p : in_bwd.params) EXPECT_FALSE(p.grad().defined()) << "a gradient was kept";
  }
  EXPECT_EQ(hooks.tensors_stepped(), 6 * 3);  // the unused tensor gets no gradient and no step
  for (size_t i = 0; i < plain.params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(plain.params[i], in_bwd.params[i], 1e-6, 1e-7)) << "tensor " << i;
  }
  EXPECT_FALSE(torch::equal(plain.params[0], Net(3).params[0]));  // the weights did move
  // The optimizer's state is the ordinary one: a checkpoint of it needs nothing new.
  EXPECT_EQ(b->state().size(), a->state().size());
}

TEST(OptimizerInBackwardTest, RemovingTheHooksTrainsAsUsualAgain) {
  Net net(4);
  auto opt = AdamW(net.params);
  { OptimizerInBackward hooks(opt.get(), net.params); }
  torch::Tensor before = net.params[0].clone();
  net.Loss(torch::ones({2, 6})).backward();
  EXPECT_TRUE(net.params[0].grad().defined());
  EXPECT_TRUE(torch::equal(net.params[0], before));  // nothing stepped inside backward
}

}  // namespace
}  // namespace tmx::recipes
