#include "matrix/calibration.h"

#include <sstream>

#include <gtest/gtest.h>

namespace tmx::matrix {
namespace {

SupportEntry Calibrated(double step, double extrapolated_step, double peak, double extrapolated_peak) {
  SupportEntry e;
  e.status = "runs";
  e.proxy = "1 and 2 of 16 layers (model.num_layers 2 of 16)";
  e.step_time_s = step;
  e.extrapolated_step_time_s = extrapolated_step;
  e.peak_memory_gib = peak;
  e.extrapolated_peak_memory_gib = extrapolated_peak;
  return e;
}

TEST(CalibrationTest, ErrorsOfEachCalibratedCellAndTheirMedianAndMaximum) {
  SupportEntry too_large = Calibrated(1, 2, 3, 4);
  too_large.status = "too_large";  // extrapolated, never measured in full: no error to take
  SupportEntry plain;
  plain.status = "runs";
  plain.step_time_s = 1;
  // Invalid as written and run in full with its repair: calibrated like any cell that ran; repaired and then too
  // large is not.
  SupportEntry repaired = Calibrated(2.0, 2.0, 5.0, 5.0);
  repaired.status = "invalid";
  repaired.repair = "optimizer._component_=torch.optim.AdamW";
  repaired.repaired_status = "runs";
  SupportEntry repaired_too_large = repaired;
  repaired_too_large.repaired_status = "too_large";
  std::vector<ConfigSupport> configs = {
      {"f/1B_repaired", "full_finetune_single_device", {{"cpu", repaired}}},
      {"g/3B_repaired", "full_finetune_single_device", {{"cpu", repaired_too_large}}},
      {"b/1B_lora", "lora_finetune_single_device", {{"cpu", Calibrated(2.0, 2.2, 8.0, 7.6)}}},
      {"a/1B_full", "full_finetune_single_device", {{"cpu", Calibrated(4.0, 3.0, 10.0, 10.5)}}},
      {"c/3B_lora", "lora_finetune_single_device", {{"cpu", Calibrated(1.0, 1.05, 4.0, 4.0)}}},
      {"d/8B_lora", "lora_finetune_single_device", {{"cpu", too_large}}},
      {"e/tiny", "lora_finetune_single_device", {{"cpu", plain}}},
  };
  std::vector<CalibrationRow> rows = CalibrationRows(configs);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[3].config, "f/1B_repaired");
  EXPECT_EQ(rows[0].config, "a/1B_full");
  EXPECT_NEAR(*rows[0].step_error, -0.25, 1e-12);
  EXPECT_NEAR(*rows[0].memory_error, 0.05, 1e-12);
  EXPECT_NEAR(*rows[1].step_error, 0.1, 1e-12);
  ErrorSummary step = SummarizeErrors(rows, &CalibrationRow::step_error);
  EXPECT_EQ(step.cells, 4u);
  EXPECT_NEAR(step.median, 0.075, 1e-12);  // of 0, 0.05, 0.1 and 0.25
  EXPECT_NEAR(step.max, 0.25, 1e-12);
  EXPECT_EQ(step.worst, "a/1B_full on cpu");
  std::ostringstream out;
  WriteCalibrationTable(rows, out);
  EXPECT_NE(out.str().find("| `a/1B_full` | cpu | 1 and 2 of 16 layers (model.num_layers 2 of 16) | 4.000 | 3.000 | "
                           "-25.0% | 10.00 | 10.50 | +5.0% |"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("step time: median error 7.5%, largest 25.0% (a/1B_full on cpu), over 4 cells"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("peak memory: median error 2.5%, largest 5.0% (b/1B_lora on cpu), over 4 cells"),
            std::string::npos)
      << out.str();
  std::ostringstream none;
  WriteCalibrationTable({}, none);
  EXPECT_NE(none.str().find("--calibrate"), std::string::npos);
}

}  // namespace
}  // namespace tmx::matrix
