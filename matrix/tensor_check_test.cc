#include "matrix/tensor_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tmx::matrix {
namespace {

// A probe of `dtype` with one batch, logits, and a parameter "layers.0.w" (its weight, gradient and stepped
// values), the gradient and the update scaled by `gradient_scale` and `update_scale`.
NumericProbe Probe(const std::string& dtype, double gradient_scale = 1, double update_scale = 1) {
  NumericProbe p;
  p.dtype = dtype;
  p.tensors.push_back({"batch", "batch", {5, 7, 9}});
  std::vector<float> logits, weight, gradient, stepped;
  for (int i = 0; i < 64; ++i) {
    logits.push_back(std::sin(0.3f * i));
    weight.push_back(i % 2 ? 0.0f : 1e-7f * i);  // small enough for a 1e-4 update to show in bf16
    gradient.push_back(static_cast<float>(gradient_scale * std::cos(0.7 * i)));
    stepped.push_back(static_cast<float>(weight.back() - update_scale * 1e-4 * (i % 3 ? 1 : -1)));
  }
  p.tensors.push_back({"logits", "logits", logits});
  p.tensors.push_back({"layers.0.w", "weight", weight});
  p.tensors.push_back({"layers.0.w", "gradient", gradient});
  p.tensors.push_back({"layers.0.w", "stepped", stepped});
  return p;
}

TEST(TensorCheckTest, TheSameTensorsAreWithinTolerance) {
  const TensorComparison c = CompareProbes(Probe("bf16"), Probe("fp32"));
  EXPECT_TRUE(c.problem.empty()) << c.problem;
  EXPECT_EQ(c.compared, 4u);  // logits, a starting weight, a gradient, an update
  ASSERT_TRUE(c.worst);
  EXPECT_FALSE(c.wrong());
  EXPECT_EQ(c.worst->error, 0);
  EXPECT_NEAR(c.worst->cosine, 1, 1e-12);
}

TEST(TensorCheckTest, AGradientOffByTenPercentIsNamed) {
  const TensorComparison c = CompareProbes(Probe("bf16", 1.1), Probe("fp32"));
  ASSERT_TRUE(c.wrong());
  EXPECT_EQ(c.worst->name, "layers.0.w gradient");
  EXPECT_NEAR(c.worst->error, 0.1, 1e-6);
  EXPECT_EQ(c.worst->Describe(), "layers.0.w gradient: relative error 0.1 > " +
                                     std::to_string(TensorToleranceFor("bf16").gradient).substr(0, 4));
}

TEST(TensorCheckTest, AnUpdateOffByTenPercentIsSeenByItsNorm) {
  const TensorComparison c = CompareProbes(Probe("bf16", 1, 1.1), Probe("fp32"));
  ASSERT_TRUE(c.wrong());
  EXPECT_EQ(c.worst->name, "layers.0.w update");
  EXPECT_NEAR(c.worst->error, 0.1, 1e-3);
}

TEST(TensorCheckTest, ANonFiniteValueIsAnInfiniteError) {
  NumericProbe bad = Probe("bf16");
  bad.tensors[1].values[3] = std::numeric_limits<float>::quiet_NaN();
  const TensorComparison c = CompareProbes(bad, Probe("fp32"));
  ASSERT_TRUE(c.wrong());
  EXPECT_EQ(c.worst->name, "logits");
  EXPECT_EQ(c.worst->error, std::numeric_limits<double>::infinity());
  EXPECT_EQ(c.worst->Describe(), "logits: relative error inf > " +
                                     std::to_string(TensorToleranceFor("bf16").logits).substr(0, 4));
}

TEST(TensorCheckTest, DifferentBatchesAreNotCompared) {
  NumericProbe other = Probe("bf16");
  other.tensors[0].values[0] = 6;
  const TensorComparison c = CompareProbes(other, Probe("fp32"));
  EXPECT_FALSE(c.wrong());
  EXPECT_EQ(c.compared, 0u);
  EXPECT_EQ(c.problem, "the two runs' first batches differ (they must train on the same tokens)");
}

TEST(TensorCheckTest, ReducedPrecisionIsAllowedMoreThanFloat32) {
  const TensorTolerance bf16 = TensorToleranceFor("bf16"), fp32 = TensorToleranceFor("fp32");
  EXPECT_GT(bf16.logits, fp32.logits);
  EXPECT_GT(bf16.gradient, fp32.gradient);
  EXPECT_GT(bf16.update_norm, fp32.update_norm);
  EXPECT_LT(bf16.min_cosine, fp32.min_cosine);
}

// A generation's probe: logits whose RMS is 1 (so bf16's near tie is 2 x 0.03 x 1 = 0.06), its greedy tokens and
// each step's top-2 margin.
NumericProbe Greedy(const std::string& dtype, std::vector<float> tokens, std::vector<float> margins) {
  return {dtype, false,
          {{"batch", "batch", {1, 2}}, {"logits", "logits", {1, -1, 1, -1}}, {"greedy", "tokens", std::move(tokens)},
           {"greedy", "margins", std::move(margins)}}};
}

TEST(TensorCheckTest, GreedyTokensAgreeDifferAfterANearTieOrAreWrong) {
  const NumericProbe reference = Greedy("fp32", {5, 6, 7, 8}, {2, 2, 0.05f, 2});
  GreedyComparison same = CompareGreedy(Greedy("bf16", {5, 6, 7, 8}, {2, 2, 0.05f, 2}), reference);
  EXPECT_FALSE(same.wrong());
  EXPECT_EQ(same.Describe(reference, reference), "greedy tokens equal for all 4");
  // The third step's margin 0.05 is within bf16's near tie (0.06): the rest is not compared, and it is no verdict.
  const NumericProbe tie = Greedy("bf16", {5, 6, 9, 1}, {2, 2, 0.04f, 2});
  GreedyComparison parted = CompareGreedy(tie, reference);
  EXPECT_FALSE(parted.wrong());
  EXPECT_EQ(parted.agreed, 2u);
  EXPECT_EQ(parted.Describe(tie, reference),
            "greedy tokens equal for the first 2 of 4, then a near tie (top-2 margin 0.04 <= 0.06; the rest not compared)");
  // The second step's margin 2 is far from a tie: a different token there is wrong.
  const NumericProbe wrong = Greedy("bf16", {5, 9, 7, 8}, {2, 2, 0.05f, 2});
  GreedyComparison off = CompareGreedy(wrong, reference);
  EXPECT_TRUE(off.wrong());
  EXPECT_EQ(off.Describe(wrong, reference), "greedy token 2 of 4 is 9 against the reference's 6 (top-2 margin 2 > 0.06)");
  // float32 against float32 is allowed next to no margin: the same near tie is a wrong token there.
  EXPECT_TRUE(CompareGreedy(Greedy("fp32", {5, 6, 9, 1}, {2, 2, 0.04f, 2}), reference).wrong());
  EXPECT_EQ(CompareGreedy(NumericProbe{"bf16", false, {}}, reference).problem,
            "a probe without its greedy tokens, margins or logits");
}

}  // namespace
}  // namespace tmx::matrix
