#include "matrix/speed.h"

#include <gtest/gtest.h>

namespace tmx::matrix {
namespace {

SpeedSample Sample(double tps, double step_s, double spread_fraction = 0.01, const std::string& model = "CPU") {
  return {tps, step_s, step_s * spread_fraction, model};
}

TEST(SpeedTest, VerdictsFollowTheNoiseModel) {
  struct Case {
    const char* name;
    SpeedSample before, after;
    SpeedVerdict verdict;
  } cases[] = {
      {"same speed", Sample(100, 1), Sample(100, 1), SpeedVerdict::kWithinNoise},
      {"9% slower is within the 10% floor", Sample(100, 1), Sample(91, 1), SpeedVerdict::kWithinNoise},
      {"15% slower", Sample(100, 1), Sample(85, 1), SpeedVerdict::kSlower},
      {"15% faster", Sample(100, 1), Sample(115, 1), SpeedVerdict::kFaster},
      {"noisy runs widen the allowance", Sample(100, 1, 0.08), Sample(85, 1, 0.08), SpeedVerdict::kWithinNoise},
      {"steps too short to time", Sample(100, 0.04), Sample(50, 0.04), SpeedVerdict::kTooShort},
      {"no step time", {100.0, std::nullopt, std::nullopt, ""}, Sample(50, 1), SpeedVerdict::kTooShort},
      {"another device model", Sample(100, 1), Sample(50, 1, 0.01, "Other CPU"), SpeedVerdict::kNotCompared},
      {"another lane width", {100.0, 1.0, 0.01, "CPU", 2}, {50.0, 1.0, 0.01, "CPU", 4}, SpeedVerdict::kNotCompared},
      {"threads known on one side", {100.0, 1.0, 0.01, "CPU", 2}, Sample(85, 1), SpeedVerdict::kSlower},
      {"no tokens/s", {std::nullopt, 1.0, 0.01, ""}, Sample(50, 1), SpeedVerdict::kNotCompared},
      {"zero before", Sample(0, 1), Sample(50, 1), SpeedVerdict::kNotCompared},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CompareSpeed(c.before, c.after, {}).verdict, c.verdict) << c.name;
  }
}

TEST(SpeedTest, ReportsTheChangeAndTheAllowance) {
  SpeedNoise model;
  SpeedChange c = CompareSpeed(Sample(1000, 0.4), Sample(850, 0.4), model);
  EXPECT_EQ(c.verdict, SpeedVerdict::kSlower);
  EXPECT_NEAR(c.change, -0.15, 1e-12);
  EXPECT_NEAR(c.noise, std::hypot(0.01, 0.01), 1e-12);
  EXPECT_EQ(c.allowed, 0.10);
  EXPECT_EQ(DescribeAllowance(c, model), "allowed 10.0% = max(--max-slowdown 10.0%, 3.0 x combined spread 1.4%)");
  model.max_slowdown = 0.2;
  EXPECT_EQ(CompareSpeed(Sample(1000, 0.4), Sample(850, 0.4), model).verdict, SpeedVerdict::kWithinNoise);
}

TEST(SpeedTest, SamplesComeFromEntriesAndRecords) {
  SupportEntry e;
  e.tokens_per_second = 10;
  e.step_time_s = 2;
  e.step_time_spread_s = 0.1;
  e.device_name = "GPU";
  CellResult r;
  r.tokens_per_second = 10;
  r.step_time_median_s = 2;
  r.step_time_spread_s = 0.1;
  r.provenance.device_name = "GPU";
  r.threads = 4;
  EXPECT_EQ(SpeedOf(r).threads, 4);
  EXPECT_FALSE(SpeedOf(e).threads.has_value());  // an entry written before entries kept them
  EXPECT_EQ(SpeedOf(SupportFromCell(r)).threads, 4);
  for (const SpeedSample& s : {SpeedOf(e), SpeedOf(r)}) {
    EXPECT_EQ(s.tokens_per_second, 10);
    EXPECT_EQ(s.step_time_s, 2);
    EXPECT_EQ(s.step_time_spread_s, 0.1);
    EXPECT_EQ(s.device_name, "GPU");
  }
}

}  // namespace
}  // namespace tmx::matrix
