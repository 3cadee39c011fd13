#include <fstream>
#include <sstream>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/mps.h>
#include <torch/version.h>
#ifdef TUNE_MATRIX_HAS_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "harness/device.h"

// Device probing: the part of devices that runs LibTorch (see device.h).
namespace tmx {
namespace {

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "CPU";
}

// Physical memory, or the cgroup limit when it is lower (containers, CI runners).
int64_t CpuMemoryBytes() {
  int64_t total = 0;
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") {
      total = kib * 1024;
      break;
    }
  }
  std::ifstream cg("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (cg >> limit && limit != "max") {
    int64_t v = std::stoll(limit);
    if (v > 0 && (total == 0 || v < total)) total = v;
  }
  return total;
}

// Runs a small matmul in `dtype` with backward on `device` and compares it with fp32. Returns "" when it
// works, otherwise the reason.
std::string ProbeMatmulBackward(const at::Device& device, at::ScalarType dtype) {
  try {
    at::manual_seed(0);
    at::Tensor a = at::randn({32, 48});
    at::Tensor b = at::randn({48, 16});
    at::Tensor a_dev = a.to(device, dtype).detach().requires_grad_(true);
    at::Tensor b_dev = b.to(device, dtype).detach().requires_grad_(true);
    at::Tensor out = at::matmul(a_dev, b_dev);
    out.sum().backward();
    at::Tensor expect = at::matmul(a, b);
    at::Tensor got = out.detach().to(at::kCPU, at::kFloat);
    at::Tensor grad = a_dev.grad().to(at::kCPU, at::kFloat);
    if (!got.isfinite().all().item<bool>() || !grad.isfinite().all().item<bool>()) return "produced non-finite values";
    double err = (got - expect).abs().max().item<double>();
    double scale = expect.abs().max().item<double>();
    if (err > 0.05 * scale) return "result differs from fp32 by " + std::to_string(err);
    return "";
  } catch (const std::exception& e) {
    std::string what = e.what();
    return "raised: " + what.substr(0, what.find('\n'));
  }
}

void ProbeDtypes(DeviceInfo* info, const at::Device& device) {
  std::string bf16 = ProbeMatmulBackward(device, at::kBFloat16);
  info->bf16_matmul_backward = bf16.empty();
  if (!bf16.empty()) info->notes.push_back("bf16 matmul+backward " + bf16);
  std::string fp16 = ProbeMatmulBackward(device, at::kHalf);
  info->fp16_matmul_backward = fp16.empty();
  if (!fp16.empty()) info->notes.push_back("fp16 matmul+backward " + fp16);
}

std::vector<DeviceInfo> Probe() {
  std::vector<DeviceInfo> devices;
  DeviceInfo cpu;
  cpu.id = "cpu";
  cpu.type = DeviceType::kCpu;
  cpu.name = CpuModelName();
  cpu.total_memory_bytes = CpuMemoryBytes();
  cpu.memory_stats = true;  // peak resident memory of the process (getrusage)
  cpu.distributed_backend = "gloo";
  cpu.probed = true;
  ProbeDtypes(&cpu, at::Device(at::kCPU));
  devices.push_back(cpu);

  int cuda_count = 0;
  try {
    cuda_count = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  } catch (const std::exception&) {
    cuda_count = 0;
  }
  for (int i = 0; i < cuda_count; ++i) {
    DeviceInfo d;
    d.id = "cuda:" + std::to_string(i);
    d.type = DeviceType::kCuda;
    d.index = i;
    d.name = "CUDA device " + std::to_string(i);
    d.probed = true;
#ifdef TUNE_MATRIX_HAS_CUDA
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(i);
    d.name = prop->name;
    d.total_memory_bytes = static_cast<int64_t>(prop->totalGlobalMem);
    d.memory_stats = true;
    d.distributed_backend = "nccl";
#else
    d.notes.push_back("memory statistics need a LibTorch built with CUDA headers");
#endif
    ProbeDtypes(&d, at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i)));
    devices.push_back(d);
  }

  if (torch::mps::is_available()) {
    DeviceInfo d;
    d.id = "mps";
    d.type = DeviceType::kMps;
    d.name = "Apple MPS";
    d.total_memory_bytes = CpuMemoryBytes();  // unified memory
    d.distributed_backend = "gloo";
    d.probed = true;
    ProbeDtypes(&d, at::Device(at::kMPS));
    devices.push_back(d);
  }
  if (at::hasXPU()) {
    DeviceInfo d;
    d.id = "xpu:0";
    d.type = DeviceType::kXpu;
    d.index = 0;
    d.name = "Intel XPU";
    d.distributed_backend = "xccl";
    d.probed = true;
    ProbeDtypes(&d, at::Device(at::kXPU, 0));
    devices.push_back(d);
  }
  return devices;
}

}  // namespace

const std::vector<DeviceInfo>& AvailableDevices() {
  static const std::vector<DeviceInfo> devices = Probe();
  return devices;
}

std::string TorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace tmx
