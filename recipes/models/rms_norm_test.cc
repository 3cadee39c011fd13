#include "recipes/models/rms_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

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
