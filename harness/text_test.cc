#include "harness/text.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(TextTest, EditDistance) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("lora_rank", "lora_rnak"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(TextTest, ClosestMatchSuggestsOnlyPlausibleTypos) {
  std::vector<std::string> keys = {"lora_rank", "lora_alpha", "batch_size", "device"};
  EXPECT_EQ(ClosestMatch("lora_rnk", keys), "lora_rank");
  EXPECT_EQ(ClosestMatch("devcie", keys), "device");
  EXPECT_EQ(ClosestMatch("batch", keys), "batch_size");  // a prefix counts
  EXPECT_EQ(ClosestMatch("completely_different", keys), "");
}

TEST(TextTest, Formats) {
  EXPECT_EQ(FormatBytes(17), "17 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.00 GiB");
  EXPECT_EQ(FormatDuration(0.25), "0s");
  EXPECT_EQ(FormatDuration(12.6), "13s");
  EXPECT_EQ(FormatDuration(245), "4m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m00s");
  EXPECT_EQ(FormatDuration(-3), "0s");
}

}  // namespace
}  // namespace tmx
