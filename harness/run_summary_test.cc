#include "harness/run_summary.h"

#include <cmath>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

RunSummary ThreeSteps() {
  RunSummary s;
  s.recipe = "lora_finetune_single_device";
  s.config = "tiny/lora_single_device";
  s.device = "cpu";
  s.ok = true;
  s.step_times_s = {5.0, 1.0, 2.0, 4.0};  // the first is warm-up
  s.step_tokens = {100, 100, 100, 100};
  s.losses = {3.0, 2.5, 2.0, NAN};
  s.warmup_steps = 1;
  return s;
}

TEST(RunSummaryTest, StatisticsComeFromTheStepsAfterWarmUp) {
  RunSummary s = ThreeSteps();
  s.Finish();
  EXPECT_DOUBLE_EQ(*s.step_time_median_s, 2.0);
  EXPECT_DOUBLE_EQ(*s.step_time_spread_s, 1.0);  // deviations 1, 0, 2
  EXPECT_DOUBLE_EQ(*s.tokens_per_second, 50.0);  // 100, 50, 25
  RunSummary one;
  one.step_times_s = {2.0};
  one.step_tokens = {10};
  one.Finish();  // no step after warm-up: all steps count
  EXPECT_DOUBLE_EQ(*one.tokens_per_second, 5.0);
  RunSummary none;
  none.Finish();
  EXPECT_FALSE(none.tokens_per_second.has_value());
}

TEST(RunSummaryTest, RoundTripsThroughTheFileIncludingNonFiniteLosses) {
  test::ScratchDir dir("run_summary_test");
  RunSummary s = ThreeSteps();
  s.peak_memory_bytes = int64_t{5} << 30;
  s.peak_memory_source = "process_rss";
  s.Finish();
  ASSERT_TRUE(WriteRunSummary(dir.path(), s).ok());
  StatusOr<RunSummary> back = ReadRunSummary(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->recipe, s.recipe);
  EXPECT_EQ(back->step_times_s, s.step_times_s);
  EXPECT_TRUE(std::isnan(back->losses.back()));
  EXPECT_EQ(*back->peak_memory_bytes, *s.peak_memory_bytes);
  EXPECT_DOUBLE_EQ(*back->tokens_per_second, 50.0);
  EXPECT_EQ(ReadRunSummary(dir.path() + "/none").status().code(), Status::Code::kNotFound);
}

TEST(RunSummaryTest, RefusesOtherVersionsAndMismatchedSteps) {
  nlohmann::json j = RunSummaryToJson(ThreeSteps());
  j["version"] = kRunSummaryVersion + 1;
  EXPECT_NE(RunSummaryFromJson(j, "s.json").status().message().find("run summary version 2, but this build reads"),
            std::string::npos);
  j = RunSummaryToJson(ThreeSteps());
  j["step_tokens"] = {1};
  EXPECT_EQ(RunSummaryFromJson(j, "s.json").status().message(),
            "s.json: run summary has 4 step times but 1 token counts and 4 losses");
  j = RunSummaryToJson(ThreeSteps());
  j.erase("seed");
  EXPECT_NE(RunSummaryFromJson(j, "s.json").status().message().find("field missing or of the wrong type"),
            std::string::npos);
}

}  // namespace
}  // namespace tmx
