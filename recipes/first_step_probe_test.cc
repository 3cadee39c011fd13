#include "recipes/first_step_probe.h"

#include <gtest/gtest.h>

#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

TEST(FirstStepProbeTest, SamplesEveryElementOfASmallTensorAndAStrideOfALargeOne) {
  EXPECT_EQ(FirstStepProbe::Sample(torch::tensor({1.5, -2.0, 3.0}).to(torch::kBFloat16)),
            (std::vector<float>{1.5f, -2.0f, 3.0f}));
  const torch::Tensor big = torch::arange(2 * kProbeSampleElements, torch::kFloat).reshape({2, -1});
  const std::vector<float> sampled = FirstStepProbe::Sample(big);
  ASSERT_EQ(sampled.size(), static_cast<size_t>(kProbeSampleElements));
  EXPECT_EQ(sampled[1], 2.0f);
  EXPECT_EQ(sampled.back(), 2.0f * (kProbeSampleElements - 1));
}

TEST(FirstStepProbeTest, WritesTheBatchLogitsAndEachParametersTensors) {
  test::ScratchDir scratch;
  torch::Tensor w = torch::ones({2, 2}, torch::requires_grad());
  torch::Tensor without_gradient = torch::zeros({2}, torch::requires_grad());
  (w * 3).sum().backward();
  const NamedParameters trained = {{"w", w}, {"b", without_gradient}};
  FirstStepProbe probe("bf16", true);
  probe.AddBatch(torch::tensor({7, 8}), torch::tensor({0.25, 0.5}));
  probe.AddParameters(trained, "weight");
  probe.AddParameters(trained, "gradient");
  ASSERT_TRUE(probe.Write(scratch.path()).ok());
  StatusOr<NumericProbe> read = ReadNumericProbe(scratch.path() + "/" + kNumericProbeFile);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->dtype, "bf16");
  EXPECT_TRUE(read->quantized);
  EXPECT_EQ(read->Find("batch", "batch")->values, (std::vector<float>{7, 8}));
  EXPECT_EQ(read->Find("logits", "logits")->values, (std::vector<float>{0.25f, 0.5f}));
  EXPECT_EQ(read->Find("w", "gradient")->values, (std::vector<float>{3, 3, 3, 3}));
  EXPECT_NE(read->Find("b", "weight"), nullptr);
  EXPECT_EQ(read->Find("b", "gradient"), nullptr);  // no gradient: left out
}

}  // namespace
}  // namespace tmx::recipes
