// The cpu device type: the host processor, one device, memory read from the process's peak resident set.
#include <fstream>

#include "base/process_info.h"
#include "harness/device_hooks.h"

namespace tmx {
namespace {

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "CPU";
}

class CpuHooks final : public DeviceHooks {
 public:
  std::string type() const override { return "cpu"; }
  int Count() const override { return 1; }
  void Probe(int /*index*/, DeviceInfo* info) const override {
    info->name = CpuModelName();
    info->total_memory_bytes = MachineMemoryBytes();
    info->memory_stats = true;  // peak resident memory of the process (getrusage)
    ProbeDtypes(info);
  }
  std::optional<MemoryReading> PeakMemory(int /*index*/) const override { return ProcessPeakRss(); }
};

}  // namespace

std::unique_ptr<DeviceHooks> MakeCpuHooks() { return std::make_unique<CpuHooks>(); }

}  // namespace tmx
