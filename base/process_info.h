// Facts about processes on this machine, for locks and for cleaning up after killed writers.
#pragma once

#include <cstdint>
#include <string>

namespace tmx {

// Whether a process with this pid exists on this machine (it may belong to another user). False for
// pids that cannot be one (0, negative, beyond pid_t).
bool ProcessIsAlive(int64_t pid);

// This machine's host name, "" if unknown.
std::string HostName();

}  // namespace tmx
