// A test assertion for kernels whose float32 arithmetic differs from ATen's in the last place (another order of
// a sum, another exp): in float32 the results agree to a few units in the last place; in bf16 an element rounds
// apart only where the two float32 values straddle a rounding boundary, by one bf16 unit, in a small fraction of
// the elements.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

namespace tmx::testing {

// Each element of `actual` within one unit of `expected`'s dtype (float32: 1e-5 relative; bf16: 2^-8 relative,
// one rounding) of the larger of the two, or of 1e-6 of the tensor's largest value near zero (where terms cancel);
// in bf16, at most 2% of the elements different at all.
inline void ExpectWithinOneRounding(const torch::Tensor& actual, const torch::Tensor& expected,
                                    const std::string& what) {
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type()) << what;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const torch::Tensor a = actual.detach().to(torch::kFloat), e = expected.detach().to(torch::kFloat);
  const torch::Tensor off = (a - e).abs();
  const bool fp32 = actual.scalar_type() == torch::kFloat;
  const double floor = 1e-6 * e.abs().max().item<double>() + 1e-30;
  const torch::Tensor unit = torch::maximum(a.abs(), e.abs()) * (fp32 ? 1e-5 : std::ldexp(1.0, -7)) + floor;
  EXPECT_TRUE((off <= unit).all().item<bool>()) << what << ": largest difference " << off.max().item<double>();
  if (fp32) return;
  const double differing = (off > 0).to(torch::kFloat).mean().item<double>();
  EXPECT_LT(differing, 0.02) << what << ": " << differing * 100 << "% of the elements differ";
}

}  // namespace tmx::testing
