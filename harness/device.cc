#include "harness/device.h"

#include "harness/text.h"

namespace tmx {
namespace {

std::string ListIds(const std::vector<DeviceInfo>& available) {
  std::vector<std::string> ids;
  for (const DeviceInfo& d : available) ids.push_back(d.id);
  return JoinStrings(ids, ", ");
}

}  // namespace

const char* DeviceTypeName(DeviceType t) {
  switch (t) {
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kCuda:
      return "cuda";
    case DeviceType::kMps:
      return "mps";
    case DeviceType::kXpu:
      return "xpu";
    case DeviceType::kMeta:
      return "meta";
  }
  return "cpu";
}

std::string DeviceSpec::ToString() const {
  if (is_auto) return "auto";
  std::string s = DeviceTypeName(type);
  if (index >= 0) s += ":" + std::to_string(index);
  return s;
}

StatusOr<DeviceSpec> ParseDevice(const std::string& text) {
  DeviceSpec spec;
  if (text == "auto") {
    spec.is_auto = true;
    return spec;
  }
  std::string type = text;
  std::string index;
  size_t colon = text.find(':');
  if (colon != std::string::npos) {
    type = text.substr(0, colon);
    index = text.substr(colon + 1);
  }
  static const std::vector<std::pair<std::string, DeviceType>> kTypes = {
      {"cpu", DeviceType::kCpu}, {"cuda", DeviceType::kCuda}, {"mps", DeviceType::kMps},
      {"xpu", DeviceType::kXpu}, {"meta", DeviceType::kMeta}};
  bool found = false;
  for (const auto& [name, t] : kTypes) {
    if (name == type) {
      spec.type = t;
      found = true;
    }
  }
  const std::string accepted = "accepted: cpu, cuda, cuda:N, mps, xpu, xpu:N, meta, auto";
  if (!found) {
    std::vector<std::string> names = {"cpu", "cuda", "mps", "xpu", "meta", "auto"};
    std::string hint = ClosestMatch(type, names);
    return Status::InvalidArgument("unknown device '" + text + "'" +
                                   (hint.empty() ? "" : "; did you mean '" + hint + "'?") + " (" + accepted + ")");
  }
  if (colon != std::string::npos) {
    bool digits = !index.empty() && index.size() < 4 &&
                  index.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || spec.type == DeviceType::kCpu || spec.type == DeviceType::kMeta || spec.type == DeviceType::kMps) {
      return Status::InvalidArgument("bad device '" + text + "': only cuda and xpu take an index, written as cuda:0 (" +
                                     accepted + ")");
    }
    spec.index = std::stoi(index);
  }
  return spec;
}

DeviceInfo NominalDeviceInfo(DeviceType type, int index) {
  DeviceInfo d;
  d.type = type;
  d.index = index;
  DeviceSpec spec;
  spec.type = type;
  spec.index = index;
  d.id = spec.ToString();
  d.name = std::string("absent ") + DeviceTypeName(type) + " device";
  d.bf16_matmul_backward = type != DeviceType::kMeta;
  d.fp16_matmul_backward = type != DeviceType::kMeta;
  d.memory_stats = type != DeviceType::kMeta;
  d.distributed_backend = type == DeviceType::kCuda ? "nccl" : type == DeviceType::kXpu ? "xccl" : "gloo";
  d.probed = false;
  return d;
}

nlohmann::json DeviceInfoToJson(const DeviceInfo& d) {
  return {{"id", d.id},
          {"type", DeviceTypeName(d.type)},
          {"name", d.name},
          {"total_memory_bytes", d.total_memory_bytes},
          {"bf16_matmul_backward", d.bf16_matmul_backward},
          {"fp16_matmul_backward", d.fp16_matmul_backward},
          {"memory_stats", d.memory_stats},
          {"distributed_backend", d.distributed_backend},
          {"notes", d.notes}};
}

StatusOr<DeviceInfo> DeviceInfoFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("a device must be a JSON object, got " + j.dump());
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
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument("device " + j.dump() + " has a field of the wrong type (" + e.what() + ")");
  }
  StatusOr<DeviceSpec> spec = ParseDevice(info.id);
  if (!spec.ok()) return spec.status();
  info.type = spec->type;
  info.index = spec->index;
  info.probed = true;
  return info;
}

StatusOr<DeviceInfo> ResolveDevice(const DeviceSpec& spec, const std::vector<DeviceInfo>& available) {
  if (spec.is_auto) {
    for (DeviceType t : {DeviceType::kCuda, DeviceType::kXpu, DeviceType::kMps, DeviceType::kCpu}) {
      for (const DeviceInfo& d : available) {
        if (d.type == t) return d;
      }
    }
    return Status::Unavailable("device=auto: no device found on this machine");
  }
  if (spec.type == DeviceType::kMeta) {
    DeviceInfo meta = NominalDeviceInfo(DeviceType::kMeta);
    meta.name = "meta (shapes only, no data)";
    meta.probed = true;
    return meta;
  }
  for (const DeviceInfo& d : available) {
    if (d.type == spec.type && (spec.index < 0 || spec.index == d.index)) return d;
  }
  return Status::Unavailable("device '" + spec.ToString() + "' is not available on this machine (available: " +
                             ListIds(available) + "); override it with device=" + available.front().id +
                             " or device=auto");
}

}  // namespace tmx
