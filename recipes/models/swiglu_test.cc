#include "recipes/models/swiglu.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>

#include "tests/within_rounding.h"

namespace tmx::models {
namespace {

using tmx::testing::ExpectWithinOneRounding;

TEST(SiluMulTest, OneNodeKeepsSilusValuesForwardAndBackward) {
  for (const c10::ScalarType dtype : {torch::kBFloat16, torch::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    torch::manual_seed(2);
    // Pre-activations as an MLP sees them, and the far tails where exp under- or overflows.
    torch::Tensor values = torch::randn({7, 33, 129}) * 4;
    values.index_put_({0, 0, torch::indexing::Slice(0, 6)},
                      torch::tensor({-200.0f, -88.0f, -87.0f, 87.0f, 89.0f, 200.0f}));
    const torch::Tensor gate = values.to(dtype).requires_grad_();
    const torch::Tensor up = torch::randn({7, 33, 129}).to(dtype).requires_grad_();
    const torch::Tensor g = torch::randn({7, 33, 129}).to(dtype);
    const torch::Tensor y = SiluMul(gate, up);
    const auto grads = torch::autograd::grad({y}, {gate, up}, {g});
    const torch::Tensor expected = SiluMulUnfused(gate, up);
    const auto expected_grads = torch::autograd::grad({expected}, {gate, up}, {g});
    ExpectWithinOneRounding(y, expected, "output");
    ExpectWithinOneRounding(grads[0], expected_grads[0], "gate's gradient");
    ExpectWithinOneRounding(grads[1], expected_grads[1], "up's gradient");
  }
}

// Every finite bf16 gate (the node looks a bf16 gate's silu and derivative up in tables of all 65536 values): the
// output and both gradients within one rounding of ATen's, compared in groups of one sign and exponent, so each
// group's tolerance is on its own scale.
TEST(SiluMulTest, EveryFiniteBf16GateHasSilusValues) {
  const torch::Tensor patterns = torch::arange(65536, torch::kInt32).to(torch::kInt16).view(torch::kBFloat16);
  const torch::Tensor finite = patterns.masked_select(torch::isfinite(patterns));
  ASSERT_EQ(finite.numel(), 65280);  // 2 x 255 exponents x 128 mantissas
  torch::manual_seed(4);
  const torch::Tensor gate = finite.reshape({510, 128}).requires_grad_();
  // up and the gradient within [-1, 1], so no product overflows next to the largest gates.
  const torch::Tensor up = (torch::rand({510, 128}) * 2 - 1).to(torch::kBFloat16).requires_grad_();
  const torch::Tensor g = (torch::rand({510, 128}) * 2 - 1).to(torch::kBFloat16);
  const torch::Tensor y = SiluMul(gate, up);
  const auto grads = torch::autograd::grad({y}, {gate, up}, {g});
  const torch::Tensor expected = SiluMulUnfused(gate, up);
  const auto expected_grads = torch::autograd::grad({expected}, {gate, up}, {g});
  for (int64_t row = 0; row < 510; ++row) {
    const std::string group = "gates from " + std::to_string(gate[row][0].item<float>());
    ExpectWithinOneRounding(y[row], expected[row], "output, " + group);
    ExpectWithinOneRounding(grads[0][row], expected_grads[0][row], "gate's gradient, " + group);
    ExpectWithinOneRounding(grads[1][row], expected_grads[1][row], "up's gradient, " + group);
  }
}

// Infinities, huge values and NaN give ATen's silu's results: 0 far below zero, the value far above it, NaN at
// -inf (-inf / inf) and for NaN.
TEST(SiluMulTest, TailsAndNaNsAreSilus) {
  const float inf = std::numeric_limits<float>::infinity();
  const torch::Tensor gate = torch::tensor({-inf, -1000.0f, 0.0f, 1000.0f, inf, std::nanf("")});
  const torch::Tensor y = SiluMul(gate, torch::ones({6}));
  const torch::Tensor expected = SiluMulUnfused(gate, torch::ones({6}));
  EXPECT_TRUE(torch::allclose(y, expected, 1e-6, 0, /*equal_nan=*/true)) << y << expected;
  EXPECT_EQ(y[1].item<float>(), 0.0f);
  EXPECT_EQ(y[3].item<float>(), 1000.0f);
  EXPECT_EQ(y[4].item<float>(), inf);
  EXPECT_TRUE(std::isnan(y[5].item<float>()));
}

// Only the gradients needed: a frozen `up` gets none; strided inputs give the contiguous inputs' values.
TEST(SiluMulTest, StridedInputsAndOneGradient) {
  torch::manual_seed(3);
  const torch::Tensor gate = torch::randn({16, 8}).to(torch::kBFloat16).t().requires_grad_();
  const torch::Tensor up = torch::randn({8, 16}).to(torch::kBFloat16);
  const torch::Tensor y = SiluMul(gate, up);
  EXPECT_TRUE(torch::equal(y, SiluMul(gate.detach().contiguous(), up)));
  y.sum().backward();
  EXPECT_TRUE(gate.grad().defined());
  EXPECT_EQ(gate.grad().sizes(), gate.sizes());
}

}  // namespace
}  // namespace tmx::models
