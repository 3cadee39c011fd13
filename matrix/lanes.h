// cpu lanes: the host's CPUs split into groups that run cells side by side, each cell pinned to its lane's CPUs
// (SubprocessOptions::cpus), so its threads (ChooseThreads: one per CPU it may use), its tokens/s and its
// disturbance (judged over its lane's CPUs, base/cpu_usage.h) are its lane's. Accelerator cells keep one lane
// per device. Torch-free.
#pragma once

#include <string>
#include <vector>

namespace tmx::matrix {

struct CpuLane {
  std::string name;       // the runner's lane: "cpu" when there is one lane, else "cpu#0", "cpu#1", ...
  std::vector<int> cpus;  // the CPUs it pins its cells to; empty with one lane (nothing pinned)
};

// The lanes a machine gets when none are asked for: one per 4 CPUs of `usable_cpus` left after 2 for each of
// `accelerators` (the process feeding a GPU needs a core or two), at least 1. One lane on 2 cores: two lanes of
// 1 core finish start-up-bound cells sooner (the 62 tiny configs: 52.9 s against 74.5 s), but every cell then
// measures a 1-thread speed, not comparable with the 2-thread records, so they are asked for (--lanes 2).
int DefaultCpuLanes(int usable_cpus, int accelerators);

// `cpus` split into `lanes` lanes of consecutive CPUs whose sizes differ by at most one (the first lanes get the
// extra CPUs). More lanes than CPUs are cut to one per CPU; 0 lanes or no CPUs give one unpinned lane.
std::vector<CpuLane> PlanLanes(const std::vector<int>& cpus, int lanes);

}  // namespace tmx::matrix
