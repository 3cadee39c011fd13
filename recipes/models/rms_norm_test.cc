#include "recipes/models/rms_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "tests/within_rounding.h"

namespace tmx::models {
namespace {

using tmx::testing::ExpectWithinOneRounding;

TEST(RmsNormTest, OneNodeKeepsTorchtunesFormulaForwardAndBackward) {
  for (const bool plus_one : {false, true}) {
    for (const c10::ScalarType dtype : {torch::kBFloat16, torch::kFloat}) {
      for (const int64_t width : {64, 896, 2048, 37}) {  // 37: no full block of 16 partial sums
        const std::string what = std::to_string(width) + (plus_one ? " plus one " : " ") + c10::toString(dtype);
        SCOPED_TRACE(what);
        torch::manual_seed(width);
        const torch::Tensor scale = (torch::randn({width}) * 0.1 + (plus_one ? 0 : 1)).to(dtype).requires_grad_();
        const torch::Tensor x = (torch::randn({3, 37, width}) * 3).to(dtype).requires_grad_();
        const torch::Tensor g = torch::randn({3, 37, width}).to(dtype);
        const torch::Tensor y = RmsNorm(x, scale, 1e-6, plus_one);
        const auto grads = torch::autograd::grad({y}, {x, scale}, {g});
        const torch::Tensor expected = RmsNormUnfused(x, scale, 1e-6, plus_one);
        const auto expected_grads = torch::autograd::grad({expected}, {x, scale}, {g});
        ExpectWithinOneRounding(y, expected, "output");
        ExpectWithinOneRounding(grads[0], expected_grads[0], "input's gradient");
        ExpectWithinOneRounding(grads[1], expected_grads[1], "scale's gradient");
      }
    }
  }
}

// A frozen scale (LoRA) and a frozen input (the first layer's, below a frozen embedding) get no gradient; a
// non-contiguous input gives the contiguous input's values.
TEST(RmsNormTest, OnlyTheGradientsNeededAreTakenAndStridesDoNotMatter) {
  torch::manual_seed(1);
  const torch::Tensor scale = torch::randn({64}).to(torch::kBFloat16);
  const torch::Tensor base = torch::randn({64, 10}).to(torch::kBFloat16);
  const torch::Tensor x = base.t().requires_grad_();  // [10, 64], rows strided
  const torch::Tensor y = RmsNorm(x, scale, 1e-5, false);
  EXPECT_TRUE(torch::equal(y, RmsNorm(x.detach().contiguous(), scale, 1e-5, false)));
  y.backward(torch::ones_like(y));
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(scale.grad().defined());

  const torch::Tensor w = scale.clone().requires_grad_();
  const torch::Tensor frozen_input = base.t().contiguous();
  RmsNorm(frozen_input, w, 1e-5, false).sum().backward();
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(frozen_input.grad().defined());
}

// The residual add and the norm in one node give exactly what the add and then RmsNorm give, forward and backward:
// h, y, and the gradients of x, the addend and the scale, with gradients reaching both outputs (the decoder
// layer's case: h feeds the next residual add), y alone, or h alone.
TEST(RmsNormTest, AddAndNormInOneNodeGiveTheBitsOfTheAddThenTheNorm) {
  for (const bool plus_one : {false, true}) {
    for (const c10::ScalarType dtype : {torch::kBFloat16, torch::kFloat}) {
      for (const int64_t width : {2048, 37}) {
        for (const int outputs : {3, 2, 1}) {  // bits: 2 = y's gradient, 1 = h's
          SCOPED_TRACE(std::to_string(width) + (plus_one ? " plus one " : " ") + c10::toString(dtype) +
                       " outputs " + std::to_string(outputs));
          torch::manual_seed(width + outputs);
          const torch::Tensor scale = (torch::randn({width}) * 0.1 + (plus_one ? 0 : 1)).to(dtype).requires_grad_();
          const torch::Tensor x = (torch::randn({2, 5, width}) * 3).to(dtype).requires_grad_();
          const torch::Tensor a = torch::randn({2, 5, width}).to(dtype).requires_grad_();
          const torch::Tensor gh = torch::randn({2, 5, width}).to(dtype);
          const torch::Tensor gy = torch::randn({2, 5, width}).to(dtype);
          const auto run = [&](const torch::Tensor& h, const torch::Tensor& y) {
            std::vector<torch::Tensor> out, grad;
            if (outputs & 1) out.push_back(h), grad.push_back(gh);
            if (outputs & 2) out.push_back(y), grad.push_back(gy);
            return torch::autograd::grad(out, {x, a, scale}, grad, /*retain_graph=*/false, /*create_graph=*/false,
                                         /*allow_unused=*/true);
          };
          const auto [h, y] = AddRmsNorm(x, a, scale, 1e-6, plus_one);
          const torch::Tensor expected_h = x + a;
          const torch::Tensor expected_y = RmsNorm(expected_h, scale, 1e-6, plus_one);
          EXPECT_TRUE(torch::equal(h, expected_h));
          EXPECT_TRUE(torch::equal(y, expected_y));
          const auto grads = run(h, y);
          const auto expected = run(expected_h, expected_y);
          EXPECT_TRUE(torch::equal(grads[0], expected[0])) << "x's gradient";
          EXPECT_TRUE(torch::equal(grads[1], expected[1])) << "the addend's gradient";
          ASSERT_EQ(grads[2].defined(), expected[2].defined());
          if (grads[2].defined()) EXPECT_TRUE(torch::equal(grads[2], expected[2])) << "the scale's gradient";
        }
      }
    }
  }
}

// A frozen residual stream (the first layer's, below a frozen embedding) gets no gradient; the addend still does.
TEST(RmsNormTest, AddAndNormGiveOnlyTheGradientsNeeded) {
  torch::manual_seed(2);
  const torch::Tensor scale = torch::randn({64}).to(torch::kBFloat16);
  const torch::Tensor x = torch::randn({3, 64}).to(torch::kBFloat16);
  const torch::Tensor a = torch::randn({3, 64}).to(torch::kBFloat16).requires_grad_();
  const auto [h, y] = AddRmsNorm(x, a, scale, 1e-5, false);
  (h.sum() + y.sum()).backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(scale.grad().defined());
  ASSERT_TRUE(a.grad().defined());
  EXPECT_TRUE(a.grad().ne(0).any().item<bool>());
}

// The row's statistics are float32 whatever the dtype: a bf16 row of large values neither overflows nor loses
// its scale, and the result is each element over the row's root mean square.
TEST(RmsNormTest, NormalisesEachRowByItsRootMeanSquare) {
  const torch::Tensor x = torch::tensor({{3.0f, -4.0f, 0.0f, 0.0f}, {3000.0f, 4000.0f, 0.0f, 0.0f}});
  const torch::Tensor y = RmsNorm(x.to(torch::kBFloat16), torch::ones({4}, torch::kBFloat16), 0, false);
  // rms of (3, -4, 0, 0) is 2.5, of (3000, 4000, 0, 0) 2500.
  const torch::Tensor expected = torch::tensor({{1.2f, -1.6f, 0.0f, 0.0f}, {1.2f, 1.6f, 0.0f, 0.0f}});
  EXPECT_TRUE(torch::allclose(y.to(torch::kFloat), expected, 1e-2, 0)) << y;
}

}  // namespace
}  // namespace tmx::models
