#include "base/system_folders.h"

#include <cstdlib>
#include <vector>

#include "base/output_folder.h"

namespace tmx {
namespace {

// Only the folder itself: what lies below belongs to users and services.
const std::vector<std::string>& ExactSystemFolders() {
  static const std::vector<std::string> folders = {"/", "/home", "/root", "/run", "/var"};
  return folders;
}

// The folder and everything below it.
const std::vector<std::string>& SystemTrees() {
  static const std::vector<std::string> trees = {"/bin",    "/boot", "/dev", "/etc",     "/lib",     "/lib32",
                                                 "/lib64",  "/libx32", "/proc", "/sbin", "/sys",     "/usr",
                                                 "/var/lib", "/var/log", "/var/cache"};
  return trees;
}

bool Inside(const std::string& path, const std::string& tree) {
  return path.size() > tree.size() && path.compare(0, tree.size(), tree) == 0 && path[tree.size()] == '/';
}

}  // namespace

std::string SystemFolderProblem(const std::string& dir) {
  const char* home = std::getenv("HOME");
  if (dir == "~" || dir == "~/") return "is the home folder";
  const std::string real = RealPathToBe(dir);
  std::string given = dir;  // as written, for saying what it resolved to only where that differs
  while (given.size() > 1 && given.back() == '/') given.pop_back();
  if (home != nullptr && *home != '\0' && real == RealPathToBe(home) && real != "/") return "is the home folder";
  for (const std::string& folder : ExactSystemFolders()) {
    if (real == folder) return "is a system folder" + (real == given ? std::string() : " (" + real + ")");
  }
  for (const std::string& tree : SystemTrees()) {
    if (real == tree) return "is a system folder" + (real == given ? std::string() : " (" + real + ")");
    if (Inside(real, tree)) return "is inside the system folder " + tree + (real == given ? "" : " (it is " + real + ")");
  }
  return "";
}

}  // namespace tmx
