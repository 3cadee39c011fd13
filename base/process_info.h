// Facts about processes and the machine they run on: for locks, cleaning up after killed writers, and limits.
#pragma once

#include <cstdint>
#include <string>

namespace tmx {

// Whether a process with this pid exists on this machine (it may belong to another user). False for
// pids that cannot be one (0, negative, beyond pid_t).
bool ProcessIsAlive(int64_t pid);

// Whether process `pid` has ended: gone, or a zombie nobody reaped yet (a container's init may not reap), which
// ProcessIsAlive still counts.
bool ProcessEnded(int64_t pid);

// This machine's host name, "" if unknown.
std::string HostName();

// The memory this process's machine can give it: physical memory (MemTotal), or the cgroup's memory.max when
// that is lower (containers, CI runners); 0 when neither can be read.
int64_t MachineMemoryBytes();

}  // namespace tmx
