#include "recipes/checkpoint/quantized_values.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "recipes/checkpoint/safetensors.h"
#include "tests/scratch_dir.h"

namespace tmx::checkpoint {
namespace {

using ::testing::HasSubstr;

// One quantised linear as the quantize recipe saves it: int8 codes [2, 4] in groups of 2, float32 scales [2, 2].
NamedTensors Int4Linear(at::Tensor codes, at::Tensor scales) {
  return {{"layers.0.attn.q_proj.weight", std::move(codes)}, {"layers.0.attn.q_proj.scales", std::move(scales)}};
}

at::Tensor GoodCodes() { return torch::tensor({-8, 7, 0, 3, 1, -1, 2, -2}, torch::kChar).view({2, 4}); }
at::Tensor GoodScales() { return torch::tensor({0.5f, 0.25f, 1.0f, 2.0f}).view({2, 2}); }

class QuantizedValuesTest : public ::testing::Test {
 protected:
  // Saves `tensors` and loads them back: the load is where the values are checked.
  Status SaveAndLoad(const NamedTensors& tensors) {
    const std::string path = scratch_.path() + "/model-8da4w.safetensors";
    EXPECT_TRUE(SaveSafetensors(path, tensors, {{"quantization", "8da4w"}}).ok());
    return LoadSafetensors(path).status();
  }
  test::ScratchDir scratch_{"tm_quantized_values_test"};
};

TEST_F(QuantizedValuesTest, AGoodQuantisedLinearLoads) {
  EXPECT_TRUE(SaveAndLoad(Int4Linear(GoodCodes(), GoodScales())).ok());
  // Plain float weights and integer tensors without scales are not int4 codes.
  EXPECT_TRUE(SaveAndLoad({{"tok.weight", torch::full({2, 2}, 100.0f)}, {"ids", torch::full({2}, 99, torch::kInt)}})
                  .ok());
}

TEST_F(QuantizedValuesTest, ScalesThatAreNotFiniteOrNotPositiveAreRefusedNamingFileAndTensor) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf, -inf, 0.0f, -0.5f}) {
    at::Tensor scales = GoodScales();
    scales[1][0] = bad;
    Status s = SaveAndLoad(Int4Linear(GoodCodes(), scales));
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("/model-8da4w.safetensors: tensor 'layers.0.attn.q_proj.scales': 1 of 4 "
                                       "scales are not finite numbers above 0 (the first, at index 2, is"));
    EXPECT_THAT(s.message(), HasSubstr("fix: quantise the model again (tune run quantize)"));
  }
}

TEST_F(QuantizedValuesTest, CodesOutsideTheInt4GridAreRefusedNamingFileAndTensor) {
  for (int bad : {8, -9, 127, -128}) {
    at::Tensor codes = GoodCodes();
    codes[0][2] = bad;
    Status s = SaveAndLoad(Int4Linear(codes, GoodScales()));
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("/model-8da4w.safetensors: tensor 'layers.0.attn.q_proj.weight': int4 codes "
                                       "range from " + std::to_string(std::min(bad, -8)) + " to " +
                                       std::to_string(std::max(bad, 7)) + ", outside the int4 grid [-8, 7]"));
  }
}

}  // namespace
}  // namespace tmx::checkpoint
