#include "base/system_folders.h"

#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

TEST(SystemFoldersTest, TheRootSystemTreesAndTheHomeFolderAreRefused) {
  setenv("HOME", "/home/someone", 1);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"/", "is a system folder"},
      {"/usr", "is a system folder"},
      {"/usr/", "is a system folder"},
      // Below a system tree: output_dir=/usr/bin used to pass, only the top-level folders were listed.
      {"/usr/bin", "is inside the system folder /usr"},
      {"/etc/cron.d/new", "is inside the system folder /etc"},
      {"/var/lib/dpkg", "is inside the system folder /var/lib"},
      {"/tmp/../usr/local/x", "is inside the system folder /usr (it is /usr/local/x)"},
      {"/var", "is a system folder"},
      {"/home", "is a system folder"},
      {"/home/someone", "is the home folder"},
      {"~", "is the home folder"},
  };
  for (const auto& [dir, problem] : refused) EXPECT_EQ(SystemFolderProblem(dir), problem) << dir;
  for (const std::string& fine : {"/tmp/run", "/home/someone/runs/a", "/var/tmp/x", "/srv/data/run", "/root/run",
                                  "/opt/runs", "relative/run"}) {
    EXPECT_EQ(SystemFolderProblem(fine), "") << fine;
  }
}

TEST(SystemFoldersTest, ALinkIntoASystemTreeIsFollowed) {
  test::ScratchDir scratch("tm_system_folders");
  const std::string link = scratch.path() + "/out";
  ASSERT_EQ(::symlink("/etc", link.c_str()), 0);
  EXPECT_EQ(SystemFolderProblem(link + "/run"), "is inside the system folder /etc (it is /etc/run)");
}

}  // namespace
}  // namespace tmx
