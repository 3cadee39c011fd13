// The torch side of the device table: per device type, the hooks that count, probe, synchronise and read the
// memory of its devices, held by the type's DeviceTypeTraits entry (device_types.h). Each built-in type
// implements DeviceHooks in its own file (device_cpu.cc, device_cuda.cc, device_xpu.cc, device_mps.cc,
// device_meta.cc), attached to its entry on first use; an out-of-tree backend (PrivateUse1) registers its
// traits and hooks in one call, RegisterDeviceType(traits, hooks).
//
// Probing runs small operations, so it is done only for the devices a command needs: `tune run` probes the
// one device its config names, `tune devices` every device. A device type whose hooks are never asked does
// no work at all (no context created, no memory touched).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/DeviceType.h>

#include "base/status.h"
#include "harness/device.h"

namespace tmx {

// A peak-memory reading and where it came from ("cuda_allocator", "process_rss", ...).
struct MemoryReading {
  int64_t bytes = 0;
  std::string source;
};

class DeviceHooks {
 public:
  virtual ~DeviceHooks() = default;
  // The DeviceTypes() name these hooks serve.
  virtual std::string type() const = 0;
  // How many devices of this type this process can use, without running operations on them. Never throws.
  virtual int Count() const = 0;
  // Fills `info` (id, type, index and distributed_backend are set by the caller) with the device's name,
  // memory and capabilities, running small operations on it. REQUIRES: 0 <= index < Count() (index is -1 for
  // types without one).
  virtual void Probe(int index, DeviceInfo* info) const = 0;
  // Blocks until the device has finished all queued work, so a timer read afterwards measures it.
  virtual void Synchronize(int /*index*/) const {}
  // Peak memory since the process started or the last ResetPeakMemory; nullopt when it cannot be measured.
  virtual std::optional<MemoryReading> PeakMemory(int index) const = 0;
  virtual void ResetPeakMemory(int /*index*/) const {}
};

// The hooks every LibTorch accelerator shares (cuda, xpu, and out-of-tree backends whose allocator is a
// c10::DeviceAllocator): synchronising through c10's DeviceGuardImpl for the type, peak memory from the
// caching allocator's statistics ("<type>_allocator"), total memory from the allocator, the dtype probes.
// Subclasses count their devices and name them.
class AcceleratorHooks : public DeviceHooks {
 public:
  explicit AcceleratorHooks(c10::DeviceType torch_type) : torch_type_(torch_type) {}
  void Probe(int index, DeviceInfo* info) const final;
  void Synchronize(int index) const override;
  std::optional<MemoryReading> PeakMemory(int index) const override;
  void ResetPeakMemory(int index) const override;

 protected:
  // Sets the device's name (and, where the backend knows better than the allocator, its total memory).
  virtual void Describe(int index, DeviceInfo* info) const = 0;

 private:
  c10::DeviceType torch_type_;
};

// The built-in hooks, one file each.
std::unique_ptr<DeviceHooks> MakeCpuHooks();   // device_cpu.cc
std::unique_ptr<DeviceHooks> MakeCudaHooks();  // device_cuda.cc
std::unique_ptr<DeviceHooks> MakeXpuHooks();   // device_xpu.cc
std::unique_ptr<DeviceHooks> MakeMpsHooks();   // device_mps.cc
std::unique_ptr<DeviceHooks> MakeMetaHooks();  // device_meta.cc

// Registers a device type with its hooks in one entry: how an out-of-tree backend (PrivateUse1 renamed) adds
// itself. InvalidArgument as the torch-free RegisterDeviceType, and when hooks->type() is not traits.name.
// Not thread-safe: register at start-up.
Status RegisterDeviceType(DeviceTypeTraits traits, std::unique_ptr<DeviceHooks> hooks);

// Attaches hooks to a type registered without them (AttachDeviceHooks under hooks->type()); InvalidArgument
// when the type is not in the device table or already has hooks. Not thread-safe: register at start-up.
Status RegisterDeviceHooks(std::unique_ptr<DeviceHooks> hooks);
// Detaches hooks added to a type registered after the built-in ones (tests).
void UnregisterDeviceHooks(const std::string& type);

// The hooks of `type`. REQUIRES: a registered type; every built-in type has hooks (tested).
const DeviceHooks& HooksFor(const std::string& type);

// The device table's entry for a LibTorch device type (c10's lowercase name: "cuda", or the name an
// out-of-tree backend gave PrivateUse1), or nullptr when it has none. For code that holds tensors and asks
// its device type a question (DeviceTypeTraits::own_generator, native_gqa_attention).
const DeviceTypeTraits* DeviceTypeOf(c10::DeviceType type);

// Every device of every type, cpu first, probed (for `tune devices`).
std::vector<DeviceInfo> ProbeAllDevices();

// Probes only the device `selector` names (for auto: the present type with the lowest auto_rank). A device
// that is not present is Unavailable, naming the devices that are (counted, not probed).
StatusOr<DeviceInfo> ProbeDevice(const DeviceSelector& selector);

// The peak memory of `device` by its hooks, or nullopt.
std::optional<MemoryReading> PeakMemory(const DeviceInfo& device);

// Runs a small matmul in `dtype_name` ("bf16" or "fp16") with backward on `device_id` and compares it with
// fp32; returns "" when it works, otherwise the reason. Shared by every type's Probe.
std::string ProbeMatmulBackward(const std::string& device_id, const std::string& dtype_name);
// Sets bf16_matmul_backward / fp16_matmul_backward (and notes) of `info` by ProbeMatmulBackward.
void ProbeDtypes(DeviceInfo* info);

// The process's peak resident set size, the memory reading of host-memory devices: the kernel's high-water
// mark of this program's memory (VmHWM; getrusage where /proc is missing), which excludes the memory of the
// process it was forked from.
MemoryReading ProcessPeakRss();

// The LibTorch version this binary was built against, e.g. "2.11.0".
std::string TorchVersion();

}  // namespace tmx
