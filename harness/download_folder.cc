#include "harness/download_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "base/file_util.h"
#include "base/text.h"

namespace tmx {

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// What a link at `name` in `dir` points to, for messages ("?" when it cannot be read).
std::string LinkTarget(int dir, const std::string& name) {
  char buf[PATH_MAX];
  ssize_t n = ::readlinkat(dir, name.c_str(), buf, sizeof buf - 1);
  return n < 0 ? "?" : TerminalText(std::string(buf, static_cast<size_t>(n)));
}

// The refusal of the entry `name` in `dir` (shown as `shown`) of kind `st` where `wanted` ("a folder", "a
// regular file") must be: a link says where it points.
Status WrongKind(int dir, const std::string& name, const std::string& shown, const struct stat& st,
                 const std::string& wanted) {
  if (S_ISLNK(st.st_mode)) {
    return Status::FailedPrecondition(
        shown + ": is a symbolic link (to " + LinkTarget(dir, name) +
        "); a download never writes through a link in "
        "its folder nor keeps one in a file's place; refused, nothing written there; fix: remove the link (or "
        "choose another --output-dir)");
  }
  return Status::FailedPrecondition(
      shown + ": is " + DescribeFileKind(st.st_mode) + ", not " + wanted +
      "; refused, nothing written there; fix: remove it (or choose another --output-dir)");
}

}  // namespace

StatusOr<bool> StatAt(int dir, const std::string& name, const std::string& shown, struct stat* st) {
  if (::fstatat(dir, name.c_str(), st, AT_SYMLINK_NOFOLLOW) == 0) return true;
  if (errno == ENOENT) return false;
  return Status::IoError(shown + ": cannot be examined (" + ErrnoText(errno) + ")");
}

StatusOr<std::unique_ptr<LockedFolder>> LockedFolder::Open(const std::string& path, std::string* notice) {
  TM_RETURN_IF_ERROR(MakeDirs(path));
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return Status::IoError(TerminalText(path) + ": cannot be opened as a folder (" + ErrnoText(errno) + ")");
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      return Status::Unavailable(
          TerminalText(path) +
          ": another download is writing into this folder (it holds the folder's lock); two downloads into "
          "one folder would write the same partial files; nothing written; fix: wait for it to finish and run this "
          "again (complete files are skipped), or choose another --output-dir");
    }
    if (notice != nullptr) {
      *notice =
          TerminalText(path) + ": not locked (" + ErrnoText(err) + "); make sure no other download writes into it";
    }
  }
  return std::unique_ptr<LockedFolder>(new LockedFolder(std::move(fd), path));
}

StatusOr<UniqueFd> LockedFolder::WalkFolders(const std::vector<std::string>& parts, bool make) const {
  UniqueFd dir(::dup(fd_.get()));
  if (!dir.valid()) return Status::IoError(TerminalText(path_) + ": cannot be opened again (" + ErrnoText(errno) + ")");
  std::string shown = TerminalText(path_);
  for (const std::string& part : parts) {
    shown += "/" + TerminalText(part);
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    UniqueFd next(::openat(dir.get(), part.c_str(), flags));
    if (!next.valid() && errno == ENOENT) {
      if (!make) return UniqueFd();  // nothing exists below: nothing there can be a link
      if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::IoError(shown + ": cannot create folder (" + ErrnoText(errno) + ")");
      }
      next = UniqueFd(::openat(dir.get(), part.c_str(), flags));
    }
    if (!next.valid()) {
      const int err = errno;
      struct stat st {};
      StatusOr<bool> exists = StatAt(dir.get(), part, shown, &st);
      if (exists.ok() && *exists && !S_ISDIR(st.st_mode)) return WrongKind(dir.get(), part, shown, st, "a folder");
      return Status::IoError(shown + ": cannot be opened as a folder (" + ErrnoText(err) + ")");
    }
    dir = std::move(next);
  }
  return dir;
}

