#include "matrix/lanes.h"

#include <algorithm>

namespace tmx::matrix {

int DefaultCpuLanes(int usable_cpus, int accelerators) {
  return std::max(1, (usable_cpus - 2 * std::max(0, accelerators)) / 4);
}

std::vector<CpuLane> PlanLanes(const std::vector<int>& cpus, int lanes) {
  lanes = std::min(lanes, static_cast<int>(cpus.size()));
  if (lanes <= 1) return {CpuLane{"cpu", {}}};
  std::vector<CpuLane> plan;
  const size_t base = cpus.size() / static_cast<size_t>(lanes), extra = cpus.size() % static_cast<size_t>(lanes);
  size_t next = 0;
  for (size_t i = 0; i < static_cast<size_t>(lanes); ++i) {
    const size_t size = base + (i < extra ? 1 : 0);
    CpuLane lane{"cpu#" + std::to_string(i), std::vector<int>(cpus.begin() + next, cpus.begin() + next + size)};
    next += size;
    plan.push_back(std::move(lane));
  }
  return plan;
}

}  // namespace tmx::matrix
