// One lock per checkout, so that two commands that write configs, reports or the journal never run at once.
//
// The lock is an flock(2) on a file; the kernel releases it when its holder exits, however it exits, so a
// killed holder never blocks the next run. The file also keeps a record of the holder (pid, host, start
// time, command) so that a refused command can say who holds the lock, and the next holder can say whose
// lock it took over.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"

namespace tmx {

// The lock file's name in a checkout's root folder.
inline constexpr char kCheckoutLockName[] = ".tune-matrix.lock";

struct LockRecord {
  int64_t pid = 0;
  std::string host;
  std::string started_at;  // UTC, "2026-12-02T11:30:00Z"
  std::string command;     // e.g. "tune-matrix run --device cpu"
  // "pid 123 on host gpu1, started 2026-12-02T11:30:00Z (tune-matrix run)".
  std::string Describe() const;
};

// A held checkout lock; released (and its record cleared) when destroyed. Not copyable.
class CheckoutLock {
 public:
  // Takes the lock file at `path` (created if missing; its folder must exist) for `command`.
  // Unavailable, naming the holder's pid, host, start time and command, while another process (or another
  // CheckoutLock in this one) holds it: the caller must not write. When the file keeps the record of a
  // holder that is gone (killed, crashed), the lock is taken over and `notice` (may be null) receives one
  // line saying whose it was; otherwise `notice` is left empty.
  // On a file system without flock (ENOLCK), a recorded holder whose pid is alive on this host holds it.
  static StatusOr<std::unique_ptr<CheckoutLock>> Acquire(const std::string& path, const std::string& command,
                                                         std::string* notice);
  ~CheckoutLock();
  CheckoutLock(const CheckoutLock&) = delete;
  CheckoutLock& operator=(const CheckoutLock&) = delete;

  const std::string& path() const { return path_; }
  const LockRecord& record() const { return record_; }

 private:
  CheckoutLock(int fd, std::string path, LockRecord record);
  int fd_;
  std::string path_;
  LockRecord record_;
};

// The holder recorded in the lock file at `path`: nothing when the file is missing, empty (released) or
// unreadable.
std::optional<LockRecord> ReadLockRecord(const std::string& path);

}  // namespace tmx
