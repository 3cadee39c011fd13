#include "harness/dtypes.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(DtypesTest, EachRowSaysItsNamesSizeAndPrecision) {
  ASSERT_EQ(DtypeNames(), (std::vector<std::string>{"fp32", "bf16", "fp16"}));
  const DtypeInfo* bf16 = FindDtype("bf16");
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->hf_name, "bfloat16");
  EXPECT_EQ(bf16->element_bytes, 2);
  EXPECT_EQ(bf16->mantissa_bits, 7);
  EXPECT_EQ(FindDtype("fp16")->mantissa_bits, 10);
  EXPECT_EQ(FindDtype("fp32")->hf_name, "float32");
  EXPECT_EQ(FindDtype("fp32")->element_bytes, 4);
  EXPECT_TRUE(ReducedPrecision("bf16"));
  EXPECT_TRUE(ReducedPrecision("fp16"));
  EXPECT_FALSE(ReducedPrecision("fp32"));
  EXPECT_FALSE(ReducedPrecision("bfloat16")) << "a config spells it bf16";
  EXPECT_EQ(FindDtype("float32"), nullptr);
}

}  // namespace
}  // namespace tmx
