#include "base/folder_guard.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

class FolderGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeDirs(root_ + "/checkout/reports/history/tiny").ok());
    ASSERT_TRUE(WriteFileAtomically(root_ + "/checkout/reports/journal.jsonl", "{}\n").ok());
    ASSERT_TRUE(MakeDirs(root_ + "/mine").ok());
  }
  Status Check(const std::string& path) {
    return CheckOutsideGuarded("--journal", path, guarded_, "it is not yours", "name another");
  }
  test::ScratchDir scratch_{"tm_folder_guard"};
  const std::string root_ = scratch_.path();
  const std::vector<GuardedFolder> guarded_ = {{root_ + "/checkout/reports", "recorded results"}};
};

TEST_F(FolderGuardTest, AnythingResolvingInsideAGuardedFolderIsRefused) {
  EXPECT_TRUE(Check(root_ + "/mine/journal.jsonl").ok());
  EXPECT_TRUE(Check(root_ + "/checkout/reports-other/x").ok()) << "a prefix of the name is not inside";
  // Deep inside, not only the folder itself.
  Status deep = Check(root_ + "/checkout/reports/history/tiny/cpu.jsonl");
  EXPECT_EQ(deep.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(deep.message().find("inside " + root_ + "/checkout/reports (recorded results); it is not yours; fix: "
                                "name another"),
            std::string::npos)
      << deep.message();
  // Through `..`, and through a link to the guarded file.
  EXPECT_FALSE(Check(root_ + "/mine/../checkout/reports/new.jsonl").ok());
  ASSERT_EQ(::symlink((root_ + "/checkout/reports/journal.jsonl").c_str(), (root_ + "/mine/link.jsonl").c_str()), 0);
  Status linked = Check(root_ + "/mine/link.jsonl");
  EXPECT_NE(linked.message().find("link.jsonl: resolves to "), std::string::npos) << linked.message();
}

TEST_F(FolderGuardTest, ALinkPlantedInsideAFolderIsFound) {
  ASSERT_TRUE(MakeDirs(root_ + "/mine/reports").ok());
  ASSERT_EQ(::symlink((root_ + "/checkout/reports/history").c_str(), (root_ + "/mine/reports/history").c_str()), 0);
  Status s = CheckOutsideGuarded("--reports-dir", root_ + "/mine/reports", guarded_, "why", "fix");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--reports-dir " + root_ + "/mine/reports: holds " + root_ +
                             "/mine/reports/history, which resolves to "),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace tmx
