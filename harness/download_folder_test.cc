#include "harness/download_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

class DownloadFolderTest : public ::testing::Test {
 protected:
  std::unique_ptr<LockedFolder> Open() {
    StatusOr<std::unique_ptr<LockedFolder>> folder = LockedFolder::Open(root_, nullptr);
    EXPECT_TRUE(folder.ok()) << folder.status().ToString();
    return folder.ok() ? std::move(folder).value() : nullptr;
  }
  test::ScratchDir dir_{"download_folder_test"};
  std::string root_ = dir_.path() + "/a/b";
};

TEST_F(DownloadFolderTest, OneHolderAtATime) {
  std::unique_ptr<LockedFolder> first = Open();
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(IsDirectory(root_)) << "made with its parents";
  StatusOr<std::unique_ptr<LockedFolder>> second = LockedFolder::Open(root_, nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kUnavailable);
  first.reset();
  EXPECT_TRUE(LockedFolder::Open(root_, nullptr).ok()) << "released with its holder";
}

TEST_F(DownloadFolderTest, EntriesAreReachedWithoutLinks) {
  std::unique_ptr<LockedFolder> folder = Open();
  ASSERT_NE(folder, nullptr);
  EXPECT_TRUE(folder->CheckPath("x/y/z.bin", {".incomplete"}).ok()) << "nothing there yet";
  EXPECT_FALSE(PathExists(root_ + "/x")) << "a check makes nothing";
  StatusOr<FolderEntry> entry = folder->Entry("x/y/z.bin");
  ASSERT_TRUE(entry.ok()) << entry.status().ToString();
  EXPECT_EQ(entry->name, "z.bin");
  EXPECT_EQ(entry->shown, root_ + "/x/y/z.bin");
  EXPECT_TRUE(IsDirectory(root_ + "/x/y"));

  ASSERT_EQ(symlink(dir_.path().c_str(), (root_ + "/x/y/w").c_str()), 0);
  for (const std::string& path : {std::string("x/y/w/q.bin"), std::string("x/y/w")}) {
    Status s = folder->CheckPath(path, {});
    ASSERT_FALSE(s.ok()) << path;
    EXPECT_EQ(s.message().rfind(root_ + "/x/y/w: is a symbolic link (to " + dir_.path() + ")", 0), 0u) << s.message();
  }
  ASSERT_EQ(symlink(dir_.path().c_str(), (root_ + "/x/y/z.bin.incomplete").c_str()), 0);
  EXPECT_TRUE(folder->CheckPath("x/y/z.bin", {}).ok());
  EXPECT_FALSE(folder->CheckPath("x/y/z.bin", {".incomplete"}).ok()) << "a suffixed name that is a link";
  StatusOr<FolderEntry> through = folder->Entry("x/y/w/q/r.bin");
  ASSERT_FALSE(through.ok());
  EXPECT_FALSE(PathExists(dir_.path() + "/q")) << "no folder made through the link";
}

TEST_F(DownloadFolderTest, PartialFilesAreCreatedExclusivelyOrResumedWhenSolelyOurs) {
  std::unique_ptr<LockedFolder> folder = Open();
  ASSERT_NE(folder, nullptr);
  StatusOr<FolderEntry> entry = folder->Entry("f.bin");
  ASSERT_TRUE(entry.ok());
  StatusOr<PartialFile> created = OpenPartial(entry->dir.get(), "f.bin.incomplete", "f");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->size, 0);
  ASSERT_EQ(write(created->fd.get(), "abc", 3), 3);
  StatusOr<PartialFile> resumed = OpenPartial(entry->dir.get(), "f.bin.incomplete", "f");
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->size, 3);
  ASSERT_EQ(write(resumed->fd.get(), "d", 1), 1);
  EXPECT_EQ(*ReadFile(root_ + "/f.bin.incomplete"), "abcd") << "positioned at its end";

  const std::string victim = dir_.path() + "/victim";
  ASSERT_TRUE(WriteFileAtomically(victim, "v").ok());
  ASSERT_EQ(symlink(victim.c_str(), (root_ + "/l.incomplete").c_str()), 0);
  StatusOr<PartialFile> linked = OpenPartial(entry->dir.get(), "l.incomplete", "l");
  ASSERT_FALSE(linked.ok());
  EXPECT_EQ(linked.status().message().rfind("l: is a symbolic link (to " + victim + ")", 0), 0u)
      << linked.status().message();
  EXPECT_EQ(*ReadFile(victim), "v");
}

}  // namespace
}  // namespace tmx
