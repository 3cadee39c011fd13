#include "matrix/lanes.h"

#include <gtest/gtest.h>

namespace tmx::matrix {
namespace {

TEST(LanesTest, TheDefaultLeavesCoresToAcceleratorsAndGivesEachLaneFour) {
  EXPECT_EQ(DefaultCpuLanes(2, 0), 1);
  EXPECT_EQ(DefaultCpuLanes(8, 0), 2);
  EXPECT_EQ(DefaultCpuLanes(16, 1), 3);  // 14 cores after the GPU's 2
  EXPECT_EQ(DefaultCpuLanes(4, 2), 1);   // never none
}

TEST(LanesTest, SplitsTheCpusIntoConsecutiveLanesOfNearlyEqualSize) {
  std::vector<CpuLane> lanes = PlanLanes({0, 1, 2, 3, 4}, 2);
  ASSERT_EQ(lanes.size(), 2u);
  EXPECT_EQ(lanes[0].name, "cpu#0");
  EXPECT_EQ(lanes[0].cpus, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(lanes[1].name, "cpu#1");
  EXPECT_EQ(lanes[1].cpus, (std::vector<int>{3, 4}));
  EXPECT_EQ(PlanLanes({4, 6}, 5).size(), 2u);  // one lane per CPU at most
  EXPECT_EQ(PlanLanes({4, 6}, 5)[1].cpus, (std::vector<int>{6}));
  // One lane is the machine as it is: the device's own lane name, nothing pinned.
  std::vector<CpuLane> one = PlanLanes({0, 1}, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "cpu");
  EXPECT_TRUE(one[0].cpus.empty());
  EXPECT_EQ(PlanLanes({}, 3).size(), 1u);
}

}  // namespace
}  // namespace tmx::matrix
