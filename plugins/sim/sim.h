// The simulated accelerator "sim": a device plugin (harness/device_plugin.h) that is a PyTorch backend through
// PrivateUse1, so that every path a vendor's device takes (its own allocator with a capacity, guard, hooks,
// generator, kernels and a CPU fallback) runs on a machine without one. Device memory is host memory the
// allocator hands out, reached only through PrivateUse1 tensors: a CPU kernel never receives one (the dispatcher
// sends sim tensors to sim kernels), and a cpu tensor passed beside sim tensors fails loudly, naming the op.
//
// Switches (environment variables, read once per process; the matrix's children inherit them):
//   TM_SIM_MEMORY       the capacity, bytes with an optional K/M/G/GiB suffix (default 8G); beyond it an
//                       allocation fails with "sim: out of memory", naming the request and the statistics
//   TM_SIM_REMOVE_OPS   comma-separated ops the device lacks ("aten::mm" or "mm": every overload;
//                       "aten::add.Tensor": one); they fail naming themselves (a `fails` cell)
//   TM_SIM_WRONG_OP     one op whose floating outputs are scaled by 1.1 (a `wrong` cell)
//   TM_SIM_BF16=0       bfloat16 tensors cannot be made on the device
#pragma once

#include <cstdint>
#include <string>

#include <c10/core/CachingDeviceAllocator.h>

namespace tmx::sim {

// The device's one allocator (registered for PrivateUse1), with its capacity and statistics.
c10::DeviceAllocator* Allocator();
// The capacity TM_SIM_MEMORY sets, or the default 8 GiB; InvalidArgument-style message in `error` if it is bad.
int64_t CapacityFromEnvironment(std::string* error);
// Parses "8G", "512MiB", "1048576"; -1 when it is not such a size.
int64_t ParseBytes(const std::string& text);

// Whether bfloat16 is supported (TM_SIM_BF16 is not 0).
bool Bf16Enabled();

}  // namespace tmx::sim
