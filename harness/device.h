// Devices: parsing device strings, probing what this machine really has, and choosing one.
//
// Capabilities are established by running small operations on each device (a bf16 and an fp16 matmul
// with backward, a memory-statistics query), never assumed from the device type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/status.h"

namespace tmx {

enum class DeviceType { kCpu, kCuda, kMps, kXpu, kMeta };

// "cpu", "cuda", "mps", "xpu", "meta".
const char* DeviceTypeName(DeviceType t);

// A parsed device string: "cpu", "cuda", "cuda:1", "mps", "xpu", "xpu:0", "meta" or "auto".
struct DeviceSpec {
  bool is_auto = false;
  DeviceType type = DeviceType::kCpu;
  int index = -1;  // -1: the default device of that type
  // The canonical spelling ("cuda:1", "cpu", "auto").
  std::string ToString() const;
};

// InvalidArgument naming the string and listing the accepted forms.
StatusOr<DeviceSpec> ParseDevice(const std::string& text);

// What a device can do, as measured on this machine.
struct DeviceInfo {
  std::string id;     // canonical id: "cpu", "cuda:0", "mps", "xpu:0"
  DeviceType type = DeviceType::kCpu;
  int index = -1;
  std::string name;   // e.g. "NVIDIA H200" or the CPU model name
  int64_t total_memory_bytes = 0;  // 0 when unknown
  bool bf16_matmul_backward = false;  // a bf16 matmul and its backward ran and matched fp32
  bool fp16_matmul_backward = false;
  bool memory_stats = false;          // peak memory can be measured (allocator stats, or RSS on cpu)
  std::string distributed_backend;    // "gloo", "nccl", "xccl", or "" when none
  bool probed = false;                // false for a nominal entry describing an absent device
  std::vector<std::string> notes;     // why a capability is missing, one line each
};

// The JSON form `tune devices --json` prints and tune-matrix reads back from its child process.
nlohmann::json DeviceInfoToJson(const DeviceInfo& device);
// InvalidArgument when the id is not a device string.
StatusOr<DeviceInfo> DeviceInfoFromJson(const nlohmann::json& j);

// The devices of this machine, cpu first, with capabilities measured by running small ops. Cached after
// the first call in a process.
const std::vector<DeviceInfo>& AvailableDevices();

// A DeviceInfo for a device type that is not present here, with the capabilities that type is known to
// offer in principle; used to check a config's static requirements for a device this machine lacks.
DeviceInfo NominalDeviceInfo(DeviceType type, int index = -1);

// Picks the device for `spec` among `available`: auto chooses cuda > xpu > mps > cpu. When the requested
// device is missing, Unavailable names the devices that are present and how to override (device=cpu).
StatusOr<DeviceInfo> ResolveDevice(const DeviceSpec& spec, const std::vector<DeviceInfo>& available);

// The LibTorch version this binary was built against, e.g. "2.11.0".
std::string TorchVersion();

}  // namespace tmx
