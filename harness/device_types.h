// The device table: one entry per device type, and the one place that knows what a type is.
//
// PyTorch's habit (c10's DeviceGuardImplInterface, registered once per type): everything that depends on
// the device type reads its entry here instead of switching on names. The entry holds what is known
// without running anything (spelling, index, auto order, collective backend, which features the type
// offers) and, in programs that link LibTorch, the torch-side hooks that probe, synchronise and read memory
// (device_hooks.h), so that a type's facts live in one entry under one name.
//
// Every type is added by RegisterDeviceType. The built-in ones (cpu, cuda, xpu, mps, meta) are registered
// by this file when the table is first read; this library is torch-free, so their hooks are attached to
// their entries by tm_harness (device_hooks.cc) on first use. An out-of-tree backend appears in PyTorch as
// PrivateUse1 under the name the backend gave it (torch.utils.rename_privateuse1_backend, e.g. "npu"); it
// registers its traits with its hooks in one call (device_hooks.h's RegisterDeviceType) before the first
// device is parsed, and then is a device type like any other.
//
// Adding a built-in device type: its DeviceTypeTraits in BuiltinTypes() (device_types.cc), its DeviceHooks
// in device_<type>.cc (one line in device_hooks.cc's AttachBuiltinHooks), and a test.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx {

class DeviceHooks;  // device_hooks.h, in the torch-side library

struct DeviceTypeTraits {
  // How configs and the command line spell the type: "cpu", "cuda".
  std::string name;
  // Whether a device string may carry an index ("cuda:1"). Types without one have a single device.
  bool takes_index = false;
  // device=auto tries types in ascending auto_rank and takes the first present; -1 never chooses it.
  int auto_rank = -1;
  // The c10d collective backend distributed recipes use on this type: "gloo", "nccl", "xccl"; "" none. The
  // backend's own entry (recipes/distributed/collective_backends.h) says whether this LibTorch has it.
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
  // Whether the device's memory is the host's (read as the process's resident set): what estimates, the
  // matrix's host memory limit and lanes, and the ranks sharing one host ask.
  bool HostMemory() const { return peak_memory == PeakMemory::kProcessRss; }
  // What the device's runtime holds beside a run's tensors, for memory estimates; -1 for the default by
  // peak_memory: 1 GiB where the memory is the host's (the process: LibTorch's libraries, allocator caches),
  // 0.5 GiB on an accelerator (a context and workspaces, cuda's). A simulated device whose allocator counts only
  // the tensors says 0 (the sim plugin: the plan predicted 514 MiB for a tiny cell whose allocator peak was 52).
  int64_t runtime_bytes = -1;
  int64_t RuntimeBytes() const {
    if (runtime_bytes >= 0) return runtime_bytes;
    return HostMemory() ? int64_t{1} << 30 : int64_t{1} << 29;
  }
  // Whether each device of the type has a random generator of its own (beside the cpu one) that activation
  // checkpointing must save and replay, so recomputed dropout draws the same mask.
  bool own_generator = false;
  // Whether SDPA's grouped-query attention is a fused kernel on this type in half precision (flash
  // attention). Where it is not, the decoder repeats k/v itself so the other fused kernels stay usable.
  // cpu: ATen's CPU flash attention reads the grouped k/v itself in torch 2.11 (at [4, 256] with Llama 3.2
  // 1B's 32 query and 8 kv heads, bf16, 2 threads: forward and backward 42-48 against 58-60 ms a layer with
  // k/v repeated; the same output and q gradient bit for bit, k/v gradients summed over the group in float32
  // before one rounding instead of after one per head; benchmarks/README.md).
  bool native_gqa_attention = false;
  // Whether ATen has a fused AdamW kernel for the type (torch.optim's fused=True: cpu, cuda, xpu, mps), so
  // a config moved to AdamW (a device check's repair) can take it.
  bool fused_adamw = false;
  // Whether the numeric check's reference runs (float32, one step) are made on this type: the one type every
  // machine has and whose float32 kernels are the oldest and most used (cpu).
  bool numeric_reference = false;
  // Column order of reports: ascending, then by name.
  int report_rank = 100;
  // One line for `tune devices` and error messages.
  std::string doc;
  // Other words users write for this type ("gpu" for cuda): an unknown device spelled so is answered with
  // this type's name.
  std::vector<std::string> also_called;
  // The torch-side hooks (device_hooks.h; ask them through HooksFor). Null in torch-free programs, and for
  // a built-in type until tm_harness attached its hooks.
  std::shared_ptr<const DeviceHooks> hooks;
};

// Every registered type: the built-in cpu, cuda, xpu, mps and meta, then registered ones in order.
const std::vector<DeviceTypeTraits>& DeviceTypes();

// The entry named `name`, or nullptr.
const DeviceTypeTraits* FindDeviceType(const std::string& name);

// Adds a device type (built-in, or out of tree: PrivateUse1 renamed), with its hooks when traits.hooks is
// set. InvalidArgument for a name that is taken, empty, or not a plain lowercase word. Not thread-safe:
// register at start-up, before devices are parsed.
Status RegisterDeviceType(DeviceTypeTraits traits);

// Gives a registered type without hooks its hooks (tm_harness, for the built-in types). InvalidArgument when
// the type is not registered or already has hooks.
Status AttachDeviceHooks(const std::string& name, std::shared_ptr<const DeviceHooks> hooks);

// Removes a type added after the built-in ones, with its hooks (tests); built-in types stay.
void UnregisterDeviceType(const std::string& name);

// Takes the hooks back from a type added after the built-in ones (tests); built-in types keep theirs.
void DetachDeviceHooks(const std::string& name);

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
