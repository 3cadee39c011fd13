#include "harness/device_hooks.h"

#include <fstream>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

#include "base/text.h"
#include "harness/torch_dtypes.h"

namespace tmx {
namespace {

Status Attach(std::unique_ptr<DeviceHooks> hooks) {
  const std::string type = hooks->type();
  return AttachDeviceHooks(type, std::shared_ptr<const DeviceHooks>(std::move(hooks)));
}

// The built-in types' hooks, attached to their entries once, the first time any hooks are asked for: the
// entries come from the torch-free library, which cannot make them.
void AttachBuiltinHooks() {
  static const bool attached = [] {
    using Make = std::unique_ptr<DeviceHooks> (*)();
    for (Make make : {MakeCpuHooks, MakeCudaHooks, MakeXpuHooks, MakeMpsHooks, MakeMetaHooks}) {
      Status s = Attach(make());
      if (!s.ok()) throw std::logic_error("built-in device hooks: " + s.message());
    }
    return true;
  }();
  (void)attached;
}

const DeviceHooks* FindHooks(const std::string& type) {
  AttachBuiltinHooks();
  const DeviceTypeTraits* traits = FindDeviceType(type);
  return traits == nullptr ? nullptr : traits->hooks.get();
}

DeviceInfo Probed(const DeviceHooks& hooks, const DeviceTypeTraits& traits, int index) {
  DeviceInfo info;
  info.type = traits.name;
  info.index = traits.takes_index ? index : -1;
  info.id = traits.takes_index ? traits.name + ":" + std::to_string(index) : traits.name;
  info.distributed_backend = traits.distributed_backend;
  info.probed = true;
  hooks.Probe(info.index, &info);
  return info;
}

}  // namespace

Status RegisterDeviceType(DeviceTypeTraits traits, std::unique_ptr<DeviceHooks> hooks) {
  if (hooks == nullptr || hooks->type() != traits.name) {
    return Status::InvalidArgument("device type '" + traits.name + "': its hooks serve '" +
                                   (hooks ? hooks->type() : std::string("nothing")) +
                                   "'; register the hooks whose type() is the type's name");
  }
  traits.hooks = std::shared_ptr<const DeviceHooks>(std::move(hooks));
  return RegisterDeviceType(std::move(traits));
}

Status RegisterDeviceHooks(std::unique_ptr<DeviceHooks> hooks) {
  AttachBuiltinHooks();  // so that hooks for a built-in type are refused as registered twice
  return Attach(std::move(hooks));
}

void UnregisterDeviceHooks(const std::string& type) { DetachDeviceHooks(type); }

const DeviceTypeTraits* DeviceTypeOf(c10::DeviceType type) {
  return FindDeviceType(c10::DeviceTypeName(type, /*lower_case=*/true));
}

const DeviceHooks& HooksFor(const std::string& type) {
  const DeviceHooks* hooks = FindHooks(type);
  if (hooks == nullptr) throw std::logic_error("device type '" + type + "' has no registered DeviceHooks");
  return *hooks;
}

std::vector<DeviceInfo> ProbeAllDevices() {
  std::vector<DeviceInfo> devices;
  for (const DeviceTypeTraits& traits : DeviceTypes()) {
    if (!traits.trains) continue;  // meta is not a device of this machine
    const DeviceHooks* hooks = FindHooks(traits.name);
    if (hooks == nullptr) continue;
    int count = hooks->Count();
    for (int i = 0; i < count; ++i) devices.push_back(Probed(*hooks, traits, i));
  }
  return devices;
}

StatusOr<DeviceInfo> ProbeDevice(const DeviceSelector& selector) {
  std::vector<std::string> present;  // ids of the devices counted, for the message when one is missing
  if (selector.is_auto) {
    std::vector<const DeviceTypeTraits*> order;
    for (const DeviceTypeTraits& t : DeviceTypes()) {
      if (t.auto_rank >= 0) order.push_back(&t);
    }
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->auto_rank < b->auto_rank; });
    for (const DeviceTypeTraits* t : order) {
      if (HooksFor(t->name).Count() > 0) return Probed(HooksFor(t->name), *t, 0);
    }
    return Status::Unavailable("device=auto: no device found on this machine");
  }
  const DeviceTypeTraits* traits = FindDeviceType(selector.type);
  if (traits == nullptr) return Status::InvalidArgument("unknown device type '" + selector.type + "'");
  const DeviceHooks& hooks = HooksFor(traits->name);
  int count = hooks.Count();
  int index = selector.index < 0 ? 0 : selector.index;
  if (index < count) return Probed(hooks, *traits, traits->takes_index ? index : -1);
  for (const DeviceTypeTraits& t : DeviceTypes()) {
    if (!t.trains) continue;
    int n = HooksFor(t.name).Count();
    for (int i = 0; i < n; ++i) present.push_back(t.takes_index ? t.name + ":" + std::to_string(i) : t.name);
  }
  return Status::Unavailable("device '" + selector.ToString() + "' is not available on this machine (available: " +
                             JoinStrings(present, ", ") + "); override it with device=" +
                             (present.empty() ? std::string("cpu") : present.front()) + " or device=auto");
}

