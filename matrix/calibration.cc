#include "matrix/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/stats.h"

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

std::vector<CalibrationRow> CalibrationRows(const std::vector<ConfigSupport>& configs) {
  std::vector<CalibrationRow> rows;
  for (const ConfigSupport& c : configs) {
    for (const auto& [type, e] : c.entries) {
      // A repaired cell ran in full as repaired: its measurements are the repaired config's, and so are its proxies'.
      const std::string& ran = e.repaired_status.empty() ? e.status : e.repaired_status;
      if (!IsRunsStatus(ran) || (!e.extrapolated_step_time_s && !e.extrapolated_peak_memory_gib)) continue;
      CalibrationRow r;
      r.config = c.config;
      r.device_type = type;
      r.proxy = e.proxy;
      r.step_time_s = e.step_time_s;
      r.extrapolated_step_time_s = e.extrapolated_step_time_s;
      r.step_error = RelativeError(e.step_time_s, e.extrapolated_step_time_s);
      r.peak_memory_gib = e.peak_memory_gib;
      r.extrapolated_peak_memory_gib = e.extrapolated_peak_memory_gib;
      r.memory_error = RelativeError(e.peak_memory_gib, e.extrapolated_peak_memory_gib);
      rows.push_back(std::move(r));
    }
  }
  std::sort(rows.begin(), rows.end(), [](const CalibrationRow& a, const CalibrationRow& b) {
    return a.config != b.config ? a.config < b.config : a.device_type < b.device_type;
  });
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
      s.worst = r.config + " on " + r.device_type;
    }
  }
  s.cells = errors.size();
  if (!errors.empty()) s.median = Median(errors);
  return s;
}

void WriteCalibrationTable(const std::vector<CalibrationRow>& rows, std::ostream& out) {
  if (rows.empty()) {
    out << "No cell has been calibrated: `tune-matrix run --calibrate` runs the proxies of cells that run in full "
           "too.\n";
    return;
  }
  out << "| config | device | proxies | step time s (measured) | extrapolated | error | peak GiB (measured) | "
         "extrapolated | error |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const CalibrationRow& r : rows) {
    out << "| `" << r.config << "` | " << r.device_type << " | " << r.proxy << " | " << Fixed(r.step_time_s, 3) << " | "
        << Fixed(r.extrapolated_step_time_s, 3) << " | " << Percent(r.step_error) << " | "
        << Fixed(r.peak_memory_gib, 2) << " | " << Fixed(r.extrapolated_peak_memory_gib, 2) << " | "
        << Percent(r.memory_error) << " |\n";
  }
  for (auto [name, column] : {std::pair<const char*, std::optional<double> CalibrationRow::*>{
                                  "step time", &CalibrationRow::step_error},
                              {"peak memory", &CalibrationRow::memory_error}}) {
    ErrorSummary s = SummarizeErrors(rows, column);
    if (s.cells == 0) continue;
    out << "\n" << name << ": median error " << Percent(s.median).substr(1) << ", largest " << Percent(s.max).substr(1)
        << " (" << s.worst << "), over " << s.cells << " cells";
  }
  out << "\n";
}

}  // namespace tmx::matrix
