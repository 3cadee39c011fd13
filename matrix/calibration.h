// Calibration of proxy cells: for cells that ran in full and also ran their proxies (`tune-matrix run
// --calibrate`), how far the extrapolation to the real depth lies from what the full run measured, per cell
// and overall. `tune-matrix calibration` prints the table benchmarks/README.md publishes.
//
// The rows come from the history (matrix/history.h), not from the configs' metadata: a later plain run of a
// cell replaces its calibrated record there, while history keeps every measurement. Each row replays its
// record's proxies by today's rule (ExtrapolateFromProxies), so cells calibrated in different runs, before
// and after a change of the rule, are compared alike.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "matrix/history.h"

namespace tmx::matrix {

// One calibrated cell: measured and extrapolated step time and peak memory, and the relative errors
// (extrapolated / measured - 1); an error is unknown where either side is.
struct CalibrationRow {
  std::string config;
  std::string column;       // harness/column.h
  std::string proxy;        // SupportEntry::proxy
  std::string verified_at;  // when the calibrated record was measured, and at which commit
  std::string commit;
  std::optional<double> step_time_s, extrapolated_step_time_s, step_error;
  std::optional<double> peak_memory_gib, extrapolated_peak_memory_gib, memory_error;
};

// Whether `record` is a calibration: it ran in full (`runs`, as written or repaired), not disturbed, beside
// proxies at two or more depths.
bool IsCalibration(const CellResult& record);

// Of each cell in `history`, its newest calibration (IsCalibration), extrapolated anew from its proxies'
// numbers; in config order, then device type. A cell never calibrated has no row.
std::vector<CalibrationRow> CalibrationRows(const History& history);

// The median and the largest absolute error of one column, and the row of the largest.
struct ErrorSummary {
  size_t cells = 0;
  double median = 0;
  double max = 0;
  std::string worst;  // "config on device"
};
ErrorSummary SummarizeErrors(const std::vector<CalibrationRow>& rows,
                             std::optional<double> CalibrationRow::*error);

// The rows as a Markdown table (errors in percent, signed; the day each was measured), then one line per
// column with its median and maximum absolute error, then the cells in `uncalibrated` ("config on device")
// and the command that calibrates them. No rows: one line saying how to make them.
void WriteCalibrationTable(const std::vector<CalibrationRow>& rows, const std::vector<std::string>& uncalibrated,
                           std::ostream& out);

}  // namespace tmx::matrix
