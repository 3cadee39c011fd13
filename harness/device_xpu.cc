// The xpu device type: Intel GPUs through LibTorch's XPU backend. Counting goes through ATen's XPU hooks
// (no SYCL headers needed); synchronisation and peak memory through AcceleratorHooks, so a step is timed
// only after the device finished it and the peak is the device allocator's, not the host's.
#include <ATen/Context.h>
#include <ATen/detail/XPUHooksInterface.h>

#include "harness/device_hooks.h"

namespace tmx {
namespace {

class XpuHooks final : public AcceleratorHooks {
 public:
  XpuHooks() : AcceleratorHooks(c10::DeviceType::XPU) {}
  std::string type() const override { return "xpu"; }
  int Count() const override {
    try {
      return at::hasXPU() ? static_cast<int>(at::detail::getXPUHooks().getNumGPUs()) : 0;
    } catch (const std::exception&) {
      return 0;
    }
  }

 protected:
  void Describe(int index, DeviceInfo* info) const override { info->name = "Intel XPU " + std::to_string(index); }
};

}  // namespace

std::unique_ptr<DeviceHooks> MakeXpuHooks() { return std::make_unique<XpuHooks>(); }

}  // namespace tmx
