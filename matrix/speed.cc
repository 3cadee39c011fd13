#include "matrix/speed.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"

namespace tmx::matrix {
namespace {

// Relative step-time noise of one run: median absolute deviation over median, 0 when not measured.
double RelativeSpread(const SpeedSample& s) {
  if (!s.step_time_spread_s || !s.step_time_s || *s.step_time_s <= 0 || !std::isfinite(*s.step_time_spread_s)) {
    return 0;
  }
  return *s.step_time_spread_s / *s.step_time_s;
}

std::string Percent(double fraction) { return FormatNumber(100 * fraction, 1) + "%"; }

}  // namespace

SpeedSample SpeedOf(const SupportEntry& entry) {
  std::optional<int> threads;
  if (entry.threads) threads = static_cast<int>(*entry.threads);
  return {entry.tokens_per_second, entry.step_time_s, entry.step_time_spread_s, entry.device_name, threads};
}

SpeedSample SpeedOf(const CellResult& record) {
  return {record.tokens_per_second, record.step_time_median_s, record.step_time_spread_s,
          record.provenance.device_name, record.threads};
}

SpeedChange CompareSpeed(const SpeedSample& before, const SpeedSample& after, const SpeedNoise& model) {
  SpeedChange c;
  if (!before.tokens_per_second || !after.tokens_per_second || !(*before.tokens_per_second > 0)) return c;
  // Another device model is not a change of this one.
  if (!before.device_name.empty() && !after.device_name.empty() && before.device_name != after.device_name) {
    return c;
  }
  // Nor is a lane of another width (matrix/lanes.h): 2 threads against 4 are two devices.
  if (before.threads && after.threads && *before.threads != *after.threads) return c;
  if (!before.step_time_s || !after.step_time_s || *before.step_time_s < model.min_step_time_s ||
      *after.step_time_s < model.min_step_time_s) {
    c.verdict = SpeedVerdict::kTooShort;
    return c;
  }
  c.change = *after.tokens_per_second / *before.tokens_per_second - 1;
  c.noise = std::hypot(RelativeSpread(before), RelativeSpread(after));
  c.allowed = std::max(model.max_slowdown, model.noise_factor * c.noise);
  c.verdict = -c.change > c.allowed  ? SpeedVerdict::kSlower
              : c.change > c.allowed ? SpeedVerdict::kFaster
                                     : SpeedVerdict::kWithinNoise;
  return c;
}

std::string DescribeAllowance(const SpeedChange& change, const SpeedNoise& model) {
  return "allowed " + Percent(change.allowed) + " = max(--max-slowdown " + Percent(model.max_slowdown) + ", " +
         FormatNumber(model.noise_factor, 1) + " x combined spread " + Percent(change.noise) + ")";
}

}  // namespace tmx::matrix
