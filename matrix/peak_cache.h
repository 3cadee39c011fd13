// The devices' matmul peaks, kept per machine, CPU class and torch version: a run on a busy machine takes the
// peaks measured when it was quiet instead of measuring them low (issue 56: measured under load the cpu peak moved
// 2x, and "% of peak" read 40% against 17% committed). A quiet run measures and keeps them; nothing else reads
// the file. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "harness/device.h"

namespace tmx::matrix {

// The file for this host, `cpu_class` and `torch_version`: $TUNE_MATRIX_PEAK_CACHE, else
// ~/.cache/tune-matrix/peaks, then "<host>_<class>_torch<version>.json" (characters other than letters, digits,
// '.', '-' and '_' become '_').
std::string PeakCachePath(const std::string& host, const std::string& cpu_class, const std::string& torch_version);

// Writes the measured peaks of `devices` (those with any) to `path`, atomically, making its folder.
Status SavePeaks(const std::string& path, const std::vector<DeviceInfo>& devices);

// Sets matmul_peak_flops and matmul_peak_threads of each of `devices` that `path` holds peaks for (by device id;
// a device measured now at another thread count keeps its own) and returns how many it set: 0 when the file is
// missing. InvalidArgument naming the file and the field for a
// damaged one (a peak that is not a positive finite number).
StatusOr<int> LoadPeaks(const std::string& path, std::vector<DeviceInfo>* devices);

}  // namespace tmx::matrix
