#include "harness/device_types.h"

#include <algorithm>

#include "base/text.h"

namespace tmx {
namespace {

std::vector<DeviceTypeTraits> BuiltinTypes() {
  DeviceTypeTraits cpu;
  cpu.name = "cpu";
  cpu.auto_rank = 100;
  cpu.distributed_backend = "gloo";
  cpu.matrix_ranks = 2;
  cpu.peak_memory = DeviceTypeTraits::PeakMemory::kProcessRss;
  cpu.report_rank = 0;
  cpu.doc = "the host processor; peak memory is the process's peak resident set size";

  DeviceTypeTraits cuda;
  cuda.name = "cuda";
  cuda.takes_index = true;
  cuda.auto_rank = 0;
  cuda.distributed_backend = "nccl";
  cuda.activation_offloading = true;
  cuda.peak_memory = DeviceTypeTraits::PeakMemory::kAllocator;
  cuda.report_rank = 1;
  cuda.doc = "NVIDIA GPUs (and ROCm GPUs in a HIP build of LibTorch)";

  DeviceTypeTraits xpu;
  xpu.name = "xpu";
  xpu.takes_index = true;
  xpu.auto_rank = 1;
  xpu.distributed_backend = "xccl";
  xpu.activation_offloading = true;
  xpu.peak_memory = DeviceTypeTraits::PeakMemory::kAllocator;
  xpu.report_rank = 3;
  xpu.doc = "Intel GPUs";

  DeviceTypeTraits mps;
  mps.name = "mps";
  mps.auto_rank = 2;
  mps.distributed_backend = "gloo";
  mps.report_rank = 2;
  mps.doc = "Apple GPUs (Metal); memory is shared with the host";

  DeviceTypeTraits meta;
  meta.name = "meta";
  meta.trains = false;
  meta.report_rank = 50;
  meta.doc = "shapes only, no data: validates and counts parameters, cannot train";
  return {cpu, cuda, xpu, mps, meta};
}

std::vector<DeviceTypeTraits>& Table() {
  static std::vector<DeviceTypeTraits> table = BuiltinTypes();
  return table;
}

bool IsPlainLowercaseWord(const std::string& s) {
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

std::string AcceptedForms() {
  std::vector<std::string> forms;
  for (const DeviceTypeTraits& t : DeviceTypes()) {
    forms.push_back(t.name);
    if (t.takes_index) forms.push_back(t.name + ":N");
  }
  forms.push_back("auto");
  return "accepted: " + JoinStrings(forms, ", ");
}

}  // namespace

const std::vector<DeviceTypeTraits>& DeviceTypes() { return Table(); }

const DeviceTypeTraits* FindDeviceType(const std::string& name) {
  for (const DeviceTypeTraits& t : Table()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Status RegisterDeviceType(DeviceTypeTraits traits) {
  if (!IsPlainLowercaseWord(traits.name) || traits.name == "auto") {
    return Status::InvalidArgument("device type '" + traits.name +
                                   "': a device type is a plain lowercase word such as npu (not auto)");
  }
  if (FindDeviceType(traits.name) != nullptr) {
    return Status::InvalidArgument("device type '" + traits.name + "' is registered twice");
  }
  Table().push_back(std::move(traits));
  return Status::OK();
}

void UnregisterDeviceType(const std::string& name) {
  std::vector<DeviceTypeTraits>& table = Table();
  size_t builtin = BuiltinTypes().size();
  for (size_t i = builtin; i < table.size(); ++i) {
    if (table[i].name == name) {
      table.erase(table.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

std::vector<std::string> OrderDeviceTypes(std::vector<std::string> device_types) {
  auto rank = [](const std::string& name) {
    const DeviceTypeTraits* t = FindDeviceType(name);
    return t == nullptr ? 1 << 30 : t->report_rank;
  };
  std::sort(device_types.begin(), device_types.end(), [&](const std::string& a, const std::string& b) {
    int ra = rank(a), rb = rank(b);
    return ra != rb ? ra < rb : a < b;
  });
  device_types.erase(std::unique(device_types.begin(), device_types.end()), device_types.end());
  return device_types;
}

std::string DeviceSelector::ToString() const {
  if (is_auto) return "auto";
  return index >= 0 ? type + ":" + std::to_string(index) : type;
}

StatusOr<DeviceSelector> ParseDeviceSelector(const std::string& text) {
  DeviceSelector selector;
  if (text == "auto") {
    selector.is_auto = true;
    return selector;
  }
  size_t colon = text.find(':');
  std::string type = text.substr(0, colon);
  const DeviceTypeTraits* traits = FindDeviceType(type);
  if (traits == nullptr) {
    std::vector<std::string> names = {"auto"};
    for (const DeviceTypeTraits& t : DeviceTypes()) names.push_back(t.name);
    std::string hint = ClosestMatch(type, names);
    return Status::InvalidArgument("unknown device '" + text + "'" +
                                   (hint.empty() ? "" : "; did you mean '" + hint + "'?") + " (" + AcceptedForms() +
                                   ")");
  }
  selector.type = type;
  if (colon == std::string::npos) return selector;
  std::string index = text.substr(colon + 1);
  bool digits = !index.empty() && index.size() < 4 && index.find_first_not_of("0123456789") == std::string::npos;
  if (!traits->takes_index || !digits) {
    std::vector<std::string> indexed;
    for (const DeviceTypeTraits& t : DeviceTypes()) {
      if (t.takes_index) indexed.push_back(t.name);
    }
    return Status::InvalidArgument("bad device '" + text + "': " +
                                   (traits->takes_index ? "the index must be a number, as in " + type + ":0"
                                                        : "only " + JoinStrings(indexed, " and ") +
                                                              " take an index, written as cuda:0") +
                                   " (" + AcceptedForms() + ")");
  }
  selector.index = std::stoi(index);
  return selector;
}

}  // namespace tmx
