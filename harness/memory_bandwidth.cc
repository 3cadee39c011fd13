#include "harness/memory_bandwidth.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>

#include "base/cpu_usage.h"
#include "harness/device_hooks.h"

namespace tmx {
namespace {

using Clock = std::chrono::steady_clock;

int64_t BufferBytes(const MemoryBandwidthOptions& options, const DeviceInfo& device) {
  if (options.buffer_bytes > 0) return options.buffer_bytes;
  int64_t bytes = device.traits().HostMemory() ? int64_t{256} << 20 : int64_t{1} << 30;
  if (device.total_memory_bytes > 0) bytes = std::min(bytes, device.total_memory_bytes / 8);
  return bytes;
}

// The best rate of `pass` (moving `bytes` each time) over `repeats` timed passes after a warm-up, bytes/s.
double BestRate(const DeviceInfo& device, int repeats, double bytes, const std::function<void()>& pass) {
  const DeviceHooks& hooks = HooksFor(device.type);
  pass();
  hooks.Synchronize(device.index);
  double best = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    pass();
    hooks.Synchronize(device.index);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (s > 0) best = std::max(best, bytes / s);
  }
  return best;
}

}  // namespace

Status MeasureMemoryBandwidth(const MemoryBandwidthOptions& options, DeviceInfo* device) {
  if (options.repeats < 1) {
    return Status::InvalidArgument("memory bandwidth: repeats is " + std::to_string(options.repeats) +
                                   "; fix: time at least one pass");
  }
  const int64_t elements = BufferBytes(options, *device) / 4;
  device->memory_bandwidth.clear();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (omp == nullptr || *omp == '\0') at::set_num_threads(ReadUsableCores().count);
  try {
    torch::NoGradGuard no_grad;
    const auto on = torch::TensorOptions().dtype(torch::kFloat).device(torch::Device(device->id));
    torch::Tensor a = torch::ones({elements}, on), b = torch::full({elements}, 2.0f, on);
    torch::Tensor c = torch::full({elements}, 0.5f, on);
    const double buffer = static_cast<double>(elements) * 4;
    const double copy = BestRate(*device, options.repeats, 2 * buffer, [&] { b.copy_(a); });
    const double triad = BestRate(*device, options.repeats, 3 * buffer, [&] { torch::add_out(a, b, c, 3.0); });
    device->memory_bandwidth = {{"copy", copy}, {"triad", triad}};
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    device->notes.push_back("memory bandwidth not measured: " + what);
  }
  return Status::OK();
}

}  // namespace tmx
