// The meta device type: tensors with shapes and no data. Always present; validates configs and counts
// parameters, never trains (its traits say trains = false).
#include "harness/device_hooks.h"

namespace tmx {
namespace {

class MetaHooks final : public DeviceHooks {
 public:
  std::string type() const override { return "meta"; }
  int Count() const override { return 1; }
  void Probe(int /*index*/, DeviceInfo* info) const override { info->name = "meta (shapes only, no data)"; }
  std::optional<MemoryReading> PeakMemory(int /*index*/) const override { return std::nullopt; }
};

}  // namespace

std::unique_ptr<DeviceHooks> MakeMetaHooks() { return std::make_unique<MetaHooks>(); }

}  // namespace tmx
