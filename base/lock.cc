#include "base/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/file_util.h"
#include "base/json_io.h"
#include "base/process_info.h"

namespace tmx {
namespace {

using nlohmann::json;

std::optional<LockRecord> ParseRecord(const std::string& text) {
  StatusOr<json> parsed = ParseJsonText("lock", text);
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  const json& j = *parsed;
  auto pid = j.find("pid");
  if (pid == j.end() || !pid->is_number_integer() || pid->get<int64_t>() <= 0) return std::nullopt;
  LockRecord r;
  r.pid = pid->get<int64_t>();
  auto text_field = [&](const char* name) {
    auto it = j.find(name);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  r.host = text_field("host");
  r.started_at = text_field("started_at");
  r.command = text_field("command");
  return r;
}

std::optional<LockRecord> ReadRecord(int fd) {
  std::string text;
  char buf[4096];
  for (off_t offset = 0; text.size() < 65536;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return ParseRecord(text);
}

Status WriteRecord(int fd, const std::string& path, const LockRecord& r) {
  std::string text =
      DumpJson(json{{"pid", r.pid}, {"host", r.host}, {"started_at", r.started_at}, {"command", r.command}}) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::fsync(fd) != 0) {
    return Status::IoError(path + ": cannot record the lock's holder (" + std::strerror(errno) + ")");
  }
  return Status::OK();
}

bool AliveHere(const LockRecord& r) { return (r.host.empty() || r.host == HostName()) && ProcessIsAlive(r.pid); }

Status Held(const std::string& path, const std::optional<LockRecord>& holder) {
  return Status::Unavailable(path + ": another tune-matrix holds this checkout's lock (" +
                             (holder ? holder->Describe() : std::string("holder unknown")) +
                             "); fix: wait for it to finish, or stop it, then run again");
}

}  // namespace

std::string LockRecord::Describe() const {
  std::string s = "pid " + std::to_string(pid);
  if (!host.empty()) s += " on host " + host;
  if (!started_at.empty()) s += ", started " + started_at;
  if (!command.empty()) s += " (" + command + ")";
  return s;
}

CheckoutLock::CheckoutLock(int fd, std::string path, LockRecord record)
    : fd_(fd), path_(std::move(path)), record_(std::move(record)) {}

CheckoutLock::~CheckoutLock() {
  // Clear the record before the kernel lock goes, so nobody reads this holder as one that died.
  if (::ftruncate(fd_, 0) == 0) ::fsync(fd_);
  ::close(fd_);
}

StatusOr<std::unique_ptr<CheckoutLock>> CheckoutLock::Acquire(const std::string& path, const std::string& command,
                                                              std::string* notice) {
  if (notice != nullptr) notice->clear();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) {
    return Status::IoError(path + ": cannot open the checkout lock (" + std::string(std::strerror(errno)) + ")");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": the checkout lock is " + DescribeFileKind(st.st_mode) +
                                   ", not a regular file; fix: remove it and run again");
  }
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  int lock_errno = rc == 0 ? 0 : errno;
  std::optional<LockRecord> previous = ReadRecord(fd);
  bool held = lock_errno == EWOULDBLOCK || (lock_errno != 0 && previous && AliveHere(*previous));
  if (held) {
    ::close(fd);
    return Held(path, previous);
  }
  if (lock_errno != 0 && lock_errno != ENOLCK && lock_errno != EOPNOTSUPP) {
    ::close(fd);
    return Status::IoError(path + ": cannot lock (" + std::string(std::strerror(lock_errno)) + ")");
  }
  if (previous && notice != nullptr) {
    *notice =
        "took over the checkout lock " + path + " left by " + previous->Describe() + ", which " +
        (AliveHere(*previous) ? "no longer holds it (its pid now belongs to another process)" : "is no longer running");
  }
  LockRecord mine{static_cast<int64_t>(::getpid()), HostName(), FormatUtc(UnixNow()), command};
  Status s = WriteRecord(fd, path, mine);
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  return std::unique_ptr<CheckoutLock>(new CheckoutLock(fd, path, std::move(mine)));
}

std::optional<LockRecord> ReadLockRecord(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::optional<LockRecord> r = ReadRecord(fd);
  ::close(fd);
  return r;
}

}  // namespace tmx
