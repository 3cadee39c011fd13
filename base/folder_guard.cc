#include "base/folder_guard.h"

#include <sys/stat.h>

#include "base/folder.h"
#include "base/output_folder.h"

namespace tmx {

const GuardedFolder* GuardedFolderOf(const std::string& path, const std::vector<GuardedFolder>& guarded) {
  const std::string real = RealPathToBe(path);
  for (const GuardedFolder& folder : guarded) {
    const std::string real_folder = RealPathToBe(folder.path);
    if (real == real_folder || real.rfind(real_folder == "/" ? "/" : real_folder + "/", 0) == 0) return &folder;
  }
  return nullptr;
}

Status CheckOutsideGuarded(const std::string& what, const std::string& path, const std::vector<GuardedFolder>& guarded,
                           const std::string& why, const std::string& fix) {
  auto refuse = [&](const std::string& at, const GuardedFolder& folder) {
    const std::string real = RealPathToBe(at);
    return Status::InvalidArgument(what + " " + path + ": " +
                                   (at == path ? "" : "holds " + at + ", which ") + "resolves to " + real +
                                   ", inside " + folder.path + " (" + folder.holds + "); " + why + "; fix: " + fix);
  };
  if (const GuardedFolder* folder = GuardedFolderOf(path, guarded)) return refuse(path, *folder);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status::OK();
  WalkOptions walk;
  walk.follow_folder_links = false;  // a link is one entry, checked by where it resolves
  Status walked = WalkFolder(path, walk, [&](const FolderEntry& entry) -> Status {
    const GuardedFolder* folder = GuardedFolderOf(entry.path, guarded);
    return folder == nullptr ? Status::OK() : refuse(entry.path, *folder);
  });
  return walked.code() == Status::Code::kNotFound ? Status::OK() : walked;
}

}  // namespace tmx
