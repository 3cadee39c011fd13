// The optimizer components: AdamW with fused: True (ATen's fused kernel) steps as LibTorch's AdamW does.
#include "recipes/optimizers.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "harness/config_store.h"
#include "recipes/builtin.h"

namespace tmx::recipes {
namespace {

OptimizerPtr Build(bool fused, const std::vector<at::Tensor>& params, bool amsgrad = false) {
  StatusOr<Config> config = Config::FromString(std::string("optimizer:\n"
                                                           "  _component_: torch.optim.AdamW\n"
                                                           "  lr: 0.01\n"
                                                           "  weight_decay: 0.1\n"
                                                           "  eps: 1.0e-8\n"
                                                           "  betas: [0.9, 0.95]\n"
                                                           "  amsgrad: ") +
                                                   (amsgrad ? "True" : "False") + "\n  fused: " +
                                                   (fused ? "True" : "False") + "\n",
                                               "opt.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  StatusOr<const OptimizerComponent*> component = OptimizerOf(*config, BuiltinRegistry());
  EXPECT_TRUE(component.ok()) << component.status().ToString();
  StatusOr<OptimizerPtr> built = (*component)->Build(*config, params);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  return std::move(built).value();
}

std::vector<at::Tensor> Params(torch::Dtype dtype) {
  torch::manual_seed(5);
  return {torch::randn({7, 3}).to(dtype).requires_grad_(), torch::randn({11}).to(dtype).requires_grad_(),
          torch::randn({4}).to(dtype).requires_grad_()};
}

// Five steps with the same gradients (the third parameter never has one) and a learning-rate change.
void Train(torch::optim::Optimizer& opt, std::vector<at::Tensor>& params) {
  for (int step = 0; step < 5; ++step) {
    if (step == 3) {
      for (auto& group : opt.param_groups()) group.options().set_lr(0.003);
    }
    opt.zero_grad();
    torch::manual_seed(100 + step);
    for (size_t i = 0; i < 2; ++i) params[i].mutable_grad() = torch::randn(params[i].sizes()).to(params[i].dtype());
    opt.step();
  }
}

TEST(OptimizersTest, BetasMustBeTwoRatesInZeroToOneForEveryAdam) {
  // AdamW's betas had no check: [.nan, 0.999] validated and made the first step's moments NaN.
  const Registry& registry = BuiltinRegistry();
  for (const std::string& config : {"tiny/lora_single_device", "tiny/full_single_device"}) {
    StatusOr<LocatedConfig> located = LocateConfig(config, registry);
    ASSERT_TRUE(located.ok()) << located.status().ToString();
    for (const std::string& betas : {"[.nan, 0.999]", "[0.9, 1.0]", "[0.9]", "[-0.1, 0.9]"}) {
      StatusOr<Config> c = LoadResolvedConfig(*located, {"optimizer.betas=" + betas}, located->recipe, &registry);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      std::vector<Problem> problems = ValidateConfig(*c, *located->recipe, registry, nullptr);
      ASSERT_EQ(problems.size(), 1u) << config << " " << betas;
      EXPECT_EQ(problems[0].key, "optimizer.betas");
      EXPECT_NE(problems[0].message.find("expected two numbers in [0, 1), e.g. [0.9, 0.999]"), std::string::npos)
          << problems[0].message;
    }
  }
}

TEST(OptimizersTest, FusedAdamWStepsAsLibTorchsAdamW) {
  for (bool amsgrad : {false, true}) {
    SCOPED_TRACE(amsgrad ? "amsgrad" : "adamw");
    std::vector<at::Tensor> plain = Params(torch::kFloat), fused = Params(torch::kFloat);
    OptimizerPtr a = Build(false, plain, amsgrad), b = Build(true, fused, amsgrad);
    EXPECT_EQ(typeid(*a), typeid(torch::optim::AdamW));
    EXPECT_NE(typeid(*b), typeid(torch::optim::AdamW));  // the fused one is its own class
    Train(*a, plain);
    Train(*b, fused);
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_TRUE(torch::allclose(plain[i], fused[i], 1e-5, 1e-6)) << "parameter " << i;
    }
    EXPECT_FALSE(torch::equal(fused[0], Params(torch::kFloat)[0]));  // it did move
    // The same per-parameter state (what checkpoints save): steps, both moments; none for the gradient-less one.
    ASSERT_EQ(b->state().size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const auto& sa = static_cast<const torch::optim::AdamWParamState&>(*a->state().at(plain[i].unsafeGetTensorImpl()));
      const auto& sb = static_cast<const torch::optim::AdamWParamState&>(*b->state().at(fused[i].unsafeGetTensorImpl()));
      EXPECT_EQ(sb.step(), 5);
      EXPECT_EQ(sa.step(), sb.step());
      EXPECT_TRUE(torch::allclose(sa.exp_avg(), sb.exp_avg(), 1e-5, 1e-7));
      EXPECT_TRUE(torch::allclose(sa.exp_avg_sq(), sb.exp_avg_sq(), 1e-5, 1e-7));
      EXPECT_EQ(sb.max_exp_avg_sq().defined(), amsgrad);
    }
  }
}

// bf16 weights: the fused step computes in float32 and rounds once, so it stays within bf16 rounding of the
// float32 optimizer's result.
TEST(OptimizersTest, FusedAdamWOnBf16StaysWithinRoundingOfFloat32) {
  std::vector<at::Tensor> reference = Params(torch::kFloat), bf16 = Params(torch::kBFloat16);
  OptimizerPtr a = Build(false, reference), b = Build(true, bf16);
  Train(*a, reference);
  Train(*b, bf16);
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_EQ(bf16[i].scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::allclose(bf16[i].to(torch::kFloat), reference[i], 2e-2, 2e-2)) << "parameter " << i;
  }
}

}  // namespace
}  // namespace tmx::recipes
