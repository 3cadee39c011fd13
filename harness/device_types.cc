#include "harness/device_types.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

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
  cpu.fused_adamw = true;
  cpu.native_gqa_attention = true;
  cpu.numeric_reference = true;
  cpu.report_rank = 0;
  cpu.doc = "the host processor; peak memory is the process's peak resident set size";
  cpu.also_called = {"host"};

  DeviceTypeTraits cuda;
  cuda.name = "cuda";
  cuda.takes_index = true;
  cuda.auto_rank = 0;
  cuda.distributed_backend = "nccl";
  cuda.activation_offloading = true;
  cuda.own_generator = true;
  cuda.native_gqa_attention = true;
  cuda.peak_memory = DeviceTypeTraits::PeakMemory::kAllocator;
  cuda.fused_adamw = true;
  cuda.report_rank = 1;
  cuda.doc = "NVIDIA GPUs (and ROCm GPUs in a HIP build of LibTorch)";
  cuda.also_called = {"gpu", "nvidia", "rocm", "hip"};

  DeviceTypeTraits xpu;
  xpu.name = "xpu";
  xpu.takes_index = true;
  xpu.auto_rank = 1;
  xpu.distributed_backend = "xccl";
  xpu.activation_offloading = true;
  xpu.own_generator = true;
  xpu.peak_memory = DeviceTypeTraits::PeakMemory::kAllocator;
  xpu.fused_adamw = true;
  xpu.report_rank = 3;
  xpu.doc = "Intel GPUs";
  xpu.also_called = {"intel"};

  DeviceTypeTraits mps;
  mps.name = "mps";
  mps.auto_rank = 2;
  mps.distributed_backend = "gloo";
  mps.fused_adamw = true;
  mps.report_rank = 2;
  mps.doc = "Apple GPUs (Metal); memory is shared with the host";
  mps.also_called = {"metal", "apple"};

  DeviceTypeTraits meta;
  meta.name = "meta";
  meta.trains = false;
  meta.report_rank = 50;
  meta.doc = "shapes only, no data: validates and counts parameters, cannot train";
  return {cpu, cuda, xpu, mps, meta};
}

struct TypeTable {
  std::vector<DeviceTypeTraits> types;
  size_t builtin = 0;  // types[0, builtin) are the built-in ones
};

Status AddType(DeviceTypeTraits traits, std::vector<DeviceTypeTraits>* types);

TypeTable& Table() {
  static TypeTable table = [] {
    TypeTable t;
    for (DeviceTypeTraits& traits : BuiltinTypes()) {
      Status added = AddType(std::move(traits), &t.types);
      if (!added.ok()) throw std::logic_error("built-in device table: " + added.message());
    }
    t.builtin = t.types.size();
    return t;
  }();
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

DeviceTypeTraits* FindIn(std::vector<DeviceTypeTraits>& types, const std::string& name) {
  for (DeviceTypeTraits& t : types) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// The one way into the table, for built-in and out-of-tree types alike.
Status AddType(DeviceTypeTraits traits, std::vector<DeviceTypeTraits>* types) {
  if (!IsPlainLowercaseWord(traits.name) || traits.name == "auto") {
    return Status::InvalidArgument("device type '" + traits.name +
                                   "': a device type is a plain lowercase word such as npu (not auto)");
  }
  if (FindIn(*types, traits.name) != nullptr) {
    return Status::InvalidArgument("device type '" + traits.name + "' is registered twice");
  }
  types->push_back(std::move(traits));
  return Status::OK();
}

}  // namespace

const std::vector<DeviceTypeTraits>& DeviceTypes() { return Table().types; }

const DeviceTypeTraits* FindDeviceType(const std::string& name) { return FindIn(Table().types, name); }

Status RegisterDeviceType(DeviceTypeTraits traits) { return AddType(std::move(traits), &Table().types); }

Status AttachDeviceHooks(const std::string& name, std::shared_ptr<const DeviceHooks> hooks) {
  DeviceTypeTraits* traits = FindIn(Table().types, name);
  if (traits == nullptr) {
    return Status::InvalidArgument("device hooks for '" + name +
                                   "': the type is not in the device table; call RegisterDeviceType first");
  }
  if (traits->hooks != nullptr) return Status::InvalidArgument("device hooks for '" + name + "' registered twice");
  traits->hooks = std::move(hooks);
  return Status::OK();
}

void UnregisterDeviceType(const std::string& name) {
  TypeTable& table = Table();
  for (size_t i = table.builtin; i < table.types.size(); ++i) {
    if (table.types[i].name == name) {
      table.types.erase(table.types.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

void DetachDeviceHooks(const std::string& name) {
  TypeTable& table = Table();
  for (size_t i = table.builtin; i < table.types.size(); ++i) {
    if (table.types[i].name == name) table.types[i].hooks.reset();
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
    std::string lower = type;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const DeviceTypeTraits& t : DeviceTypes()) {
      if (std::find(t.also_called.begin(), t.also_called.end(), lower) != t.also_called.end()) hint = t.name;
    }
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
                                                        : "only " + JoinAlternatives(indexed, "and") + " take an index, written as " +
                                                              indexed.front() + ":0") +
                                   " (" + AcceptedForms() + ")");
  }
  selector.index = std::stoi(index);
  return selector;
}

}  // namespace tmx
