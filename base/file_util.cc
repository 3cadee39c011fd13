#include "base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/input_file.h"

namespace tmx {
namespace {

constexpr char kTempMarker[] = ".tm-tmp.";
constexpr int kMaxSymlinkHops = 40;
constexpr char kPassRegular[] = "pass a regular file";

std::string ErrnoText() { return std::strerror(errno); }

bool AllDigits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

Status NotRegular(const std::string& path, mode_t mode, const std::string& fix) {
  return Status::InvalidArgument(path + ": is " + DescribeFileKind(mode) + ", not a regular file; fix: " + fix);
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError(path + ": cannot write (" + ErrnoText() + ")");
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

StatusOr<std::string> ReadFile(const std::string& path) { return ReadFile(path, InputFileOptions()); }

std::string AtomicWriteTempName(const std::string& name, int64_t pid, int n) {
  return "." + name + kTempMarker + std::to_string(pid) + "." + std::to_string(n);
}

bool IsAtomicWriteTempName(const std::string& name, int64_t* pid) {
  std::string digits;
  size_t marker = name.rfind(kTempMarker);
  if (name.size() > 1 && name[0] == '.' && marker != std::string::npos && marker > 1) {
    std::string rest = name.substr(marker + std::strlen(kTempMarker));  // "<pid>.<n>"
    size_t dot = rest.find('.');
    if (dot == std::string::npos || !AllDigits(rest.substr(dot + 1))) return false;
    digits = rest.substr(0, dot);
  } else {
    size_t legacy = name.rfind(".tmp.");
    if (legacy == std::string::npos || legacy == 0) return false;
    digits = name.substr(legacy + 5);
  }
  if (!AllDigits(digits) || digits.size() > 9) return false;
  if (pid != nullptr) *pid = std::stoll(digits);
  return true;
}

StatusOr<std::string> ResolveSymlinks(const std::string& path) {
  std::string cur = path;
  for (int hops = 0; hops <= kMaxSymlinkHops; ++hops) {
    struct stat st;
    if (::lstat(cur.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
    char buf[PATH_MAX];
    ssize_t n = ::readlink(cur.c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) return Status::IoError(cur + ": cannot read the symbolic link (" + ErrnoText() + ")");
    std::string target(buf, static_cast<size_t>(n));
    cur = target[0] == '/' ? target : ParentDir(cur) + "/" + target;
  }
  return Status::InvalidArgument(path + ": more than " + std::to_string(kMaxSymlinkHops) +
                                 " symbolic links in a row (a loop?); fix: point the link at a file");
}

std::string DescribeFileKind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  return WriteFileAtomically(path, std::vector<std::string_view>{contents});
}

Status WriteFileAtomically(const std::string& path, const std::vector<std::string_view>& pieces) {
  StatusOr<std::string> resolved = ResolveSymlinks(path);
  if (!resolved.ok()) return resolved.status();
  const std::string& target = *resolved;
  struct stat st;
  bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) return NotRegular(target, st.st_mode, "nothing was written; remove it first");
  const std::string dir = ParentDir(target);
  static std::atomic<int> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = dir + "/" + AtomicWriteTempName(BaseName(target), ::getpid(), counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return Status::IoError(path + ": cannot create temporary file " + tmp + " (" + ErrnoText() + ")");
  if (exists) ::fchmod(fd, st.st_mode & 07777);
  Status s;
  for (std::string_view piece : pieces) {
    if (s.ok()) s = WriteAll(fd, piece, path);
  }
  if (s.ok() && ::fsync(fd) != 0) s = Status::IoError(path + ": fsync failed (" + ErrnoText() + ")");
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), target.c_str()) != 0) {
    s = Status::IoError(path + ": cannot replace file (" + ErrnoText() + ")");
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename is durable once the folder is synced too.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return Status::OK();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

Status MakeDirs(const std::string& path) {
  for (size_t pos = 0; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    std::string prefix = path.substr(0, pos);
    if (prefix.empty()) continue;
    if (PathExists(prefix)) {
      if (!IsDirectory(prefix)) return Status::IoError(prefix + ": exists and is not a folder");
      continue;
    }
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IoError(prefix + ": cannot create folder (" + ErrnoText() + ")");
    }
  }
  return Status::OK();
}

Status AppendLineDurably(const std::string& path, const std::string& line) {
  // O_NONBLOCK: a FIFO in the file's place must be refused, not waited on for a reader.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0644);
  struct stat st;
  if (fd < 0 && errno == ENXIO && ::stat(path.c_str(), &st) == 0) return NotRegular(path, st.st_mode, kPassRegular);
  if (fd < 0) return Status::IoError(path + ": cannot open for appending (" + ErrnoText() + ")");
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return NotRegular(path, st.st_mode, kPassRegular);
  }
  Status s = WriteAll(fd, line + "\n", path);
  if (s.ok() && ::fsync(fd) != 0) s = Status::IoError(path + ": fsync failed (" + ErrnoText() + ")");
  ::close(fd);
  return s;
}

std::string ParentDir(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string ExecutableDir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return ParentDir(std::string(buf, static_cast<size_t>(n)));
}

}  // namespace tmx
