// The folder a download writes into, with no symbolic link followed or kept below it and one download at a
// time: the folder is opened once and locked (flock(2) on its descriptor, released when the process exits
// however it exits), and every path below it is reached from that descriptor one component at a time with
// O_NOFOLLOW (openat, mkdirat, renameat), so a link planted in the folder, before the download or during it,
// never leads a write elsewhere. A partial file is created exclusively, or resumed only when it is a regular
// file of this process's user with no other name. Network-free and torch-free.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx {

// An open file descriptor, closed when destroyed. Movable, not copyable.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// A file below a LockedFolder: the descriptor of the folder holding it and its name there.
struct FolderEntry {
  UniqueFd dir;
  std::string name;
  std::string shown;  // "<folder>/<path>" for messages, with TerminalText's escapes
};

// A partial file open for writing, positioned at its end.
struct PartialFile {
  UniqueFd fd;
  int64_t size = 0;  // the bytes it already holds (0 when created)
};

class LockedFolder {
 public:
  // Makes `path` with its missing parents (the path the user gave may pass through links of theirs), opens it
  // and takes its lock. Unavailable when another download (another process, or another LockedFolder of this
  // one) holds the lock; IoError when the folder cannot be made or opened. Where the file system has no
  // flock (ENOLCK, some network file systems), `*notice` says the folder is not locked and the download goes
  // on (a second download still cannot share a partial file: each is created exclusively).
  static StatusOr<std::unique_ptr<LockedFolder>> Open(const std::string& path, std::string* notice);
  LockedFolder(const LockedFolder&) = delete;
  LockedFolder& operator=(const LockedFolder&) = delete;

  const std::string& path() const { return path_; }

  // Checks, writing nothing, that `rel_path` ('/'-separated, relative, no `.` or `..`: CheckRepoPath's
  // paths) can be written without a link: each of its folders that exists is a folder, not a link, and the
  // file itself and `<file><suffix>` for each of `suffixes`, where present, are not links either.
  // FailedPrecondition naming the link (and where it points) or the entry of another kind.
  Status CheckPath(const std::string& rel_path, const std::vector<std::string>& suffixes) const;

  // The folder holding `rel_path`, opened with its missing folders made (never through a link: a link on the
  // way is FailedPrecondition, as in CheckPath, and nothing is made below it).
  StatusOr<FolderEntry> Entry(const std::string& rel_path) const;

 private:
  LockedFolder(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  StatusOr<UniqueFd> WalkFolders(const std::vector<std::string>& parts, bool make) const;

  UniqueFd fd_;
  std::string path_;
};

// What is at `name` in the folder `dir`, not following a link: false (and `*st` untouched) when nothing is.
// IoError when it cannot be examined.
StatusOr<bool> StatAt(int dir, const std::string& name, const std::string& shown, struct stat* st);

// Opens the regular file at `name` in `dir` to read it (O_NOFOLLOW, O_NONBLOCK: a link or a FIFO never
// blocks or redirects the read). FailedPrecondition when it is a link or not a regular file.
StatusOr<UniqueFd> OpenRegularFile(int dir, const std::string& name, const std::string& shown);

// Whether `st` is a file only this process's user can have written through this name: a regular file it owns
// with one link (no other name, under this folder or elsewhere, shares its bytes).
bool OwnedSolely(const struct stat& st);

// The partial file `name` in `dir`: created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW) when absent, else
// opened without following a link and resumed only when OwnedSolely; FailedPrecondition naming the problem
// and the fix (remove it) otherwise. The file is positioned at its end.
StatusOr<PartialFile> OpenPartial(int dir, const std::string& name, const std::string& shown);

}  // namespace tmx
