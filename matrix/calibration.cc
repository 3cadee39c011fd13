#include "matrix/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/stats.h"
#include "base/text.h"
#include "matrix/escape.h"
#include "matrix/extrapolate.h"
#include "matrix/support_entry.h"

namespace tmx::matrix {
namespace {

std::optional<double> RelativeError(const std::optional<double>& measured, const std::optional<double>& extrapolated) {
  if (!measured || !extrapolated || !(*measured > 0) || !std::isfinite(*extrapolated)) return std::nullopt;
  return *extrapolated / *measured - 1;
}

std::string Fixed(const std::optional<double>& v, int decimals) {
  if (!v) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, *v);
  return buf;
}

std::string Percent(const std::optional<double>& v) {
  if (!v) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * *v);
  return buf;
}

}  // namespace

bool IsCalibration(const CellResult& r) {
  const CellStatus ran = r.repaired_status.value_or(r.status);
  return ran == CellStatus::kRuns && r.disturbed.empty() && r.proxy_layers.size() >= 2;
}

std::vector<CalibrationRow> CalibrationRows(const History& history) {
  std::vector<CalibrationRow> rows;
  for (const auto& [cell, records] : history) {
    // History is oldest first.
    auto newest = std::find_if(records.rbegin(), records.rend(), IsCalibration);
    if (newest == records.rend()) continue;
    CellResult replayed = *newest;
    ExtrapolateFromProxies(&replayed);
    const SupportEntry e = SupportFromCell(replayed);
    if (!e.extrapolated_step_time_s && !e.extrapolated_peak_memory_gib) continue;
    CalibrationRow r;
    r.config = cell.first;
    r.column = cell.second;
    r.proxy = e.proxy;
    r.verified_at = e.verified_at;
    r.commit = e.commit;
    r.step_time_s = e.step_time_s;
    r.extrapolated_step_time_s = e.extrapolated_step_time_s;
    r.step_error = RelativeError(e.step_time_s, e.extrapolated_step_time_s);
    r.peak_memory_gib = e.peak_memory_gib;
    r.extrapolated_peak_memory_gib = e.extrapolated_peak_memory_gib;
    r.memory_error = RelativeError(e.peak_memory_gib, e.extrapolated_peak_memory_gib);
    rows.push_back(std::move(r));
  }
  // History's map is in (config, device type) order already.
  return rows;
}

ErrorSummary SummarizeErrors(const std::vector<CalibrationRow>& rows, std::optional<double> CalibrationRow::*error) {
  ErrorSummary s;
  std::vector<double> errors;
  for (const CalibrationRow& r : rows) {
    if (!(r.*error)) continue;
    const double e = std::fabs(*(r.*error));
    errors.push_back(e);
    if (e >= s.max) {
      s.max = e;
      s.worst = r.config + " on " + r.column;
    }
  }
  s.cells = errors.size();
  if (!errors.empty()) s.median = Median(errors);
  return s;
}

void WriteCalibrationTable(const std::vector<CalibrationRow>& rows, const std::vector<std::string>& uncalibrated,
                           std::ostream& out) {
  if (rows.empty()) {
    out << "No cell has been calibrated: `tune-matrix run --calibrate` runs the proxies of cells that run in full "
           "too.\n";
  } else {
    out << "| config | device | proxies | measured | step time s (measured) | extrapolated | error | peak GiB (measured) | "
           "extrapolated | error |\n|---|---|---|---|---|---|---|---|---|---|\n";
    for (const CalibrationRow& r : rows) {
      out << "| " << MarkdownCode(r.config) << " | " << MarkdownCell(r.column) << " | " << MarkdownCell(r.proxy)
          << " | " << MarkdownCell(r.verified_at.substr(0, 10) + (r.commit.empty() ? "" : " " + r.commit.substr(0, 7)))
          << " | " << Fixed(r.step_time_s, 3) << " | "
          << Fixed(r.extrapolated_step_time_s, 3) << " | " << Percent(r.step_error) << " | "
          << Fixed(r.peak_memory_gib, 2) << " | " << Fixed(r.extrapolated_peak_memory_gib, 2) << " | "
          << Percent(r.memory_error) << " |\n";
    }
    for (auto [name, column] : {std::pair<const char*, std::optional<double> CalibrationRow::*>{
                                    "step time", &CalibrationRow::step_error},
                                {"peak memory", &CalibrationRow::memory_error}}) {
      ErrorSummary s = SummarizeErrors(rows, column);
      if (s.cells == 0) continue;
      out << "\n" << name << ": median error " << Percent(s.median).substr(1) << ", largest "
          << Percent(s.max).substr(1) << " (" << s.worst << "), over " << s.cells << " cells";
    }
    out << "\n";
  }
  if (uncalibrated.empty()) return;
  out << "\nNot calibrated (each runs in full, and no calibration of it is in the history): "
      << JoinStrings(uncalibrated, ", ") << ". `tune-matrix run --calibrate --configs <config>` calibrates one.\n";
}

}  // namespace tmx::matrix
