#include "base/folder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

class FolderTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  void Touch(const std::string& name, int64_t age_s = 0) {
    ASSERT_TRUE(MakeDirs(ParentDir(Path(name))).ok());
    ASSERT_TRUE(WriteFileAtomically(Path(name), "x").ok());
    if (age_s > 0) {
      struct timeval times[2];
      times[0].tv_sec = times[1].tv_sec = static_cast<time_t>(UnixNow() - age_s);
      times[0].tv_usec = times[1].tv_usec = 0;
      ASSERT_EQ(::utimes(Path(name).c_str(), times), 0);
    }
  }
  test::ScratchDir dir_{"folder_test"};
};

TEST_F(FolderTest, ListsRegularFilesAndReportsTheRestWithoutOpeningThem) {
  Touch("b.yaml");
  Touch("a/x.yaml");
  Touch("a/notes.txt");
  ASSERT_EQ(::mkfifo(Path("a/fifo.yaml").c_str(), 0644), 0);
  ASSERT_EQ(::symlink("b.yaml", Path("link.yaml").c_str()), 0);
  ASSERT_EQ(::symlink("missing.yaml", Path("dangling.yaml").c_str()), 0);
  ASSERT_EQ(::symlink(".", Path("a/loop").c_str()), 0);  // not entered
  std::vector<std::string> skipped;
  StatusOr<std::vector<std::string>> files = ListRegularFiles(dir_.path(), ".yaml", &skipped);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(*files, (std::vector<std::string>{Path("a/x.yaml"), Path("b.yaml"), Path("link.yaml")}));
  EXPECT_EQ(skipped, (std::vector<std::string>{Path("a/fifo.yaml") + ": is a FIFO, not a regular file",
                                               Path("dangling.yaml") + ": is a dangling link, not a regular file"}));
  EXPECT_EQ(ListRegularFiles(Path("nope"), ".yaml", nullptr).status().code(), Status::Code::kNotFound);
}

TEST_F(FolderTest, RemovesOnlyOldTemporaryFilesOfDeadWriters) {
  const int64_t kDeadPid = 999999999;  // above any pid_max
  const std::string mine = std::to_string(::getpid());
  Touch("configs/lora.yaml", 7200);
  Touch("configs/.lora.yaml.tm-tmp." + std::to_string(kDeadPid) + ".0", 7200);  // stale: old, writer gone
  Touch("configs/sub/full.yaml.tmp." + std::to_string(kDeadPid), 7200);         // the older name, stale
  Touch("configs/.lora.yaml.tm-tmp." + std::to_string(kDeadPid) + ".1", 60);    // too recent
  Touch("configs/.lora.yaml.tm-tmp." + mine + ".2", 7200);                      // writer alive
  StatusOr<std::vector<std::string>> removed = RemoveStaleTempFiles(Path("configs"));
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, (std::vector<std::string>{Path("configs/.lora.yaml.tm-tmp." + std::to_string(kDeadPid) + ".0"),
                                                Path("configs/sub/full.yaml.tmp." + std::to_string(kDeadPid))}));
  EXPECT_TRUE(PathExists(Path("configs/lora.yaml")));
  EXPECT_TRUE(PathExists(Path("configs/.lora.yaml.tm-tmp." + std::to_string(kDeadPid) + ".1")));
  EXPECT_TRUE(PathExists(Path("configs/.lora.yaml.tm-tmp." + mine + ".2")));

  StaleTempOptions top_only;
  top_only.recursive = false;
  top_only.min_age_s = 0;
  Touch("configs/sub/.x.tm-tmp." + std::to_string(kDeadPid) + ".0");
  removed = RemoveStaleTempFiles(Path("configs"), top_only);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->size(), 1u);  // the recent one at the top, not the one in sub/
  EXPECT_TRUE(RemoveStaleTempFiles(Path("nope")).value().empty());
}

}  // namespace
}  // namespace tmx
