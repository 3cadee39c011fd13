#include "harness/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tmx {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

Status WriteAll(int fd, const std::string& data, const std::string& path) {
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

}  // namespace

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Status::NotFound(path + ": no such file");
    return Status::IoError(path + ": cannot be read (" + ErrnoText() + ")");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(path + ": cannot create temporary file (" + ErrnoText() + ")");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) ::fchmod(fd, st.st_mode & 07777);
  Status s = WriteAll(fd, contents, path);
  if (s.ok() && ::fsync(fd) != 0) s = Status::IoError(path + ": fsync failed (" + ErrnoText() + ")");
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Status::IoError(path + ": cannot replace file (" + ErrnoText() + ")");
  }
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
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
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(path + ": cannot open for appending (" + ErrnoText() + ")");
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
