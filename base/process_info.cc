#include "base/process_info.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

namespace tmx {

bool ProcessIsAlive(int64_t pid) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return false;
  // Signal 0 checks existence and permission without sending anything; EPERM means it exists.
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

bool ProcessEnded(int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return !ProcessIsAlive(pid);
  const size_t paren = line.rfind(')');  // the name in parentheses may hold anything; the state follows it
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

int64_t MachineMemoryBytes() {
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

}  // namespace tmx
