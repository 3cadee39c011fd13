// Devices as the rest of the project sees them: what one device of this machine can do (DeviceInfo, with
// its JSON form for `tune devices --json`), and choosing the device a config names among those present.
//
// Capabilities are established by running small operations on the device (device_hooks.h), never assumed
// from the type; a device type's fixed properties come from the device table (device_types.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "harness/device_types.h"

namespace tmx {

// What a device can do, as measured on this machine.
struct DeviceInfo {
  std::string id;    // canonical id: "cpu", "cuda:0", "mps", "xpu:0"
  std::string type;  // its DeviceTypes() name: "cpu", "cuda", ...
  int index = -1;    // -1 for types without an index
  std::string name;  // e.g. "NVIDIA H200" or the CPU model name
  int64_t total_memory_bytes = 0;     // 0 when unknown
  bool bf16_matmul_backward = false;  // a bf16 matmul and its backward ran and matched fp32
  bool fp16_matmul_backward = false;
  bool memory_stats = false;          // peak memory can be measured (allocator stats, or RSS on the host)
  std::string distributed_backend;    // from the device table: "gloo", "nccl", "xccl", or ""
  bool probed = false;                // false for a nominal entry describing an absent device
  std::vector<std::string> notes;     // why a capability is missing, one line each
  // The measured matmul peak per dtype ("bf16" -> FLOP/s) at matmul_peak_threads ATen threads
  // (harness/matmul_peak.h); empty and 0 when not measured (`tune devices` measures it with --matmul-peak).
  std::map<std::string, double> matmul_peak_flops;
  int matmul_peak_threads = 0;
  // The measured memory bandwidth per kernel ("copy", "triad" -> bytes/s; harness/memory_bandwidth.h), measured
  // with the matmul peak; empty when not measured (or the device could not: a note says why).
  std::map<std::string, double> memory_bandwidth;
  // The bandwidth a decode's share is taken of: the best kernel's, bytes/s; 0 when none was measured.
  double BestBandwidth() const;

  // The device table's entry for `type`. REQUIRES: type is registered (DeviceInfoFromJson and the probes
  // guarantee it).
  const DeviceTypeTraits& traits() const;
};

// The JSON form `tune devices --json` prints and tune-matrix reads back from its child process.
nlohmann::json DeviceInfoToJson(const DeviceInfo& device);
// InvalidArgument when the id is not a device string of a registered type.
StatusOr<DeviceInfo> DeviceInfoFromJson(const nlohmann::json& j);

// A DeviceInfo for a device that is not present here, with the capabilities its type offers in principle;
// used to check a config's static requirements for a device this machine lacks.
DeviceInfo NominalDeviceInfo(const DeviceSelector& selector);

// Picks the device `selector` names among `available`: auto takes the type with the lowest auto_rank that is
// present. A missing device is Unavailable, naming the devices present and how to override (device=cpu).
StatusOr<DeviceInfo> ResolveDevice(const DeviceSelector& selector, const std::vector<DeviceInfo>& available);

// How validation finds the device a config names: on the command line, by probing only that device
// (ProbeDevice in device_hooks.h); in the matrix, among the devices it discovered once.
using DeviceLookup = std::function<StatusOr<DeviceInfo>(const DeviceSelector&)>;
DeviceLookup LookupAmong(std::vector<DeviceInfo> available);

}  // namespace tmx