std::optional<MemoryReading> PeakMemory(const DeviceInfo& device) {
  return HooksFor(device.type).PeakMemory(device.index);
}

std::string ProbeMatmulBackward(const std::string& device_id, const std::string& dtype_name) {
  try {
    at::Device device(device_id);
    at::ScalarType dtype = DtypeNamed(dtype_name);
    at::manual_seed(0);
    at::Tensor a = at::randn({32, 48});
    at::Tensor b = at::randn({48, 16});
    at::Tensor a_dev = a.to(device, dtype).detach().requires_grad_(true);
    at::Tensor b_dev = b.to(device, dtype).detach().requires_grad_(true);
    at::Tensor out = at::matmul(a_dev, b_dev);
    out.sum().backward();
    at::Tensor expect = at::matmul(a, b);
    at::Tensor got = out.detach().to(at::kCPU, at::kFloat);
    at::Tensor grad = a_dev.grad().to(at::kCPU, at::kFloat);
    if (!got.isfinite().all().item<bool>() || !grad.isfinite().all().item<bool>()) return "produced non-finite values";
    double err = (got - expect).abs().max().item<double>();
    double scale = expect.abs().max().item<double>();
    if (err > 0.05 * scale) return "result differs from fp32 by " + std::to_string(err);
    return "";
  } catch (const std::exception& e) {
    std::string what = e.what();
    return "raised: " + what.substr(0, what.find('\n'));
  }
}

void ProbeDtypes(DeviceInfo* info) {
  std::string bf16 = ProbeMatmulBackward(info->id, "bf16");
  info->bf16_matmul_backward = bf16.empty();
  if (!bf16.empty()) info->notes.push_back("bf16 matmul+backward " + bf16);
  std::string fp16 = ProbeMatmulBackward(info->id, "fp16");
  info->fp16_matmul_backward = fp16.empty();
  if (!fp16.empty()) info->notes.push_back("fp16 matmul+backward " + fp16);
}

MemoryReading ProcessPeakRss() {
  // VmHWM is the high-water mark of this program's own memory map, which exec starts afresh. getrusage's
  // ru_maxrss is not: exec folds in the peak of the process image it replaced, so a child forked from a large
  // parent (tune-matrix, with LibTorch loaded) would report the parent's copy as its peak.
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return {std::stoll(line.substr(6)) * 1024, "process_rss"};
  }
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return {static_cast<int64_t>(usage.ru_maxrss) * 1024, "process_rss"};
}

void AcceleratorHooks::Synchronize(int index) const {
  c10::impl::getDeviceGuardImpl(torch_type_)->synchronizeDevice(static_cast<c10::DeviceIndex>(std::max(0, index)));
}

std::optional<MemoryReading> AcceleratorHooks::PeakMemory(int index) const {
  try {
    c10::CachingDeviceAllocator::DeviceStats stats =
        c10::getDeviceAllocator(torch_type_)->getDeviceStats(static_cast<c10::DeviceIndex>(std::max(0, index)));
    auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return MemoryReading{stats.allocated_bytes[aggregate].peak, type() + "_allocator"};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void AcceleratorHooks::ResetPeakMemory(int index) const {
  try {
    c10::getDeviceAllocator(torch_type_)->resetPeakStats(static_cast<c10::DeviceIndex>(std::max(0, index)));
  } catch (const std::exception&) {
  }
}

void AcceleratorHooks::Probe(int index, DeviceInfo* info) const {
  try {
    info->total_memory_bytes = static_cast<int64_t>(
        c10::getDeviceAllocator(torch_type_)->getMemoryInfo(static_cast<c10::DeviceIndex>(std::max(0, index))).second);
  } catch (const std::exception&) {
    info->total_memory_bytes = 0;  // unknown: the allocator cannot tell
  }
  Describe(index, info);
  info->memory_stats = PeakMemory(index).has_value();
  if (!info->memory_stats) info->notes.push_back("the " + type() + " caching allocator gave no statistics");
  ProbeDtypes(info);
}

std::string TorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace tmx
