// The cpu device type: the host processor, one device, memory read from the process's peak resident set.
#include <fstream>

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

// Physical memory, or the cgroup limit when it is lower (containers, CI runners).
int64_t CpuMemoryBytes() {
  int64_t total = 0;
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") {
      total = kib * 1024;
      break;
    }
  }
  std::ifstream cg("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (cg >> limit && limit != "max") {
    try {
      int64_t v = std::stoll(limit);
      if (v > 0 && (total == 0 || v < total)) total = v;
    } catch (const std::exception&) {
    }
  }
  return total;
}

class CpuHooks final : public DeviceHooks {
 public:
  std::string type() const override { return "cpu"; }
  int Count() const override { return 1; }
  void Probe(int /*index*/, DeviceInfo* info) const override {
    info->name = CpuModelName();
    info->total_memory_bytes = CpuMemoryBytes();
    info->memory_stats = true;  // peak resident memory of the process (getrusage)
    ProbeDtypes(info);
  }
  std::optional<MemoryReading> PeakMemory(int /*index*/) const override { return ProcessPeakRss(); }
};

}  // namespace

std::unique_ptr<DeviceHooks> MakeCpuHooks() { return std::make_unique<CpuHooks>(); }

}  // namespace tmx
