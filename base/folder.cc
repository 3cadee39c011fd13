#include "base/folder.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "base/clock.h"
#include "base/file_util.h"
#include "base/process_info.h"
#include "base/text.h"

namespace tmx {
namespace {

// The entries of one folder, sorted by name, without "." and ".." (and hidden ones when `skip_hidden`).
StatusOr<std::vector<FolderEntry>> ReadFolder(const std::string& dir, const std::string& relative, bool skip_hidden) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return Status::NotFound(dir + ": no such folder");
    return Status::IoError(dir + ": cannot list the folder (" + std::strerror(errno) + ")");
  }
  std::vector<FolderEntry> entries;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || (skip_hidden && name[0] == '.')) continue;
    FolderEntry entry;
    entry.name = name;
    entry.path = dir + "/" + name;
    entry.relative = relative.empty() ? name : relative + "/" + name;
    struct stat lst;
    entry.is_link = ::lstat(entry.path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
    entry.stat_ok = ::stat(entry.path.c_str(), &entry.st) == 0;
    entries.push_back(std::move(entry));
  }
  ::closedir(d);
  std::sort(entries.begin(), entries.end(), [](const FolderEntry& a, const FolderEntry& b) { return a.name < b.name; });
  return entries;
}

// One walk: the folders entered so far (by device and inode, with the path each was entered by) and the
// entries met.
class Walker {
 public:
  Walker(const WalkOptions& options, const std::function<Status(const FolderEntry&)>& visit)
      : options_(options), visit_(visit) {}

  Status Walk(const std::string& dir) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::NotFound(dir + ": no such folder");
      return Status::IoError(dir + ": cannot list the folder (" + std::strerror(errno) + ")");
    }
    top_ = dir;
    entered_[{st.st_dev, st.st_ino}] = dir;
    return Enter(dir, "", 0);
  }

 private:
  Status Enter(const std::string& dir, const std::string& relative, int depth) {
    StatusOr<std::vector<FolderEntry>> entries = ReadFolder(dir, relative, options_.skip_hidden);
    if (!entries.ok()) return entries.status();
    for (const FolderEntry& e : *entries) {
      if (++met_ > options_.max_entries) {
        return Status::InvalidArgument(top_ + ": more than " + std::to_string(options_.max_entries) +
                                       " files and folders; fix: point at the folder that holds only the files "
                                       "to read");
      }
      bool enter =
          options_.recursive && e.stat_ok && S_ISDIR(e.st.st_mode) && (!e.is_link || options_.follow_folder_links);
      if (!enter) {
        TM_RETURN_IF_ERROR(visit_(e));
        continue;
      }
      if (depth + 1 > options_.max_depth) {
        return Status::InvalidArgument(e.path + ": more than " + std::to_string(options_.max_depth) +
                                       " levels of folders below " + top_ +
                                       "; fix: move the files to read nearer the top");
      }
      auto [it, inserted] = entered_.emplace(std::make_pair(e.st.st_dev, e.st.st_ino), e.path);
      if (!inserted) return SecondVisit(e, it->second);
      TM_RETURN_IF_ERROR(Enter(e.path, e.relative, depth + 1));
    }
    return Status::OK();
  }

  // `e` names the folder entered before as `first`.
  static Status SecondVisit(const FolderEntry& e, const std::string& first) {
    if (e.path.compare(0, first.size() + 1, first + "/") == 0) {
      return Status::InvalidArgument(e.path + ": is " + (e.is_link ? "a symbolic link to " : "") + first +
                                     ", a folder that holds it (a loop); fix: remove the " +
                                     (e.is_link ? "link" : "mount that loops"));
    }
    return Status::InvalidArgument(e.path + ": is the folder already read as " + first +
                                   " (its files would be read twice); fix: remove " +
                                   (e.is_link ? "the link" : "one of the two ways to it"));
  }

  const WalkOptions& options_;
  const std::function<Status(const FolderEntry&)>& visit_;
  std::string top_;
  std::map<std::pair<dev_t, ino_t>, std::string> entered_;
  int64_t met_ = 0;
};

}  // namespace

Status WalkFolder(const std::string& dir, const WalkOptions& options,
                  const std::function<Status(const FolderEntry&)>& visit) {
  return Walker(options, visit).Walk(dir);
}

StatusOr<std::vector<std::string>> ListRegularFiles(const std::string& dir, const std::string& suffix,
                                                    std::vector<std::string>* skipped) {
  std::vector<std::string> files;
  TM_RETURN_IF_ERROR(WalkFolder(dir, WalkOptions(), [&](const FolderEntry& e) {
    if (!EndsWith(e.name, suffix)) return Status::OK();
    if (e.stat_ok && S_ISREG(e.st.st_mode)) {
      files.push_back(e.path);
    } else if (skipped != nullptr) {
      skipped->push_back(e.path + ": " +
                         (e.stat_ok ? "is " + DescribeFileKind(e.st.st_mode) : std::string("is a dangling link")) +
                         ", not a regular file");
    }
    return Status::OK();
  }));
  std::sort(files.begin(), files.end());
  return files;
}

StatusOr<std::vector<std::string>> RemoveStaleTempFiles(const std::string& dir, const StaleTempOptions& options) {
  std::vector<std::string> removed;
  int64_t now = options.now != 0 ? options.now : UnixNow();
  WalkOptions walk;
  walk.recursive = options.recursive;
  Status s = WalkFolder(dir, walk, [&](const FolderEntry& e) {
    int64_t pid = 0;
    if (e.is_link || !e.stat_ok || !S_ISREG(e.st.st_mode) || !IsAtomicWriteTempName(e.name, &pid)) return Status::OK();
    if (now - static_cast<int64_t>(e.st.st_mtime) < options.min_age_s || ProcessIsAlive(pid)) return Status::OK();
    if (::unlink(e.path.c_str()) == 0) removed.push_back(e.path);
    return Status::OK();
  });
  if (s.code() == Status::Code::kNotFound) return removed;
  if (!s.ok()) return s;
  return removed;
}

}  // namespace tmx
