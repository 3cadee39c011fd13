#include "base/process_info.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <limits>

namespace tmx {

bool ProcessIsAlive(int64_t pid) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return false;
  // Signal 0 checks existence and permission without sending anything; EPERM means it exists.
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

}  // namespace tmx
