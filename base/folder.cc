#include "base/folder.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include "base/clock.h"
#include "base/file_util.h"
#include "base/process_info.h"

namespace tmx {
namespace {

constexpr int kMaxFolderDepth = 32;

struct Entry {
  std::string path;
  std::string name;
  bool is_link = false;
  bool stat_ok = false;
  struct stat st {};  // of what the entry finally names (links followed)
};

// The entries of one folder, sorted by name, without "." and "..".
StatusOr<std::vector<Entry>> ReadFolder(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return Status::NotFound(dir + ": no such folder");
    return Status::IoError(dir + ": cannot list the folder (" + std::strerror(errno) + ")");
  }
  std::vector<Entry> entries;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    Entry entry;
    entry.name = name;
    entry.path = dir + "/" + name;
    struct stat lst;
    entry.is_link = ::lstat(entry.path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
    entry.stat_ok = ::stat(entry.path.c_str(), &entry.st) == 0;
    entries.push_back(std::move(entry));
  }
  ::closedir(d);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return entries;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Calls `visit` on every entry under `dir`, entering real sub-folders when `recursive`.
Status Walk(const std::string& dir, bool recursive, int depth, const std::function<void(const Entry&)>& visit) {
  StatusOr<std::vector<Entry>> entries = ReadFolder(dir);
  if (!entries.ok()) return entries.status();
  for (const Entry& e : *entries) {
    if (recursive && depth < kMaxFolderDepth && !e.is_link && e.stat_ok && S_ISDIR(e.st.st_mode)) {
      TM_RETURN_IF_ERROR(Walk(e.path, recursive, depth + 1, visit));
    } else {
      visit(e);
    }
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<std::string>> ListRegularFiles(const std::string& dir, const std::string& suffix,
                                                    std::vector<std::string>* skipped) {
  std::vector<std::string> files;
  TM_RETURN_IF_ERROR(Walk(dir, /*recursive=*/true, 0, [&](const Entry& e) {
    if (!EndsWith(e.name, suffix)) return;
    if (e.stat_ok && S_ISREG(e.st.st_mode)) {
      files.push_back(e.path);
    } else if (skipped != nullptr) {
      skipped->push_back(e.path + ": " +
                         (e.stat_ok ? "is " + DescribeFileKind(e.st.st_mode) : std::string("is a dangling link")) +
                         ", not a regular file");
    }
  }));
  std::sort(files.begin(), files.end());
  return files;
}

StatusOr<std::vector<std::string>> RemoveStaleTempFiles(const std::string& dir, const StaleTempOptions& options) {
  std::vector<std::string> removed;
  int64_t now = options.now != 0 ? options.now : UnixNow();
  Status s = Walk(dir, options.recursive, 0, [&](const Entry& e) {
    int64_t pid = 0;
    if (e.is_link || !e.stat_ok || !S_ISREG(e.st.st_mode) || !IsAtomicWriteTempName(e.name, &pid)) return;
    if (now - static_cast<int64_t>(e.st.st_mtime) < options.min_age_s || ProcessIsAlive(pid)) return;
    if (::unlink(e.path.c_str()) == 0) removed.push_back(e.path);
  });
  if (s.code() == Status::Code::kNotFound) return removed;
  if (!s.ok()) return s;
  return removed;
}

}  // namespace tmx
