// This machine as the matrix sees it: its devices, probed in a child process, and the provenance recorded
// with every cell it runs (host, the checkout's commit, torch version, CI job).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "harness/device.h"
#include "matrix/cell.h"
#include "matrix/plan.h"

namespace tmx::matrix {

// The commit checked out in the git work tree at `repo_dir` (40 hex digits), read from .git without
// running git: a detached HEAD, a loose or packed branch ref, and a `.git` file pointing elsewhere (work
// trees, submodules) are understood. "" when unknown.
std::string GitCommit(const std::string& repo_dir);

std::string Hostname();

// Provenance of cells run by this process: this host, the commit of the checkout whose configs are used,
// the given CI job, and the torch version this harness links (kept by cells recorded without a child).
Provenance LocalProvenance(const std::string& job);

// Sets `options`' column (MatrixOptions::cpu_class, torch_version, child_env): this LibTorch's version, and the CPU
// class of `requested` (--cpu-class; "" for this machine's as its environment leaves it, base/cpu_class.h
// ChooseCpuClass). InvalidArgument, naming --cpu-class, for a class that is none or above this machine's.
Status ChooseRunColumn(const std::string& requested, MatrixOptions* options);

// The device list printed by `tune devices --json` (after any other output).
StatusOr<std::vector<DeviceInfo>> ParseDeviceList(const std::string& output);

// Runs `<tune> devices --json` in a child process, so a device probe that crashes cannot take the harness
// down, and parses its list. With `only` (a device string), the child probes only that device and the list
// holds it, or nothing when it is absent.
// With `matmul_peak`, each device's matmul peak is measured too (`tune devices --matmul-peak`,
// harness/matmul_peak.h), for the cells' shares of it, with the child pinned to `cpus` (a cpu lane's; empty:
// not pinned) and `env` added to its environment (the run's CPU class caps, MatrixOptions::child_env: the peak is
// the class's the cells compute at).
StatusOr<std::vector<DeviceInfo>> DiscoverDevices(const std::string& tune, const std::string& only = "",
                                                  bool matmul_peak = false, const std::vector<int>& cpus = {},
                                                  const std::vector<std::pair<std::string, std::string>>& env = {});
// "cpu: matmul peak bf16 829 GFLOP/s, fp32 206 GFLOP/s at 2 threads; memory bandwidth copy 21.3 GB/s, triad
// 23.0 GB/s"; "" for a device not measured.
std::string DescribeMatmulPeak(const DeviceInfo& device);

}  // namespace tmx::matrix
