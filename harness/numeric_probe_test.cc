#include "harness/numeric_probe.h"

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

TEST(NumericProbeTest, WritesAndReadsBackEveryTensor) {
  test::ScratchDir scratch;
  const std::string path = scratch.path() + "/numeric_probe.bin";
  NumericProbe probe{"bf16", true, {{"batch", "batch", {1, 2, 3}}, {"layers.0.w", "gradient", {0.5f, -1e-8f}}}};
  ASSERT_TRUE(WriteNumericProbe(path, probe).ok());
  StatusOr<NumericProbe> read = ReadNumericProbe(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->dtype, "bf16");
  EXPECT_TRUE(read->quantized);
  ASSERT_EQ(read->tensors.size(), 2u);
  const ProbeTensor* g = read->Find("layers.0.w", "gradient");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->values, (std::vector<float>{0.5f, -1e-8f}));
  EXPECT_EQ(read->Find("layers.0.w", "weight"), nullptr);
}

TEST(NumericProbeTest, AFileCutShortOrMissingIsNamed) {
  test::ScratchDir scratch;
  const std::string path = scratch.path() + "/cut.bin";
  ASSERT_TRUE(WriteNumericProbe(path, {"fp32", false, {{"logits", "logits", {1, 2, 3, 4}}}}).ok());
  StatusOr<std::string> text = ReadFile(path);
  ASSERT_TRUE(WriteFileAtomically(path, text->substr(0, text->size() - 2)).ok());
  StatusOr<NumericProbe> read = ReadNumericProbe(path);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(path + ": not a numeric probe (cut short at logits)"), std::string::npos)
      << read.status().ToString();
  EXPECT_EQ(ReadNumericProbe(scratch.path() + "/none.bin").status().code(), Status::Code::kNotFound);
}

TEST(NumericProbeTest, LargeTensorsAreSampledAtAnEvenStride) {
  EXPECT_EQ(ProbeSampleIndices(3), (std::vector<int64_t>{0, 1, 2}));
  const std::vector<int64_t> big = ProbeSampleIndices(4 * kProbeSampleElements);
  ASSERT_EQ(big.size(), static_cast<size_t>(kProbeSampleElements));
  EXPECT_EQ(big[1], 4);
  EXPECT_EQ(big.back(), 4 * (kProbeSampleElements - 1));
}

}  // namespace
}  // namespace tmx
