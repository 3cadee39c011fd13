#include "matrix/calibration.h"

#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

namespace tmx::matrix {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// A full run of 16 layers at `step` s and `peak` GiB with proxies of 1 and 2 layers beside it, measured at `when`.
// The proxies read 1 s and 1.5 s a step, 2 and 3 GiB: 8.5 s and 17 GiB at 16 layers.
CellResult Calibrated(const std::string& config, double step, double peak, const std::string& when) {
  CellResult r;
  r.key = {config, "cpu"};
  r.device_type = "cpu";
  r.status = CellStatus::kRuns;
  r.step_time_median_s = step;
  r.peak_memory_bytes = static_cast<int64_t>(peak * kGiB);
  r.real_layers = 16;
  r.proxy_layers = {1, 2};
  r.proxy_cut = "model.num_layers 2 of 16";
  r.proxy_step_times_s = {1, 1.5};
  r.proxy_peak_memory_bytes = {2 * kGiB, 3 * kGiB};
  r.extrapolated_step_time_s = 8.5;
  r.extrapolated_peak_memory_bytes = static_cast<int64_t>(17 * kGiB);
  r.provenance.verified_at = when;
  r.provenance.commit = "582fc78aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  return r;
}

CellResult Plain(const std::string& config, CellStatus status, const std::string& when) {
  CellResult r;
  r.key = {config, "cpu"};
  r.device_type = "cpu";
  r.status = status;
  r.step_time_median_s = 3;
  r.provenance.verified_at = when;
  return r;
}

TEST(CalibrationTest, EachCellsNewestCalibrationInItsHistoryWithItsErrors) {
  History history;
  // Calibrated, then run plainly: the plain run replaced the calibration in the config's metadata, not here.
  history[{"a/1B_full", "cpu"}] = {Calibrated("a/1B_full", 10, 16, "2026-12-05T15:00:00Z"),
                                   Plain("a/1B_full", CellStatus::kRuns, "2026-12-06T10:00:00Z")};
  // The newest calibration was measured beside other work: the one before it counts.
  CellResult disturbed = Calibrated("b/1B_lora", 100, 100, "2026-12-06T11:00:00Z");
  disturbed.disturbed = "other processes took 40% of the CPU";
  history[{"b/1B_lora", "cpu"}] = {Calibrated("b/1B_lora", 8.5, 17, "2026-12-05T16:00:00Z"), disturbed};
  // Invalid as written and run in full with its repair: calibrated like any cell that ran.
  CellResult repaired = Calibrated("c/1B_repaired", 8, 20, "2026-12-05T17:00:00Z");
  repaired.status = CellStatus::kInvalid;
  repaired.repair = {"optimizer._component_=torch.optim.AdamW"};
  repaired.repaired_status = CellStatus::kRuns;
  history[{"c/1B_repaired", "cpu"}] = {repaired};
  // Proxied because too large (extrapolated, never measured in full), and only ever run plainly: no rows.
  CellResult too_large = Calibrated("d/8B_lora", 1, 1, "2026-12-05T18:00:00Z");
  too_large.status = CellStatus::kTooLarge;
  history[{"d/8B_lora", "cpu"}] = {too_large};
  history[{"e/tiny", "cpu"}] = {Plain("e/tiny", CellStatus::kRuns, "2026-12-05T18:00:00Z")};

  std::vector<CalibrationRow> rows = CalibrationRows(history);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].config, "a/1B_full");
  EXPECT_EQ(rows[0].verified_at, "2026-12-05T15:00:00Z");
  EXPECT_NEAR(*rows[0].step_error, -0.15, 1e-12);
  EXPECT_NEAR(*rows[0].memory_error, 1.0 / 16, 1e-9);
  EXPECT_EQ(rows[1].config, "b/1B_lora");
  EXPECT_EQ(rows[1].verified_at, "2026-12-05T16:00:00Z");
  EXPECT_NEAR(*rows[1].step_error, 0, 1e-12);
  EXPECT_EQ(rows[2].config, "c/1B_repaired");
  EXPECT_NEAR(*rows[2].memory_error, -0.15, 1e-9);

  ErrorSummary step = SummarizeErrors(rows, &CalibrationRow::step_error);
  EXPECT_EQ(step.cells, 3u);
  EXPECT_NEAR(step.median, 0.0625, 1e-12);  // of 0, 0.0625 and 0.15
  EXPECT_NEAR(step.max, 0.15, 1e-12);
  EXPECT_EQ(step.worst, "a/1B_full on cpu");

  std::ostringstream out;
  WriteCalibrationTable(rows, {"f/3B_full on cpu"}, out);
  EXPECT_NE(out.str().find("| `a/1B_full` | cpu | 1 and 2 of 16 layers (model.num\\_layers 2 of 16) | 2026-12-05 582fc78 | "
                           "10.000 | 8.500 | -15.0% | 16.00 | 17.00 | +6.2% |"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("step time: median error 6.2%, largest 15.0% (a/1B_full on cpu), over 3 cells"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("Not calibrated (each runs in full, and no calibration of it is in the history): "
                           "f/3B_full on cpu."),
            std::string::npos)
      << out.str();
  std::ostringstream none;
  WriteCalibrationTable({}, {}, none);
  EXPECT_NE(none.str().find("--calibrate"), std::string::npos);
}

// A calibration recorded under an earlier rule (here an extrapolation the proxies' numbers do not give) is shown
// by today's: the table compares every cell alike, whenever it was calibrated.
TEST(CalibrationTest, ARowReplaysItsProxiesByTodaysRule) {
  CellResult old = Calibrated("a/1B_full", 10, 16, "2026-12-05T15:00:00Z");
  old.extrapolated_step_time_s = 1.5;
  old.extrapolated_peak_memory_bytes = static_cast<int64_t>(3 * kGiB);
  History history;
  history[{"a/1B_full", "cpu"}] = {old};
  std::vector<CalibrationRow> rows = CalibrationRows(history);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(*rows[0].extrapolated_step_time_s, 8.5, 1e-12);
  EXPECT_NEAR(*rows[0].extrapolated_peak_memory_gib, 17, 1e-9);
}

// Merged records whose proxies span no line: the slope divided by zero (two proxies at one depth), or the line
// ran to a real size of 0 layers and the tokens/s divided by a step time of 0 or below.
TEST(CalibrationTest, DegenerateProxiesDivideByNothing) {
  History history;
  CellResult same_depth = Calibrated("a/same_depth", 10, 16, "2026-12-05T15:00:00Z");
  same_depth.proxy_layers = {2, 2};
  CellResult no_real = Calibrated("a/no_real_size", 10, 16, "2026-12-05T15:00:00Z");
  no_real.real_layers = 0;
  no_real.proxy_tokens_per_second = {100, 50};
  CellResult same_vocab = Calibrated("a/same_vocab", 10, 16, "2026-12-05T15:00:00Z");
  same_vocab.proxy_layers = {1, 2, 1};
  same_vocab.proxy_vocab = {1000, 1000, 1000};
  same_vocab.real_vocab = 4000;
  same_vocab.proxy_step_times_s = {1, 1.5, 0.9};
  same_vocab.proxy_peak_memory_bytes = {2 * kGiB, 3 * kGiB, 1.5 * kGiB};
  for (const CellResult& r : {same_depth, no_real, same_vocab}) history[{r.key.config, "cpu"}] = {r};
  std::vector<CalibrationRow> rows = CalibrationRows(history);
  EXPECT_TRUE(rows.empty()) << "nothing extrapolated, so no row: " << rows.size();
  for (const CalibrationRow& row : rows) {
    EXPECT_TRUE(!row.step_error || std::isfinite(*row.step_error)) << row.config;
    EXPECT_TRUE(!row.memory_error || std::isfinite(*row.memory_error)) << row.config;
  }
}

}  // namespace
}  // namespace tmx::matrix
