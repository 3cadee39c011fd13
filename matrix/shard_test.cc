#include "matrix/shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace tmx::matrix {
namespace {

std::vector<ShardItem> Items() {
  std::vector<ShardItem> items;
  const double durations[] = {340, 25, 620, 1.5, 0, 0, 95, 95, 410, 3, 12, 0, 780, 60};
  for (size_t i = 0; i < std::size(durations); ++i) {
    items.push_back({{"config" + std::to_string(i), i % 2 ? "cpu" : "cuda:0"}, durations[i]});
  }
  return items;
}

TEST(ParseShardTest, AcceptsIOfNAndRejectsTheRestNamingTheText) {
  StatusOr<ShardSpec> s = ParseShard("2/3");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 3);
  for (const char* bad : {"", "3", "0/2", "3/2", "1/0", "a/b", "1/2/3", "-1/2", "/2", "1/", " 1/2"}) {
    StatusOr<ShardSpec> r = ParseShard(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "' is not a shard"), std::string::npos)
        << r.status().message();
  }
}

TEST(AssignShardsTest, EveryCellInExactlyOneShardForAnyCount) {
  std::vector<ShardItem> items = Items();
  for (int n = 1; n <= 6; ++n) {
    std::vector<int> shard = AssignShards(items, n);
    ASSERT_EQ(shard.size(), items.size());
    std::map<int, int> per_shard;
    for (int s : shard) {
      EXPECT_GE(s, 1);
      EXPECT_LE(s, n);
      ++per_shard[s];
    }
    EXPECT_EQ(static_cast<int>(per_shard.size()), std::min<int>(n, static_cast<int>(items.size()))) << n;
  }
}

TEST(AssignShardsTest, BalancedByDurationWithinTheLongestCell) {
  std::vector<ShardItem> items = Items();
  double total = 0, longest = 0;
  for (const ShardItem& i : items) {
    total += i.duration_s;
    longest = std::max(longest, i.duration_s);
  }
  for (int n = 2; n <= 4; ++n) {
    std::vector<int> shard = AssignShards(items, n);
    std::vector<double> load(static_cast<size_t>(n), 0);
    for (size_t i = 0; i < items.size(); ++i) load[static_cast<size_t>(shard[i] - 1)] += items[i].duration_s;
    double max_load = *std::max_element(load.begin(), load.end());
    EXPECT_LE(max_load, total / n + longest) << n;
  }
  // Two shards of these durations: the greedy split is 1210 / 1231.5 (the ideal is 1220.75).
  std::vector<int> two = AssignShards(items, 2);
  double first = 0;
  for (size_t i = 0; i < items.size(); ++i) first += two[i] == 1 ? items[i].duration_s : 0;
  EXPECT_LE(std::abs(first - (total - first)), 25.0) << first;
}

TEST(AssignShardsTest, DeterministicWhateverTheInputOrder) {
  std::vector<ShardItem> items = Items();
  std::vector<int> a = AssignShards(items, 3);
  std::map<CellKey, int> by_key;
  for (size_t i = 0; i < items.size(); ++i) by_key[items[i].key] = a[i];
  std::reverse(items.begin(), items.end());
  std::rotate(items.begin(), items.begin() + 5, items.end());
  std::vector<int> b = AssignShards(items, 3);
  for (size_t i = 0; i < items.size(); ++i) EXPECT_EQ(b[i], by_key[items[i].key]) << items[i].key.config;
}

TEST(AssignShardsTest, ZeroDurationCellsAreSpreadByCount) {
  std::vector<ShardItem> items;
  for (int i = 0; i < 6; ++i) items.push_back({{"c" + std::to_string(i), "cpu"}, 0});
  std::vector<int> shard = AssignShards(items, 3);
  EXPECT_EQ(std::count(shard.begin(), shard.end(), 1), 2);
  EXPECT_EQ(std::count(shard.begin(), shard.end(), 2), 2);
  EXPECT_EQ(std::count(shard.begin(), shard.end(), 3), 2);
}

}  // namespace
}  // namespace tmx::matrix
