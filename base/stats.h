// Summary statistics for measurements (step times, throughput).
#pragma once

#include <cstddef>
#include <vector>

namespace tmx {

// Median of the values after the first `skip` (warm-up); of all values when no more than `skip` exist.
// 0 for an empty input.
double MedianAfter(const std::vector<double>& values, size_t skip);

inline double Median(const std::vector<double>& values) { return MedianAfter(values, 0); }

}  // namespace tmx
