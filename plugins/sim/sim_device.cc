// The sim device's runtime and its registration: one device (sim:0), its guard, PyTorch's PrivateUse1 hooks with
// a generator, the device table's entry and hooks, and the plugin's entry point.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "harness/device_hooks.h"
#include "harness/device_plugin.h"
#include "plugins/sim/sim.h"

namespace tmx::sim {
namespace {

c10::Device Sim0() { return c10::Device(c10::DeviceType::PrivateUse1, 0); }

// One device, one stream; work is done when a kernel returns, so synchronising has nothing to wait for.
class Guard final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device) const override { return Sim0(); }
  c10::Device getDevice() const override { return Sim0(); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.index() <= 0, "sim: there is one sim device (sim:0), not ", d);
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void synchronizeDevice(c10::DeviceIndex) const override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
};

// The device's generator: the cpu one's algorithm under the device's name and dispatch key.
class Generator final : public at::CPUGeneratorImpl {
 public:
  Generator() {
    device_ = Sim0();
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

class TorchHooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  at::Device getDeviceFromPtr(void*) const override { return Sim0(); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    static const at::Generator generator = at::make_generator<Generator>();
    return generator;
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override { return at::make_generator<Generator>(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(false, "sim: resizing a storage in place is not supported (", newsize, " bytes asked)");
  }
};

// The device table's hooks: statistics and total memory from the allocator (AcceleratorHooks).
class Hooks final : public AcceleratorHooks {
 public:
  Hooks() : AcceleratorHooks(c10::DeviceType::PrivateUse1) {}
  std::string type() const override { return "sim"; }
  int Count() const override { return 1; }

 protected:
  void Describe(int, DeviceInfo* info) const override {
    info->name = "tune-matrix simulated accelerator";
    if (!Bf16Enabled()) info->notes.push_back("bf16 switched off (TM_SIM_BF16=0)");
  }
};

DeviceTypeTraits Traits() {
  DeviceTypeTraits t;
  t.name = "sim";
  t.takes_index = true;
  t.peak_memory = DeviceTypeTraits::PeakMemory::kAllocator;
  t.own_generator = true;
  t.runtime_bytes = 0;  // no context: its allocator holds a run's tensors and nothing else
  t.report_rank = 50;
  t.doc = "simulated accelerator (plugins/sim): PrivateUse1 with its own allocator, capacity TM_SIM_MEMORY";
  return t;
}

}  // namespace
}  // namespace tmx::sim

extern "C" void tm_device_plugin_register(tmx::DevicePluginRegistrar* registrar) {
  std::string error;
  tmx::sim::CapacityFromEnvironment(&error);
  TORCH_CHECK(error.empty(), error);
  if (!registrar->Register(tmx::sim::Traits(), std::make_unique<tmx::sim::Hooks>()).ok()) return;
  c10::register_privateuse1_backend("sim");
  c10::SetAllocator(c10::DeviceType::PrivateUse1, tmx::sim::Allocator());
  static c10::impl::DeviceGuardImplRegistrar guard(c10::DeviceType::PrivateUse1, new tmx::sim::Guard());
  at::RegisterPrivateUse1HooksInterface(new tmx::sim::TorchHooks());
}
