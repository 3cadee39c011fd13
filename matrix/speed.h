// The noise model for tokens/s: whether a cell got slower or faster between two measurements by more than
// run-to-run noise. `tune-matrix check` (a recorded entry against a fresh observation) and `tune-matrix
// compare` (two journals) both ask here, so they never disagree about what a regression is.
#pragma once

#include <optional>
#include <string>

#include "matrix/cell.h"
#include "matrix/support_entry.h"

namespace tmx::matrix {

// How much tokens/s may move before it counts as a change.
struct SpeedNoise {
  // Tokens/s may change by this fraction without being a change (default 10%) ...
  double max_slowdown = 0.10;
  // ... or by up to this many times the two runs' combined relative step-time spread, when that is larger:
  // sqrt(r_before^2 + r_after^2) with r = step_time_spread_s / step_time_s (median absolute deviation over
  // median). Results measured on different device models, or with different threads, are not compared.
  double noise_factor = 3.0;
  // Speed is compared only when the median step takes at least this long (seconds) on both sides. Shorter
  // steps vary from run to run by more than their in-run spread shows: five runs of tiny/full_single_device
  // (about 0.04 s a step) on a 2-core CPU gave 29k to 53k tokens/s.
  double min_step_time_s = 0.25;
};

// One measurement's speed, from a support entry or a journal record.
struct SpeedSample {
  std::optional<double> tokens_per_second;
  std::optional<double> step_time_s;         // median step time after warm-up
  std::optional<double> step_time_spread_s;  // median absolute deviation of those step times
  std::string device_name;                   // "" when unknown
  // ATen threads of the measurement (a cpu lane's width, matrix/lanes.h); unknown where not recorded (an
  // entry written before entries kept them).
  std::optional<int> threads;
};
SpeedSample SpeedOf(const SupportEntry& entry);
SpeedSample SpeedOf(const CellResult& record);

enum class SpeedVerdict {
  kNotCompared,  // a side lacks tokens/s, the earlier one is not positive, or the device models or the
                 // threads (both known) differ
  kTooShort,     // a side lacks a step time or its steps are shorter than min_step_time_s
  kWithinNoise,
  kSlower,
  kFaster,
};

struct SpeedChange {
  SpeedVerdict verdict = SpeedVerdict::kNotCompared;
  double change = 0;   // after / before - 1: -0.2 is 20% slower
  double noise = 0;    // the combined relative step-time spread of the two runs
  double allowed = 0;  // max(max_slowdown, noise_factor * noise): |change| beyond it is a change
};

SpeedChange CompareSpeed(const SpeedSample& before, const SpeedSample& after, const SpeedNoise& model);

// "allowed 10.0% = max(--max-slowdown 10.0%, 3.0 x combined spread 1.4%)", for messages.
std::string DescribeAllowance(const SpeedChange& change, const SpeedNoise& model);

}  // namespace tmx::matrix
