#include "base/stats.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(StatsTest, Median) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3.0}), 3.0);
  EXPECT_EQ(Median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(Median({4.0, 1.0, 2.0, 3.0}), 2.5);
}

TEST(StatsTest, MedianAfterSkipsWarmupUnlessNothingWouldRemain) {
  EXPECT_EQ(MedianAfter({100.0, 1.0, 3.0}, 1), 2.0);
  EXPECT_EQ(MedianAfter({100.0}, 1), 100.0);
  EXPECT_EQ(MedianAfter({100.0, 2.0}, 5), 51.0);
}

}  // namespace
}  // namespace tmx
