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
  s.threads = 2;
  s.Finish();
  ASSERT_TRUE(WriteRunSummary(dir.path(), s).ok());
  StatusOr<RunSummary> back = ReadRunSummary(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->recipe, s.recipe);
  EXPECT_EQ(back->step_times_s, s.step_times_s);
  EXPECT_TRUE(std::isnan(back->losses.back()));
  EXPECT_EQ(*back->peak_memory_bytes, *s.peak_memory_bytes);
  EXPECT_DOUBLE_EQ(*back->tokens_per_second, 50.0);
  EXPECT_EQ(back->threads, 2);
  EXPECT_EQ(ReadRunSummary(dir.path() + "/none").status().code(), Status::Code::kNotFound);
}

// The error of a failed run, or the config path, may quote bytes that are not UTF-8 (a file name from the
// user's disk); the JSON library throws type_error.316 on them unless told to replace them, which hid the
// real error and left the run without a summary.
TEST(RunSummaryTest, NonUtf8BytesInTheErrorOrConfigPathAreReplacedNotFatal) {
  test::ScratchDir dir("run_summary_test");
  RunSummary s = ThreeSteps();
  s.ok = false;
  s.config = "/data/\xff\xfe" "config.yaml";
  s.error = "/data/train\xe9.jsonl: not found; fix: check the path";
  s.error_kind = "user";
  s.Finish();
  Status written = WriteRunSummary(dir.path(), s);
  ASSERT_TRUE(written.ok()) << written.ToString();
  StatusOr<std::string> text = ReadFile(dir.path() + "/summary.json");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find('\xff'), std::string::npos);
  StatusOr<RunSummary> back = ReadRunSummary(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->ok);
  EXPECT_EQ(back->config, "/data/\xef\xbf\xbd\xef\xbf\xbd" "config.yaml");
  EXPECT_EQ(back->error, "/data/train\xef\xbf\xbd.jsonl: not found; fix: check the path");
}

TEST(RunSummaryTest, AnUnreadableFileIsAnErrorNamingItsPosition) {
  test::ScratchDir dir("run_summary_test");
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/summary.json", "{\"version\": 1e999}").ok());
  EXPECT_EQ(ReadRunSummary(dir.path()).status().message(),
            dir.path() + "/summary.json:1:13: in version: number 1e999 is out of range (a double holds magnitudes up "
                         "to about 1.8e308); fix: write a number within that range, or regenerate the file");
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/summary.json", "{\"version\": 1, \"recipe\"").ok());
  EXPECT_EQ(ReadRunSummary(dir.path()).status().message().rfind(dir.path() + "/summary.json:1:24: invalid JSON (", 0),
            0u);
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
