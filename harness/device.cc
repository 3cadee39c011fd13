#include "harness/device.h"

#include <algorithm>

#include "base/json_io.h"
#include "base/text.h"

namespace tmx {
namespace {

std::string ListIds(const std::vector<DeviceInfo>& available) {
  std::vector<std::string> ids;
  for (const DeviceInfo& d : available) ids.push_back(d.id);
  return JoinStrings(ids, ", ");
}

}  // namespace

const DeviceTypeTraits& DeviceInfo::traits() const {
  const DeviceTypeTraits* t = FindDeviceType(type);
  if (t == nullptr) throw std::logic_error("device " + id + " has the unregistered type '" + type + "'");
  return *t;
}

DeviceInfo NominalDeviceInfo(const DeviceSelector& selector) {
  DeviceInfo d;
  d.type = selector.is_auto ? "cpu" : selector.type;
  d.index = selector.index;
  d.id = selector.is_auto ? "cpu" : selector.ToString();
  d.name = "absent " + d.type + " device";
  const DeviceTypeTraits& traits = d.traits();
  d.bf16_matmul_backward = traits.trains;
  d.fp16_matmul_backward = traits.trains;
  d.memory_stats = traits.trains;
  d.distributed_backend = traits.distributed_backend;
  d.probed = false;
  return d;
}

nlohmann::json DeviceInfoToJson(const DeviceInfo& d) {
  nlohmann::json j = {{"id", d.id},
                      {"type", d.type},
                      {"name", d.name},
                      {"total_memory_bytes", d.total_memory_bytes},
                      {"bf16_matmul_backward", d.bf16_matmul_backward},
                      {"fp16_matmul_backward", d.fp16_matmul_backward},
                      {"memory_stats", d.memory_stats},
                      {"distributed_backend", d.distributed_backend},
                      {"notes", d.notes}};
  if (!d.matmul_peak_flops.empty()) {
    j["matmul_peak_flops"] = d.matmul_peak_flops;
    j["matmul_peak_threads"] = d.matmul_peak_threads;
  }
  if (!d.memory_bandwidth.empty()) j["memory_bandwidth"] = d.memory_bandwidth;
  return j;
}

double DeviceInfo::BestBandwidth() const {
  double best = 0;
  for (const auto& [kernel, rate] : memory_bandwidth) best = std::max(best, rate);
  return best;
}

StatusOr<DeviceInfo> DeviceInfoFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("a device must be a JSON object, got " + JsonForMessage(j));
  DeviceInfo info;
  try {
    info.id = j.value("id", "");
    info.name = j.value("name", "");
    info.total_memory_bytes = j.value("total_memory_bytes", int64_t{0});
    info.bf16_matmul_backward = j.value("bf16_matmul_backward", false);
    info.fp16_matmul_backward = j.value("fp16_matmul_backward", false);
    info.memory_stats = j.value("memory_stats", false);
    info.distributed_backend = j.value("distributed_backend", "");
    info.notes = j.value("notes", std::vector<std::string>{});
    info.matmul_peak_flops = j.value("matmul_peak_flops", std::map<std::string, double>{});
    info.matmul_peak_threads = j.value("matmul_peak_threads", 0);
    info.memory_bandwidth = j.value("memory_bandwidth", std::map<std::string, double>{});
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument("device " + JsonForMessage(j) + " has a field of the wrong type (" + e.what() + ")");
  }
  StatusOr<DeviceSelector> selector = ParseDeviceSelector(info.id);
  if (!selector.ok()) return selector.status();
  if (selector->is_auto) return Status::InvalidArgument("device " + JsonForMessage(j) + ": 'auto' is not a device id");
  info.type = selector->type;
  info.index = selector->index;
  info.probed = true;
  return info;
}

StatusOr<DeviceInfo> ResolveDevice(const DeviceSelector& selector, const std::vector<DeviceInfo>& available) {
  if (selector.is_auto) {
    const DeviceInfo* best = nullptr;
    for (const DeviceInfo& d : available) {
      int rank = d.traits().auto_rank;
      if (rank >= 0 && (best == nullptr || rank < best->traits().auto_rank)) best = &d;
    }
    if (best == nullptr) return Status::Unavailable("device=auto: no device found on this machine");
    return *best;
  }
  for (const DeviceInfo& d : available) {
    if (d.type == selector.type && (selector.index < 0 || selector.index == d.index)) return d;
  }
  return Status::Unavailable("device '" + selector.ToString() + "' is not available on this machine (available: " +
                             ListIds(available) + "); override it with device=" +
                             (available.empty() ? std::string("cpu") : available.front().id) + " or device=auto");
}

DeviceLookup LookupAmong(std::vector<DeviceInfo> available) {
  return [available = std::move(available)](const DeviceSelector& selector) {
    return ResolveDevice(selector, available);
  };
}

}  // namespace tmx
