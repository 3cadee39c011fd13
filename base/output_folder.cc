#include "base/output_folder.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/file_util.h"

namespace tmx {

std::string NearestExisting(const std::string& path) {
  std::string p = path.empty() ? "." : path;
  while (!PathExists(p)) {
    std::string parent = ParentDir(p);
    if (parent == p) break;  // "/" or "." that does not exist: nothing above it
    p = parent;
  }
  return p;
}

std::string RealPathToBe(const std::string& path) {
  auto real = [](const std::string& p) -> std::string {
    std::unique_ptr<char, void (*)(void*)> r(::realpath(p.c_str(), nullptr), std::free);
    return r ? std::string(r.get()) : "";
  };
  std::string result = real(!path.empty() && path[0] == '/' ? "/" : ".");
  int to_make = 0;  // trailing components of `result` that do not exist yet
  for (size_t b = 0; b <= path.size();) {
    const size_t e = std::min(path.find('/', b), path.size());
    const std::string part = path.substr(b, e - b);
    b = e + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      result = ParentDir(result);
      to_make = std::max(0, to_make - 1);
      continue;
    }
    const std::string next = (result == "/" ? "" : result) + "/" + part;
    const std::string resolved = to_make == 0 ? real(next) : "";
    to_make += resolved.empty() ? 1 : 0;
    result = resolved.empty() ? next : resolved;
  }
  return result;
}

std::string FolderWriteProblem(const std::string& folder) {
  const std::string existing = NearestExisting(folder);
  if (!PathExists(existing)) return existing + " does not exist (" + std::strerror(ENOENT) + ")";
  if (!IsDirectory(existing)) {
    struct stat st {};
    const std::string kind = ::stat(existing.c_str(), &st) == 0 ? DescribeFileKind(st.st_mode) : "not a folder";
    return existing + " is " + kind + ", not a folder (" + std::strerror(ENOTDIR) + ")";
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    return existing + " is not writable by this process (" + std::strerror(err) + ")";
  }
  return "";
}

StatusOr<int64_t> FreeBytes(const std::string& folder) {
  const std::string existing = NearestExisting(folder);
  struct statvfs fs {};
  if (::statvfs(existing.c_str(), &fs) != 0) {
    return Status::IoError(existing + ": cannot read the free space of its filesystem (" + std::strerror(errno) + ")");
  }
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

int64_t FolderFileBytes(const std::string& folder) {
  DIR* d = ::opendir(folder.c_str());
  if (d == nullptr) return 0;
  int64_t total = 0;
  while (const dirent* entry = ::readdir(d)) {
    struct stat st {};
    const std::string path = folder + "/" + entry->d_name;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<int64_t>(st.st_size);
  }
  ::closedir(d);
  return total;
}

}  // namespace tmx
