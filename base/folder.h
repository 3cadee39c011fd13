// Walking folders without trusting what is in them: only regular files are returned, everything else
// (a FIFO that would block a reader, a socket, a device, a dangling link) is reported, never opened.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx {

// One entry met by WalkFolder.
struct FolderEntry {
  std::string path;      // "<dir>/<relative>"
  std::string relative;  // relative to the folder walked: "data/train.jsonl"
  std::string name;      // the last part: "train.jsonl"
  bool is_link = false;  // a symbolic link; `st` describes what it finally names
  bool stat_ok = false;  // false for a dangling link (or an entry removed during the walk)
  struct stat st {};
};

struct WalkOptions {
  // Enter sub-folders. Off, they are passed to `visit` like any other entry.
  bool recursive = true;
  // Leave out entries whose name starts with '.', and everything under such folders (.git, .cache), as
  // readers of dataset folders do.
  bool skip_hidden = false;
  // Enter folders reached through symbolic links too. Off, such a link is passed to `visit` as an entry
  // (which is what a walk that deletes files wants: it never leaves the tree). On, a folder is still entered
  // only once (see WalkFolder).
  bool follow_folder_links = false;
  // The deepest sub-folder entered, the walked folder being 0; a deeper one is InvalidArgument.
  int max_depth = 32;
  // The most entries (files and folders, hidden ones skipped not counted) the walk meets; more is
  // InvalidArgument: it was pointed at something far larger than a dataset or a checkpoint (/, a home folder).
  int64_t max_entries = 1'000'000;
};

// Calls `visit` on every entry under `dir` that is not a folder it enters: depth first, the names of each
// folder in sorted order, its sub-folders entered where they are met. Every folder is entered once, known by
// (st_dev, st_ino); meeting one a second time is InvalidArgument naming the way it was met, e.g.
//   "<dir>/data/loop: is a symbolic link to <dir>/data, a folder that holds it (a loop); fix: remove the link"
// rather than reading its files again (or forever). NotFound if `dir` does not exist; an error from
// `visit` stops the walk and is returned.
Status WalkFolder(const std::string& dir, const WalkOptions& options,
                  const std::function<Status(const FolderEntry&)>& visit);

// Every regular file (or symbolic link to one) under `dir` whose name ends in `suffix`, sorted, looking into
// sub-folders (not into symbolically linked ones; at most 32 levels deep, deeper is InvalidArgument). Any
// other entry whose name ends in `suffix` is appended to `skipped` (may be null) as
// "<path>: is a FIFO, not a regular file". NotFound if `dir` does not exist.
StatusOr<std::vector<std::string>> ListRegularFiles(const std::string& dir, const std::string& suffix,
                                                    std::vector<std::string>* skipped);

struct StaleTempOptions {
  // A temporary file is stale only once its last change is at least this old (seconds), so a write in
  // progress on another machine sharing the folder is never taken for a dead one. A caller holding the
  // checkout lock (base/lock.h) knows no writer of this checkout is running and may pass 0.
  int64_t min_age_s = 3600;
  // Also clean the sub-folders (not symbolically linked ones).
  bool recursive = true;
  // The time to compare with (seconds since the epoch); 0 means now.
  int64_t now = 0;
};

// Removes the temporary files that WriteFileAtomically leaves when its process is killed before the rename
// (see IsAtomicWriteTempName), under `dir`: those at least `min_age_s` old whose writer's pid is not a live
// process. Returns the paths removed. A folder that does not exist has none.
StatusOr<std::vector<std::string>> RemoveStaleTempFiles(const std::string& dir, const StaleTempOptions& options = {});

}  // namespace tmx
