#include "base/stats.h"

#include <algorithm>

namespace tmx {

double MedianAfter(const std::vector<double>& values, size_t skip) {
  std::vector<double> v(values.begin() + static_cast<std::ptrdiff_t>(values.size() > skip ? skip : 0), values.end());
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tmx
