#include "harness/matmul_peak.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "base/cpu_usage.h"
#include "harness/device_hooks.h"
#include "harness/openmp_wait.h"
#include "harness/torch_dtypes.h"

namespace tmx {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

bool Multiplies(const DeviceInfo& device, const std::string& dtype) {
  if (dtype == "bf16") return device.bf16_matmul_backward;
  if (dtype == "fp16") return device.fp16_matmul_backward;
  return true;
}

// The best rate of square products at `sizes` in `dtype` on `device`, FLOP/s.
double BestRate(const DeviceInfo& device, c10::ScalarType dtype, const std::vector<int64_t>& sizes,
                double seconds_per_size) {
  const DeviceHooks& hooks = HooksFor(device.type);
  const auto options = torch::TensorOptions().dtype(dtype).device(torch::Device(device.id));
  double best = 0;
  for (int64_t n : sizes) {
    torch::NoGradGuard no_grad;
    torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
    torch::Tensor c = torch::empty({n, n}, options);
    auto start = Clock::now();
    torch::mm_out(c, a, b);  // warm-up: first-call allocations and kernel selection
    hooks.Synchronize(device.index);
    const double first = Seconds(start, Clock::now());
    // Products in doubling batches, synchronised after each batch, until the size's time is spent.
    int64_t products = 0;
    double elapsed = 0;
    start = Clock::now();
    for (int64_t batch = 1; elapsed < seconds_per_size; batch *= 2) {
      for (int64_t i = 0; i < batch; ++i) torch::mm_out(c, a, b);
      hooks.Synchronize(device.index);
      products += batch;
      elapsed = Seconds(start, Clock::now());
    }
    best = std::max(best, 2.0 * static_cast<double>(n) * n * n * static_cast<double>(products) / elapsed);
    if (first > seconds_per_size) break;  // larger sizes would take longer still
  }
  return best;
}

}  // namespace

std::string ChooseThreads() {
  const std::string wait = WaitPolicyNote();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (omp != nullptr && *omp != '\0') {
    return "Threads: " + std::to_string(at::get_num_threads()) + " (OMP_NUM_THREADS=" + omp + ")" + wait;
  }
  const UsableCores cores = ReadUsableCores();
  if (cores.count >= 2) {
    // The look `tune run` took as it started (harness/openmp_wait.h), else one now.
    const StartupLoad& startup = LoadAtStartup();
    const ThreadChoice choice =
        startup.load.known ? ThreadsBesideLoad(cores, startup.load, startup.window_s)
                           : ThreadsBesideLoad(cores, ProbeMachineLoad(kThreadProbeS, ReadAffinityCpus()), kThreadProbeS);
    if (choice.busy) {
      at::set_num_threads(choice.threads);
      return "Threads: " + std::to_string(choice.threads) + wait + ". warning: " + choice.warning;
    }
  }
  at::set_num_threads(cores.count);
  return "Threads: " + std::to_string(cores.count) + ", one per core this process may use: " + cores.Describe();
}

Status MeasureMatmulPeaks(const MatmulPeakOptions& options, DeviceInfo* device) {
  std::vector<int64_t> sizes = options.sizes;
  if (sizes.empty()) {
    sizes = device->traits().HostMemory()
                ? std::vector<int64_t>{512, 1024, 2048}
                : std::vector<int64_t>{2048, 4096, 8192};
  }
  // The device's peak: every core (or OMP_NUM_THREADS's choice), whatever else runs.
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (omp == nullptr || *omp == '\0') at::set_num_threads(ReadUsableCores().count);
  for (const std::string& name : options.dtypes) {
    StatusOr<c10::ScalarType> dtype = ScalarTypeNamed(name, "matmul peak");
    TM_RETURN_IF_ERROR(dtype.status());
    if (!Multiplies(*device, name)) continue;
    try {
      device->matmul_peak_flops[name] = BestRate(*device, *dtype, sizes, options.seconds_per_size);
    } catch (const std::exception& e) {  // a device too small for the products (a plugin's capacity): skipped
      const std::string what = e.what();
      device->notes.push_back("matmul peak " + name + " not measured: " + what.substr(0, what.find('\n')));
    }
  }
  device->matmul_peak_threads = at::get_num_threads();
  return Status::OK();
}

}  // namespace tmx
