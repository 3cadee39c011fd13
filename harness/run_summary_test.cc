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

// The FLOP rate is the median of each step's FLOPs over its time, after warm-up, as tokens/s is; the counts
// and the dtype go through the file, and a count per step that does not match the steps is refused.
TEST(RunSummaryTest, FlopRateComesFromEachStepsCountAndRoundTrips) {
  test::ScratchDir dir("run_summary_test");
  RunSummary s = ThreeSteps();
  s.step_flops = {1e12, 1e12, 3e12, 2e12};  // rates after warm-up: 1e12, 1.5e12, 0.5e12
  s.dtype = "bf16";
  s.Finish();
  ASSERT_TRUE(s.flops_per_second.has_value());
  EXPECT_DOUBLE_EQ(*s.flops_per_second, 1e12);
  ASSERT_TRUE(WriteRunSummary(dir.path(), s).ok());
  StatusOr<RunSummary> back = ReadRunSummary(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->step_flops, s.step_flops);
  EXPECT_EQ(back->dtype, "bf16");
  EXPECT_DOUBLE_EQ(*back->flops_per_second, 1e12);

  RunSummary none = ThreeSteps();  // generation counts none: no rate, nothing in the file
  none.Finish();
  EXPECT_FALSE(none.flops_per_second.has_value());
  EXPECT_FALSE(RunSummaryToJson(none).contains("step_flops"));

  nlohmann::json j = RunSummaryToJson(s);
  j["step_flops"] = {1e12};
  StatusOr<RunSummary> bad = RunSummaryFromJson(j, "summary.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "summary.json: run summary has 4 step times but 1 FLOP counts; fix: record one "
                                    "per step, or none");
}

