// A device's memory bandwidth: the ceiling a decode step is compared with (a decode step reads every weight and
// the KV cache for one token per sequence, so its limit is how fast the device streams memory, not its matmul
// peak). Measured like the matmul peak (harness/matmul_peak.h), not taken from a data sheet: STREAM's copy
// (b = a: 2 buffers' bytes moved) and triad (a = b + s * c: 3 buffers' bytes) over buffers far larger than the
// caches, through ATen's kernels on the device (copy_ and add_out, whatever device type the table holds: cpu,
// an accelerator, a plugin's), at every core the process may use; the best of a few repeats, in bytes/s.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "harness/device.h"

namespace tmx {

struct MemoryBandwidthOptions {
  // Bytes of each of the three buffers. 0: by device, 256 MiB on the host (several times any L3 of a CPU this
  // project runs on; a 2-core EPYC's is 32 MiB) and 1 GiB on an accelerator (an H100's L2 is 50 MB); either at
  // most an eighth of the device's memory where that is known.
  int64_t buffer_bytes = 0;
  // Timed passes of each kernel after one warm-up pass; the best is kept (STREAM's rule: the others were
  // disturbed by something, the best was not).
  int repeats = 5;
};

// Sets device->memory_bandwidth ("copy" and "triad", bytes/s). A device that cannot hold or run the buffers
// (an allocation or kernel error) is skipped: the map stays empty and a note in device->notes says why; only a
// bad option is an error (InvalidArgument naming it).
Status MeasureMemoryBandwidth(const MemoryBandwidthOptions& options, DeviceInfo* device);

}  // namespace tmx
