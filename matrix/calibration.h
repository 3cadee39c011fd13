// Calibration of proxy cells: for cells that ran in full and also ran their proxies (`tune-matrix run
// --calibrate`), how far the extrapolation to the real depth lies from what the full run measured, per cell
// and overall. `tune-matrix calibration` prints the table benchmarks/README.md publishes.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "matrix/support_entry.h"

namespace tmx::matrix {

// One calibrated cell: measured and extrapolated step time and peak memory, and the relative errors
// (extrapolated / measured - 1); an error is unknown where either side is.
struct CalibrationRow {
  std::string config;
  std::string device_type;
  std::string proxy;  // SupportEntry::proxy
  std::optional<double> step_time_s, extrapolated_step_time_s, step_error;
  std::optional<double> peak_memory_gib, extrapolated_peak_memory_gib, memory_error;
};

// Every entry that ran in full (`runs`) and has an extrapolation, in config order.
std::vector<CalibrationRow> CalibrationRows(const std::vector<ConfigSupport>& configs);

// The median and the largest absolute error of one column, and the row of the largest.
struct ErrorSummary {
  size_t cells = 0;
  double median = 0;
  double max = 0;
  std::string worst;  // "config on device"
};
ErrorSummary SummarizeErrors(const std::vector<CalibrationRow>& rows,
                             std::optional<double> CalibrationRow::*error);

// The rows as a Markdown table (errors in percent, signed), then one line per column with its median and
// maximum absolute error. No rows: one line saying how to make them.
void WriteCalibrationTable(const std::vector<CalibrationRow>& rows, std::ostream& out);

}  // namespace tmx::matrix
