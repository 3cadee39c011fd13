// The mps device type: Apple GPUs through Metal. Memory is shared with the host, and LibTorch's MPS
// allocator keeps no peak statistics, so no peak is reported (the process's resident set would not count
// the GPU's allocations and would understate it).
#include <torch/mps.h>

#include "harness/device_hooks.h"

namespace tmx {
namespace {

class MpsHooks final : public DeviceHooks {
 public:
  std::string type() const override { return "mps"; }
  int Count() const override {
    try {
      return torch::mps::is_available() ? 1 : 0;
    } catch (const std::exception&) {
      return 0;
    }
  }
  void Probe(int /*index*/, DeviceInfo* info) const override {
    info->name = "Apple MPS";
    info->memory_stats = false;
    info->notes.push_back("MPS keeps no peak-memory statistics; peak memory is not reported");
    ProbeDtypes(info);
  }
  void Synchronize(int /*index*/) const override { torch::mps::synchronize(); }
  std::optional<MemoryReading> PeakMemory(int /*index*/) const override { return std::nullopt; }
};

}  // namespace

std::unique_ptr<DeviceHooks> MakeMpsHooks() { return std::make_unique<MpsHooks>(); }

}  // namespace tmx