Status LockedFolder::CheckPath(const std::string& rel_path, const std::vector<std::string>& suffixes) const {
  std::vector<std::string> parts = SplitList(rel_path, '/');
  const std::string name = parts.back();
  parts.pop_back();
  StatusOr<UniqueFd> dir = WalkFolders(parts, /*make=*/false);
  if (!dir.ok()) return dir.status();
  if (!dir->valid()) return Status::OK();
  std::vector<std::string> names = {name};
  for (const std::string& suffix : suffixes) names.push_back(name + suffix);
  for (const std::string& n : names) {
    struct stat st {};
    const std::string shown = TerminalText(ParentDir(path_ + "/" + rel_path) + "/" + n);
    StatusOr<bool> exists = StatAt(dir->get(), n, shown, &st);
    if (!exists.ok()) return exists.status();
    if (*exists && !S_ISREG(st.st_mode)) return WrongKind(dir->get(), n, shown, st, "a regular file");
  }
  return Status::OK();
}

StatusOr<FolderEntry> LockedFolder::Entry(const std::string& rel_path) const {
  std::vector<std::string> parts = SplitList(rel_path, '/');
  FolderEntry entry;
  entry.name = parts.back();
  entry.shown = TerminalText(path_ + "/" + rel_path);
  parts.pop_back();
  StatusOr<UniqueFd> dir = WalkFolders(parts, /*make=*/true);
  if (!dir.ok()) return dir.status();
  entry.dir = std::move(dir).value();
  return entry;
}

StatusOr<UniqueFd> OpenRegularFile(int dir, const std::string& name, const std::string& shown) {
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid()) {
    const int err = errno;
    StatusOr<bool> exists = StatAt(dir, name, shown, &st);
    if (exists.ok() && *exists && !S_ISREG(st.st_mode)) return WrongKind(dir, name, shown, st, "a regular file");
    return Status::IoError(shown + ": cannot be read (" + ErrnoText(err) + ")");
  }
  if (::fstat(fd.get(), &st) != 0) return Status::IoError(shown + ": cannot be examined (" + ErrnoText(errno) + ")");
  if (!S_ISREG(st.st_mode)) return WrongKind(dir, name, shown, st, "a regular file");
  return fd;
}

bool OwnedSolely(const struct stat& st) { return S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && st.st_nlink == 1; }

StatusOr<PartialFile> OpenPartial(int dir, const std::string& name, const std::string& shown) {
  PartialFile partial;
  partial.fd = UniqueFd(::openat(dir, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (partial.fd.valid()) return partial;
  if (errno != EEXIST) return Status::IoError(shown + ": cannot be created (" + ErrnoText(errno) + ")");
  struct stat st {};
  partial.fd = UniqueFd(::openat(dir, name.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!partial.fd.valid()) {
    const int err = errno;
    StatusOr<bool> exists = StatAt(dir, name, shown, &st);
    if (exists.ok() && *exists && !S_ISREG(st.st_mode)) return WrongKind(dir, name, shown, st, "a regular file");
    return Status::IoError(shown + ": cannot be opened to resume (" + ErrnoText(err) + ")");
  }
  if (::fstat(partial.fd.get(), &st) != 0) {
    return Status::IoError(shown + ": cannot be examined (" + ErrnoText(errno) + ")");
  }
  if (!S_ISREG(st.st_mode)) return WrongKind(dir, name, shown, st, "a regular file");
  if (!OwnedSolely(st)) {
    const std::string why = st.st_uid != ::geteuid()
                                ? "belongs to user id " + std::to_string(st.st_uid) + ", not to this process's (" +
                                      std::to_string(::geteuid()) + ")"
                                : "has " + std::to_string(st.st_nlink) +
                                      " names (hard links): its bytes are also "
                                      "another file's";
    return Status::FailedPrecondition(shown + ": a partial download that " + why +
                                      "; resuming it would write into a file this download did not make; refused; "
                                      "fix: remove it and run again");
  }
  if (::lseek(partial.fd.get(), 0, SEEK_END) < 0) {
    return Status::IoError(shown + ": cannot be positioned (" + ErrnoText(errno) + ")");
  }
  partial.size = static_cast<int64_t>(st.st_size);
  return partial;
}

}  // namespace tmx
