#include "recipes/data/mixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace tmx::data {
namespace {

std::vector<int64_t> CountsByDataset(const std::vector<MixedSample>& mix, size_t datasets, size_t first_n) {
  std::vector<int64_t> counts(datasets, 0);
  for (size_t i = 0; i < std::min(first_n, mix.size()); ++i) ++counts[static_cast<size_t>(mix[i].dataset)];
  return counts;
}

// Weights 3 : 1 : 4 draw the datasets in those proportions: over the first 4000 draws of a fixed seed (before any
// dataset can run out) each share is within 3 standard deviations of weight / 8.
TEST(MixtureTest, DrawsInTheProportionsOfTheWeights) {
  MixtureOptions options;
  options.seed = 7;
  StatusOr<std::vector<MixedSample>> mix = MixDatasets({5000, 5000, 5000}, {3.0, 1.0, 4.0}, options);
  ASSERT_TRUE(mix.ok()) << mix.status().ToString();
  const std::vector<int64_t> counts = CountsByDataset(*mix, 3, 4000);
  const double expected[] = {3.0 / 8, 1.0 / 8, 4.0 / 8};
  for (size_t d = 0; d < 3; ++d) {
    const double share = static_cast<double>(counts[d]) / 4000;
    const double sd = std::sqrt(expected[d] * (1 - expected[d]) / 4000);
    EXPECT_NEAR(share, expected[d], 3 * sd) << "dataset " << d << ": " << counts[d] << " of 4000";
  }
  // The same seed gives the same order; another seed another one.
  EXPECT_EQ(CountsByDataset(*MixDatasets({5000, 5000, 5000}, {3.0, 1.0, 4.0}, options), 3, 4000), counts);
  options.seed = 8;
  EXPECT_NE(CountsByDataset(*MixDatasets({5000, 5000, 5000}, {3.0, 1.0, 4.0}, options), 3, 4000), counts);
}

// ALL_DATASETS_EXHAUSTED yields every sample of every dataset exactly once; a dataset's samples come in its own
// order: its seeded permutation, or 0, 1, 2, ... unshuffled.
TEST(MixtureTest, AllDatasetsExhaustedYieldsEachSampleOnce) {
  for (bool shuffle : {true, false}) {
    MixtureOptions options;
    options.stop = StopCriteria::kAllDatasetsExhausted;
    options.shuffle = shuffle;
    StatusOr<std::vector<MixedSample>> mix = MixDatasets({30, 5}, {1.0, 1.0}, options);
    ASSERT_TRUE(mix.ok()) << mix.status().ToString();
    ASSERT_EQ(mix->size(), 35u);
    std::map<int64_t, std::vector<int64_t>> by_dataset;
    for (const MixedSample& s : *mix) by_dataset[s.dataset].push_back(s.index);
    ASSERT_EQ(by_dataset[0].size(), 30u);
    ASSERT_EQ(by_dataset[1].size(), 5u);
    EXPECT_EQ(std::set<int64_t>(by_dataset[0].begin(), by_dataset[0].end()).size(), 30u);
    EXPECT_EQ(std::set<int64_t>(by_dataset[1].begin(), by_dataset[1].end()).size(), 5u);
    if (!shuffle) EXPECT_EQ(by_dataset[1], (std::vector<int64_t>{0, 1, 2, 3, 4}));
  }
}

// CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED (torchtune's default) starts a small dataset again while a large one still
// has samples, and ends once the large one has been found at its end: each of its samples once, the small one's
// several times, each pass of it whole before the next. FIRST_DATASET_EXHAUSTED ends at the small one's end.
TEST(MixtureTest, CycleRepeatsTheSmallDatasetAndFirstExhaustedStopsAtIt) {
  MixtureOptions options;
  options.seed = 3;
  StatusOr<std::vector<MixedSample>> cycle = MixDatasets({40, 4}, {1.0, 1.0}, options);
  ASSERT_TRUE(cycle.ok()) << cycle.status().ToString();
  std::vector<int64_t> large, small;
  for (const MixedSample& s : *cycle) (s.dataset == 0 ? large : small).push_back(s.index);
  EXPECT_EQ(large.size(), 40u);
  EXPECT_EQ(std::set<int64_t>(large.begin(), large.end()).size(), 40u);
  EXPECT_GT(small.size(), 8u);  // more than two passes of 4 while 40 are drawn at even odds
  for (size_t pass = 0; pass + 4 <= small.size(); pass += 4) {
    EXPECT_EQ(std::set<int64_t>(small.begin() + pass, small.begin() + pass + 4).size(), 4u) << "pass at " << pass;
  }

  options.stop = StopCriteria::kFirstDatasetExhausted;
  StatusOr<std::vector<MixedSample>> first = MixDatasets({40, 4}, {1.0, 1.0}, options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(CountsByDataset(*first, 2, first->size())[1], 4);
  EXPECT_LT(first->size(), 40u);
}

TEST(MixtureTest, RefusesWhatCannotBeMixed) {
  const MixtureOptions options;
  EXPECT_EQ(MixDatasets({}, {}, options).status().message(), "a mixture needs at least one dataset");
  EXPECT_EQ(MixDatasets({3, 3}, {1.0}, options).status().message(),
            "a mixture of 2 datasets got 1 weights; give each dataset one");
  EXPECT_EQ(MixDatasets({3, 0}, {1.0, 1.0}, options).status().message(), "dataset 1 of the mixture has no sample");
  EXPECT_EQ(MixDatasets({3, 3}, {1.0, 0.0}, options).status().message(),
            "dataset 1 of the mixture has weight 0.000000; weights must be positive (a dataset of weight 0 is never "
            "drawn)");
  EXPECT_EQ(StopCriteriaNamed("ALL_DATASETS_EXHAUSTED").value(), StopCriteria::kAllDatasetsExhausted);
  EXPECT_FALSE(StopCriteriaNamed("CYCLE").ok());
}

}  // namespace
}  // namespace tmx::data
