// The cuda device type: NVIDIA GPUs through LibTorch's CUDA backend. Synchronisation and peak memory come
// from AcceleratorHooks (the caching allocator's statistics); the model name needs the CUDA headers, which
// a build without a CUDA toolkit lacks (TUNE_MATRIX_HAS_CUDA unset: the name is then generic).
#include <torch/cuda.h>
#ifdef TUNE_MATRIX_HAS_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "harness/device_hooks.h"

namespace tmx {
namespace {

class CudaHooks final : public AcceleratorHooks {
 public:
  CudaHooks() : AcceleratorHooks(c10::DeviceType::CUDA) {}
  std::string type() const override { return "cuda"; }
  int Count() const override {
    try {
      return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
    } catch (const std::exception&) {
      return 0;
    }
  }

 protected:
  void Describe(int index, DeviceInfo* info) const override {
    info->name = "CUDA device " + std::to_string(index);
#ifdef TUNE_MATRIX_HAS_CUDA
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
    info->name = prop->name;
    info->total_memory_bytes = static_cast<int64_t>(prop->totalGlobalMem);
#endif
  }
};

}  // namespace

std::unique_ptr<DeviceHooks> MakeCudaHooks() { return std::make_unique<CudaHooks>(); }

}  // namespace tmx
