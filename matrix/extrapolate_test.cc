// Extrapolation from proxies: the lines over depth and ids, and the record's extrapolations replayed from
// the proxies' numbers it holds.
#include "matrix/extrapolate.h"

#include <gtest/gtest.h>

namespace tmx::matrix {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST(ExtrapolateTest, ExtrapolatesTheLineThroughTheProxiesToTheRealDepth) {
  // 1 layer 3 s, 2 layers 5 s: 1 s fixed and 2 s a layer, so 16 layers take 33 s.
  EXPECT_DOUBLE_EQ(ExtrapolateToDepth({1, 2}, {3, 5}, 16), 33);
  EXPECT_DOUBLE_EQ(ExtrapolateToDepth({1, 2, 4}, {3, 5, 9}, 8), 17);
  // A deeper proxy measured faster (noise over a tiny per-layer cost) extrapolates to its own value, never below.
  EXPECT_DOUBLE_EQ(ExtrapolateToDepth({1, 2}, {5, 4.9}, 32), 4.9);
}

TEST(ExtrapolateTest, ExtrapolatesOverTheVocabularyFromTheProxyWithFewerIds) {
  // 1 layer at 1000 ids 3 s, 2 layers at 1000 ids 5 s, 1 layer at 500 ids 2.5 s: 2 s a layer and 1 ms an id,
  // so 16 layers at 9000 ids take 33 s + 8 s.
  EXPECT_DOUBLE_EQ(ExtrapolateToSize({1, 2, 1}, {1000, 1000, 500}, {3, 5, 2.5}, 16, 9000), 41);
  // Fewer ids reading more (noise) adds nothing for the ids.
  EXPECT_DOUBLE_EQ(ExtrapolateToSize({1, 2, 1}, {1000, 1000, 500}, {3, 5, 3.1}, 16, 9000), 33);
}

// A record of two proxies, each with its median step, median rate and peak (gemma2/2B_full's readings: the
// two median steps were different batches), made under the rule of the median step.
CellResult RecordedUnderAnEarlierRule() {
  CellResult r;
  r.status = CellStatus::kRuns;
  r.real_layers = 26;
  r.proxy_layers = {1, 4};
  r.proxy_step_times_s = {24.07, 23.54};
  r.proxy_tokens_per_second = {46.27, 41.70};
  r.proxy_flops_per_second = {2e11, 2.5e11};
  r.proxy_peak_memory_bytes = {15 * kGiB, 19 * kGiB};
  r.extrapolated_step_time_s = 23.54;  // what the median steps' falling line gave: the deepest proxy's own
  return r;
}

TEST(ExtrapolateTest, ARecordIsReplayedFromItsProxiesNumbersByTodaysRule) {
  CellResult r = RecordedUnderAnEarlierRule();
  ExtrapolateFromProxies(&r);
  // Time per token: the deepest proxy's typical step (982 tokens) at each proxy's rate, then the line.
  const double shallow = 1 / 46.27, deep = 1 / 41.70;
  const double per_token = shallow + (deep - shallow) / 3 * 25;
  ASSERT_TRUE(r.extrapolated_step_time_s.has_value());
  EXPECT_NEAR(*r.extrapolated_step_time_s, per_token * 41.70 * 23.54, 1e-9);
  EXPECT_NEAR(*r.extrapolated_tokens_per_second, 1 / per_token, 1e-9);
  // 15 GiB at 1 layer, 19 at 4: 4/3 GiB a layer, 22 more layers.
  EXPECT_NEAR(static_cast<double>(*r.extrapolated_peak_memory_bytes) / kGiB, 19 + 22 * 4.0 / 3, 1e-6);
  // FLOPs per step are linear in depth: the line through each proxy's rate x its time for that step.
  const double flops0 = 2e11 * 41.70 * 23.54 / 46.27, flops1 = 2.5e11 * 23.54;
  EXPECT_NEAR(*r.extrapolated_flops_per_second, (flops1 + (flops1 - flops0) / 3 * 22) / *r.extrapolated_step_time_s,
              1e3);
  EXPECT_EQ(r.proxy_note, "");
}

TEST(ExtrapolateTest, ARecordWithoutTwoComparableDepthsLosesItsExtrapolations) {
  CellResult alone = RecordedUnderAnEarlierRule();
  alone.proxy_layers = {1};
  alone.proxy_step_times_s = {24.07};
  alone.proxy_tokens_per_second = {46.27};
  alone.proxy_peak_memory_bytes = {15 * kGiB};
  ExtrapolateFromProxies(&alone);
  EXPECT_FALSE(alone.extrapolated_step_time_s);
  EXPECT_FALSE(alone.extrapolated_peak_memory_bytes);

  CellResult uneven = RecordedUnderAnEarlierRule();
  uneven.proxy_peak_memory_bytes.pop_back();  // a damaged record: a number per proxy missing
  ExtrapolateFromProxies(&uneven);
  EXPECT_FALSE(uneven.extrapolated_step_time_s);
  EXPECT_FALSE(uneven.extrapolated_peak_memory_bytes);

  // Without the proxies' rates the median steps are taken as they are.
  CellResult untimed = RecordedUnderAnEarlierRule();
  untimed.proxy_tokens_per_second.clear();
  untimed.proxy_step_times_s = {20, 26};
  ExtrapolateFromProxies(&untimed);
  EXPECT_NEAR(*untimed.extrapolated_step_time_s, 26 + 2 * 22, 1e-9);
  EXPECT_FALSE(untimed.extrapolated_tokens_per_second);
}

}  // namespace
}  // namespace tmx::matrix
