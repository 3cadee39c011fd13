// The device table: one entry per device type, and the one place that knows what a type is.
//
// PyTorch's habit (c10's DeviceGuardImplInterface, registered once per type): everything that depends on
// the device type reads its entry here instead of switching on names. The entry holds what is known
// without running anything (spelling, index, auto order, collective backend, which features the type
// offers); the torch-side hooks that probe, synchronise and read memory are its twin in device_hooks.h,
// registered under the same name.
//
// Adding a device type: a DeviceTypeTraits entry in device_types.cc (or RegisterDeviceType for an
// out-of-tree backend), its DeviceHooks in device_<type>.cc, and a test. Out-of-tree backends appear in
// PyTorch as PrivateUse1 under the name the backend gave it (torch.utils.rename_privateuse1_backend, e.g.
// "npu"); such a backend registers both its traits and its hooks under that name before the first device
// is parsed, and then is a device type like any other.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace tmx {

struct DeviceTypeTraits {
  // How configs and the command line spell the type: "cpu", "cuda".
  std::string name;
  // Whether a device string may carry an index ("cuda:1"). Types without one have a single device.
  bool takes_index = false;
  // device=auto tries types in ascending auto_rank and takes the first present; -1 never chooses it.
  int auto_rank = -1;
  // The c10d collective backend distributed recipes use on this type: "gloo", "nccl", "xccl"; "" none.
  std::string distributed_backend;
  // Ranks a distributed recipe's matrix cell starts on one device of this type: processes that share the
  // device (cpu: 2 gloo ranks sharing the host's cores and memory), or 1 where each rank needs a device of
  // its own (a cell holds one device until cells can hold several).
  int matrix_ranks = 1;
  // Whether the type holds data and can train (false for meta, which holds shapes only).
  bool trains = true;
  // Whether activation offloading can overlap copies to pinned host memory with compute (side streams).
  bool activation_offloading = false;
  // Where a device's peak memory is read: the process's peak resident set size (the device's memory is the
  // host's, so the matrix also limits a cell's resident memory), the device's caching allocator, or nowhere.
  enum class PeakMemory { kProcessRss, kAllocator, kNone };
  PeakMemory peak_memory = PeakMemory::kNone;
  // Column order of reports: ascending, then by name.
  int report_rank = 100;
  // One line for `tune devices` and error messages.
  std::string doc;
};

// Every registered type: the built-in cpu, cuda, xpu, mps and meta, then registered ones in order.
const std::vector<DeviceTypeTraits>& DeviceTypes();

// The entry named `name`, or nullptr.
const DeviceTypeTraits* FindDeviceType(const std::string& name);

// Adds an out-of-tree type (PrivateUse1 renamed). InvalidArgument for a name that is taken, empty, or not a
// plain lowercase word. Not thread-safe: register at start-up, before devices are parsed.
Status RegisterDeviceType(DeviceTypeTraits traits);

// Removes a type added by RegisterDeviceType (tests); built-in types stay.
void UnregisterDeviceType(const std::string& name);

// Sorts and de-duplicates device type names into report order (report_rank, then name; unknown names last).
std::vector<std::string> OrderDeviceTypes(std::vector<std::string> device_types);

// A parsed device string, made once at the command-line edge: "cpu", "cuda", "cuda:1", "auto".
struct DeviceSelector {
  bool is_auto = false;
  std::string type;  // a DeviceTypes() name; empty when is_auto
  int index = -1;    // -1: the first device of that type
  // The canonical spelling ("cuda:1", "cpu", "auto").
  std::string ToString() const;
};

// InvalidArgument naming the string, with the nearest type ("did you mean") and the accepted forms.
StatusOr<DeviceSelector> ParseDeviceSelector(const std::string& text);

}  // namespace tmx
