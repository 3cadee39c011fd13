// Walking folders without trusting what is in them: only regular files are returned, everything else
// (a FIFO that would block a reader, a socket, a device, a dangling link) is reported, never opened.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx {

// Every regular file (or symbolic link to one) under `dir` whose name ends in `suffix`, sorted, looking into
// sub-folders (not into symbolically linked ones, so a link loop is harmless; at most 32 levels deep). Any
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