// A decode step's bytes give the bandwidth rate as FLOPs give the FLOP rate; the prefill's FLOPs travel beside.
TEST(RunSummaryTest, ByteRateComesFromEachStepsBytesAndRoundTrips) {
  RunSummary s = ThreeSteps();
  s.step_bytes = {4e9, 4e9, 6e9, 2e9};  // rates after warm-up: 4e9, 3e9, 0.5e9
  s.prefill_flops = 5e10;
  s.Finish();
  ASSERT_TRUE(s.bytes_per_second.has_value());
  EXPECT_DOUBLE_EQ(*s.bytes_per_second, 3e9);
  StatusOr<RunSummary> back = RunSummaryFromJson(RunSummaryToJson(s), "summary.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->step_bytes, s.step_bytes);
  EXPECT_EQ(back->prefill_flops, 5e10);
  EXPECT_DOUBLE_EQ(*back->bytes_per_second, 3e9);
  RunSummary quantize;  // no steps: the rate the run set stands, and its error per kind travels
  quantize.bytes_per_second = 7e9;
  quantize.quantization = {{"q_proj", "int4 per group of 32", 2, 0.5, 0.516, 0.11, 0.18}};
  quantize.Finish();
  EXPECT_EQ(quantize.bytes_per_second, 7e9);
  StatusOr<RunSummary> quantized = RunSummaryFromJson(RunSummaryToJson(quantize), "summary.json");
  ASSERT_TRUE(quantized.ok()) << quantized.status().ToString();
  ASSERT_EQ(quantized->quantization.size(), 1u);
  EXPECT_EQ(quantized->quantization[0].kind, "q_proj");
  EXPECT_EQ(quantized->quantization[0].tensors, 2);
  EXPECT_EQ(quantized->quantization[0].relative_rms_bound, 0.18);
  EXPECT_FALSE(quantized->quantization[0].Exceeds());
  nlohmann::json j = RunSummaryToJson(s);
  j["step_bytes"] = {1e9, 2e9};
  EXPECT_EQ(RunSummaryFromJson(j, "summary.json").status().message(),
            "summary.json: run summary has 4 step times but 2 byte counts; fix: record one per step, or none");
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

// A generation run: each step is one decode step (a new token for each of 2 sequences), no loss, and the
// prefill's two measurements.
RunSummary Generation() {
  RunSummary s = ThreeSteps();
  s.recipe = "generate";
  s.config = "tiny/generation";
  s.step_times_s = {0.5, 0.25, 0.5, 0.25};
  s.step_tokens = {2, 2, 2, 2};
  s.losses.clear();
  s.time_to_first_token_s = 0.125;
  s.prefill_tokens_per_second = 2048;
  return s;
}

TEST(RunSummaryTest, AGenerationRunRoundTripsItsPrefillWithoutLosses) {
  test::ScratchDir dir("run_summary_test");
  RunSummary s = Generation();
  s.Finish();
  EXPECT_DOUBLE_EQ(*s.tokens_per_second, 8.0);  // decode: 8, 4, 8 new tokens/s after warm-up
  ASSERT_TRUE(WriteRunSummary(dir.path(), s).ok());
  StatusOr<RunSummary> back = ReadRunSummary(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->losses.empty());
  EXPECT_EQ(back->step_tokens, s.step_tokens);
  EXPECT_DOUBLE_EQ(*back->tokens_per_second, 8.0);
  ASSERT_TRUE(back->time_to_first_token_s.has_value());
  EXPECT_DOUBLE_EQ(*back->time_to_first_token_s, 0.125);
  ASSERT_TRUE(back->prefill_tokens_per_second.has_value());
  EXPECT_DOUBLE_EQ(*back->prefill_tokens_per_second, 2048);
}

// The prefill's fields came after version 1 was first written: a summary without them (a training run, or a
// file of an earlier build) reads them as unknown, and a training run writes neither.
TEST(RunSummaryTest, APrefillLeftOutReadsUnknown) {
  nlohmann::json j = RunSummaryToJson(ThreeSteps());
  EXPECT_FALSE(j.contains("time_to_first_token_s"));
  EXPECT_FALSE(j.contains("prefill_tokens_per_second"));
  StatusOr<RunSummary> back = RunSummaryFromJson(j, "s.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->time_to_first_token_s.has_value());
  EXPECT_FALSE(back->prefill_tokens_per_second.has_value());
}

TEST(RunSummaryTest, RefusesAPrefillThatIsNoNumber) {
  for (const char* key : {"time_to_first_token_s", "prefill_tokens_per_second"}) {
    nlohmann::json j = RunSummaryToJson(Generation());
    j[key] = "fast";
    Status s = RunSummaryFromJson(j, "s.json").status();
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << key;
    EXPECT_NE(s.message().find("s.json: run summary field missing or of the wrong type"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("expected a number, got \"fast\""), std::string::npos) << s.message();
    j[key] = nlohmann::json::array();
    EXPECT_EQ(RunSummaryFromJson(j, "s.json").status().code(), Status::Code::kInvalidArgument) << key;
  }
}

// An evaluation run's scores (recipes/eleuther_eval.h) round-trip by name; a run that scores nothing writes none,
// and scores that are not a mapping of numbers are refused.
TEST(RunSummaryTest, AnEvaluationRunRoundTripsItsScores) {
  RunSummary s = Generation();
  EXPECT_FALSE(RunSummaryToJson(s).contains("scores"));
  s.scores = {{"truthfulqa_mc2/acc", 0.4388}, {"truthfulqa_mc2/acc_stderr", 0.0783}};
  StatusOr<RunSummary> back = RunSummaryFromJson(RunSummaryToJson(s), "s.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->scores, s.scores);
  // One line for the cell's record: each metric with its stderr beside it.
  EXPECT_EQ(ScoresText(s.scores), "truthfulqa_mc2 acc 0.4388 ± 0.0783");
  EXPECT_EQ(ScoresText({{"truthfulqa_mc1/acc", 0.25}, {"truthfulqa_mc2/acc", 0.5}, {"truthfulqa_mc2/acc_stderr", 0.1}}),
            "truthfulqa_mc1 acc 0.2500, truthfulqa_mc2 acc 0.5000 ± 0.1000");
  EXPECT_EQ(ScoresText({}), "");
  for (const nlohmann::json& bad : {nlohmann::json::array({0.5}), nlohmann::json({{"truthfulqa_mc2/acc", "high"}})}) {
    nlohmann::json j = RunSummaryToJson(s);
    j["scores"] = bad;
    Status status = RunSummaryFromJson(j, "s.json").status();
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("s.json: run summary field missing or of the wrong type"), std::string::npos)
        << status.message();
  }
}

TEST(RunSummaryTest, RefusesOtherVersionsAndMismatchedSteps) {
  nlohmann::json j = RunSummaryToJson(ThreeSteps());
  j["version"] = kRunSummaryVersion + 1;
  EXPECT_NE(RunSummaryFromJson(j, "s.json").status().message().find("run summary version 2, but this build reads"),
            std::string::npos);
  j = RunSummaryToJson(ThreeSteps());
  j["step_tokens"] = {1};
  EXPECT_EQ(RunSummaryFromJson(j, "s.json").status().message(),
            "s.json: run summary has 4 step times but 1 token counts and 4 losses; fix: record one token count per "
            "step, and one loss per step or none");
  // No loss at all is a run without one (generation); some but not one per step is refused.
  j = RunSummaryToJson(ThreeSteps());
  j["losses"] = nlohmann::json::array();
  EXPECT_TRUE(RunSummaryFromJson(j, "s.json").ok());
  j["losses"] = {1.5, 1.25};
  EXPECT_EQ(RunSummaryFromJson(j, "s.json").status().message(),
            "s.json: run summary has 4 step times but 4 token counts and 2 losses; fix: record one token count per "
            "step, and one loss per step or none");
  j = RunSummaryToJson(ThreeSteps());
  j.erase("seed");
  EXPECT_NE(RunSummaryFromJson(j, "s.json").status().message().find("field missing or of the wrong type"),
            std::string::npos);
}

}  // namespace
}  // namespace tmx
