// A tiny device plugin: PrivateUse1 renamed to TM_TEST_PLUGIN_NAME with a guard for one device, PyTorch's hooks
// with a generator, and device-table hooks that describe it without running anything (it has no allocator or
// kernels). It includes only the device-plugin SDK's headers, so tests/device_plugin_project builds it outside
// the tree (tests/device_plugin_e2e_test.cc); harness/CMakeLists.txt builds it in the tree several times with
// switches, one per refusal harness/device_plugin_test.cc checks:
//   TM_TEST_PLUGIN_NO_ENTRY  exports no entry point
//   TM_TEST_PLUGIN_NO_GUARD  registers no DeviceGuardImpl
//   TM_TEST_PLUGIN_NO_HOOKS  registers its type without DeviceHooks
//   TM_TEST_PLUGIN_NO_TORCH_HOOKS  registers no PrivateUse1HooksInterface
//   TM_TEST_PLUGIN_NO_GENERATOR  its PrivateUse1HooksInterface has no default generator
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "harness/device_hooks.h"
#include "harness/device_plugin.h"

namespace {

constexpr const char* kName = TM_TEST_PLUGIN_NAME;

class TestGuard final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device) const override { return Here(); }
  c10::Device getDevice() const override { return Here(); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }

 private:
  static c10::Device Here() { return c10::Device(c10::DeviceType::PrivateUse1, 0); }
};

// A generator on the device: the cpu one's algorithm, its device and dispatch key PrivateUse1's.
class TestGenerator final : public at::CPUGeneratorImpl {
 public:
  TestGenerator() {
    device_ = c10::Device(c10::DeviceType::PrivateUse1, 0);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

// What ATen asks of PrivateUse1 even when no tensor is on it (autograd's backward asks hasPrimaryContext).
class TestTorchHooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  at::Device getDeviceFromPtr(void*) const override { return c10::Device(c10::DeviceType::PrivateUse1, 0); }
#ifndef TM_TEST_PLUGIN_NO_GENERATOR
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    static const at::Generator generator = at::make_generator<TestGenerator>();
    return generator;
  }
#endif
};

class TestHooks final : public tmx::DeviceHooks {
 public:
  std::string type() const override { return kName; }
  int Count() const override { return 1; }
  void Probe(int, tmx::DeviceInfo* info) const override {
    info->name = "test device plugin";
    info->total_memory_bytes = int64_t{1} << 30;
    info->notes.push_back("a test plugin: holds no tensors");
  }
  std::optional<tmx::MemoryReading> PeakMemory(int) const override { return std::nullopt; }
};

}  // namespace

#ifndef TM_TEST_PLUGIN_NO_ENTRY
extern "C" void tm_device_plugin_register(tmx::DevicePluginRegistrar* registrar) {
  tmx::DeviceTypeTraits traits;
  traits.name = kName;
  traits.takes_index = true;
  traits.doc = "test device plugin (tests/device_plugin_project/test_device_plugin.cc)";
#ifdef TM_TEST_PLUGIN_NO_HOOKS
  if (!registrar->Register(traits, nullptr).ok()) return;
#else
  if (!registrar->Register(traits, std::make_unique<TestHooks>()).ok()) return;
#endif
  c10::register_privateuse1_backend(kName);
#ifndef TM_TEST_PLUGIN_NO_GUARD
  static c10::impl::DeviceGuardImplRegistrar guard(c10::DeviceType::PrivateUse1, new TestGuard());
#endif
#ifndef TM_TEST_PLUGIN_NO_TORCH_HOOKS
  at::RegisterPrivateUse1HooksInterface(new TestTorchHooks());
#endif
}
#endif
