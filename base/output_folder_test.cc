#include "base/output_folder.h"

#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

class OutputFolderTest : public ::testing::Test {
 protected:
  test::ScratchDir dir_{"output_folder_test"};
  const std::string root_ = dir_.path();
};

TEST_F(OutputFolderTest, AFolderThatCanBeMadeHasNoProblemAndNothingIsCreated) {
  EXPECT_EQ(FolderWriteProblem(root_), "");
  EXPECT_EQ(FolderWriteProblem(root_ + "/a/b/c"), "");
  EXPECT_FALSE(PathExists(root_ + "/a"));
  EXPECT_EQ(NearestExisting(root_ + "/a/b/c"), root_);
  EXPECT_EQ(NearestExisting("no-such-relative-folder/x"), ".");
}

TEST_F(OutputFolderTest, RealPathToBeResolvesWhatExistsAndWalksTheRest) {
  ASSERT_TRUE(MakeDirs(root_ + "/real/inner").ok());
  ASSERT_EQ(symlink((root_ + "/real").c_str(), (root_ + "/link").c_str()), 0);
  char* r = realpath(root_.c_str(), nullptr);
  const std::string real_root = r;
  std::free(r);
  struct Case {
    std::string path, expected;
  } cases[] = {
      {root_, real_root},
      {root_ + "/link", real_root + "/real"},
      {root_ + "/link/inner/new/deeper", real_root + "/real/inner/new/deeper"},
      {root_ + "/link/new/../inner", real_root + "/real/inner"},
      {root_ + "/link/../link/./x/", real_root + "/real/x"},
      {root_ + "/link/inner/../../real", real_root + "/real"},  // `..` of a link's target, as the kernel walks it
      {"/", "/"},
  };
  for (const Case& c : cases) EXPECT_EQ(RealPathToBe(c.path), c.expected) << c.path;
}

// A path through a regular file can never be created, whoever runs (root included).
TEST_F(OutputFolderTest, APathThroughARegularFileNamesTheFile) {
  ASSERT_TRUE(WriteFileAtomically(root_ + "/notes.txt", "x").ok());
  EXPECT_EQ(FolderWriteProblem(root_ + "/notes.txt/run/logs"),
            root_ + "/notes.txt is a regular file, not a folder (Not a directory)");
  EXPECT_EQ(FolderWriteProblem(root_ + "/notes.txt"),
            root_ + "/notes.txt is a regular file, not a folder (Not a directory)");
}

TEST_F(OutputFolderTest, FreeBytesAndFileBytes) {
  StatusOr<int64_t> free_bytes = FreeBytes(root_ + "/not/yet/made");
  ASSERT_TRUE(free_bytes.ok()) << free_bytes.status().ToString();
  EXPECT_GT(*free_bytes, 0);
  ASSERT_TRUE(WriteFileAtomically(root_ + "/a.bin", std::string(1000, 'a')).ok());
  ASSERT_TRUE(MakeDirs(root_ + "/sub").ok());
  ASSERT_TRUE(WriteFileAtomically(root_ + "/sub/b.bin", std::string(500, 'b')).ok());
  EXPECT_EQ(FolderFileBytes(root_), 1000);  // sub-folders not counted
  EXPECT_EQ(FolderFileBytes(root_ + "/missing"), 0);
}

}  // namespace
}  // namespace tmx
