// A device's matrix-multiply peak: the ceiling a training step's model FLOP rate (recipes/flops.h) is compared
// with. Measured, not taken from a data sheet: square products C = A x B (torch::mm, the path nn::Linear takes)
// at a few sizes, the best rate of each dtype, at the threads the recipes compute with (ChooseThreads), so a
// cell's share of the peak says how much of what this device does for its dtype the step used. The method is
// benchmarks/gemm_benchmark.cc's, shortened to a second or two per dtype so the matrix measures it every run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/device.h"

namespace tmx {

struct MatmulPeakOptions {
  // Sizes n of the square products tried, smallest first; the peak is the best. Empty: by device, 512, 1024
  // and 2048 on the host, 2048, 4096 and 8192 on an accelerator.
  std::vector<int64_t> sizes;
  // Dtypes measured, as configs spell them. One the device cannot multiply in (DeviceInfo's probes) is skipped.
  std::vector<std::string> dtypes = {"bf16", "fp32"};
  // Time spent on each size after one warm-up product. A size whose single product takes longer than this
  // ends the dtype's sizes (a slow dtype, fp16 on a CPU without it, stays quick to measure).
  double seconds_per_size = 0.25;
};

// ATen's CPU threads in a recipe: one per core this process may use (affinity and cgroup quota,
// base/cpu_usage.h; a container given 2 of 16 cores must not run 16 threads), unless OMP_NUM_THREADS chose (the
// launcher sets it per rank). Beside other work (its cores looked at for kThreadProbeS first), the cores it leaves
// free (base/cpu_usage.h's ThreadsBesideLoad). Returns the line that says which, with the warning when busy.
std::string ChooseThreads();
// How long ChooseThreads looks at the cores: a few of /proc/stat's 1/100 s ticks per core, enough to tell a core
// kept busy from an idle one.
inline constexpr double kThreadProbeS = 0.2;

// Measures `device`'s peak per dtype into device->matmul_peak_flops (FLOP/s) and matmul_peak_threads (ATen's
// threads while measuring). InvalidArgument for a dtype name that is not bf16, fp16 or fp32. A dtype whose products
// the device cannot hold or run (out of memory) is skipped with a note in device->notes.
Status MeasureMatmulPeaks(const MatmulPeakOptions& options, DeviceInfo* device);

}  // namespace tmx
