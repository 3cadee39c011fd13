// Folders a program must not write into on someone else's behalf (a user's run into the checkout's recorded
// results, a download into the built-in configs), guarded by real paths: a path is compared as it will
// resolve (RealPathToBe: symbolic links in it followed, `..` walked as the kernel walks it), so neither a link
// nor `..` leads around a guard, and a link planted inside a folder a program writes is found too.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace tmx {

struct GuardedFolder {
  std::string path;   // as configured, for messages
  std::string holds;  // what is in it, for messages: "the checkout's recorded results"
};

// The first of `guarded` that `path` is or lies inside, comparing real paths; nullptr when none.
const GuardedFolder* GuardedFolderOf(const std::string& path, const std::vector<GuardedFolder>& guarded);

// InvalidArgument "<what> <path>: resolves to <real>, inside <folder> (<holds>); <why>; fix: <fix>" when `path`
// lies in a guarded folder, or when `path` is a folder and something that already exists below it (a file, a
// folder, a symbolic link planted there, checked without following links into folders) does. The walk below
// is bounded (WalkFolder's limits); a folder that cannot be walked is refused the same way.
Status CheckOutsideGuarded(const std::string& what, const std::string& path, const std::vector<GuardedFolder>& guarded,
                           const std::string& why, const std::string& fix);

}  // namespace tmx
