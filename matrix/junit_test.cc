#include "matrix/junit.h"

#include <sstream>

#include <gtest/gtest.h>


namespace tmx::matrix {
namespace {

CellResult Cell(const std::string& config, const std::string& device, CellStatus status, const std::string& reason,
                double wall_time_s) {
  CellResult c;
  c.key = {config, device};
  c.status = status;
  c.reason = reason;
  c.wall_time_s = wall_time_s;
  return c;
}

TEST(JUnitTest, OneTestCasePerCellWithTheReasonAsFailureOrSkipMessage) {
  CellResult runs = Cell("tiny/lora", "cpu", CellStatus::kRuns, "", 1.25);
  runs.tokens_per_second = 812.4;
  runs.peak_memory_bytes = 1024;
  CellResult fails = Cell("llama3_2/1B_lora", "cuda:0", CellStatus::kFails, "CUDA out of memory <b> & \"q\"", 30);
  fails.output_tail = "Traceback\nRuntimeError: x < y";
  std::vector<CellResult> cells = {
      runs, fails,
      Cell("llama3_1/8B_full", "cpu", CellStatus::kTooLarge, "predicted peak memory 62 GiB exceeds 85%", 0),
      Cell("tiny/full", "cpu", CellStatus::kTimeout, "killed at the wall-clock limit of 10m00s", 600)};
  std::ostringstream out;
  WriteJUnit(cells, out);
  EXPECT_EQ(out.str(), R"(<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="tune-matrix" tests="4" failures="2" errors="0" skipped="1" time="631.250">
  <testsuite name="tune-matrix.cpu" tests="3" failures="1" errors="0" skipped="1" time="601.250">
    <testcase classname="tune-matrix.cpu" name="llama3_1/8B_full" time="0.000">
      <skipped message="too_large: predicted peak memory 62 GiB exceeds 85%"/>
    </testcase>
    <testcase classname="tune-matrix.cpu" name="tiny/full" time="600.000">
      <failure type="timeout" message="killed at the wall-clock limit of 10m00s"></failure>
    </testcase>
    <testcase classname="tune-matrix.cpu" name="tiny/lora" time="1.250">
      <system-out>812.400 tokens/s, peak memory 1024 bytes</system-out>
    </testcase>
  </testsuite>
  <testsuite name="tune-matrix.cuda:0" tests="1" failures="1" errors="0" skipped="0" time="30.000">
    <testcase classname="tune-matrix.cuda:0" name="llama3_2/1B_lora" time="30.000">
      <failure type="fails" message="CUDA out of memory &lt;b&gt; &amp; &quot;q&quot;">Traceback
RuntimeError: x &lt; y</failure>
    </testcase>
  </testsuite>
</testsuites>
)");
}

// A generation cell's output names its speed decode and adds its time to first token and prefill speed; a
// cell with no speed measured writes what it has, with no leading separator.
TEST(JUnitTest, AGenerationCellReportsItsDecodeSpeedAndPrefill) {
  CellResult generate = Cell("tiny/generation", "cpu", CellStatus::kRuns, "", 2.5);
  generate.tokens_per_second = 812.4;
  generate.time_to_first_token_s = 0.0523;
  generate.prefill_tokens_per_second = 4100.25;
  generate.peak_memory_bytes = 2048;
  CellResult unmeasured = Cell("tiny/lora", "cpu", CellStatus::kRuns, "", 1);
  unmeasured.peak_memory_bytes = 1024;
  std::ostringstream out;
  WriteJUnit({generate, unmeasured}, out);
  EXPECT_NE(out.str().find("<system-out>812.400 decode tokens/s, time to first token 0.052 s, prefill 4100.250 "
                           "tokens/s, peak memory 2048 bytes</system-out>"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("<system-out>peak memory 1024 bytes</system-out>"), std::string::npos) << out.str();
}

TEST(JUnitTest, NoCellsIsAnEmptyButValidDocument) {
  std::ostringstream out;
  WriteJUnit({}, out);
  EXPECT_EQ(out.str(),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<testsuites name=\"tune-matrix\" tests=\"0\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0.000\">\n"
            "</testsuites>\n");
}

}  // namespace
}  // namespace tmx::matrix
