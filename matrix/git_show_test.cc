#include "matrix/git_show.h"

#include <gtest/gtest.h>

#include "matrix/testdata/git_repo.h"

namespace tmx::matrix {
namespace {

TEST(GitShowTest, ReadsAFileAsACommitHoldsIt) {
  testing::GitRepo repo;
  std::string first = repo.Commit("reports/journal.jsonl", "one\n");
  std::string second = repo.Commit("reports/journal.jsonl", "one\ntwo\n");
  EXPECT_EQ(ResolveCommit(repo.dir(), "HEAD").value(), second);
  EXPECT_EQ(ResolveCommit(repo.dir(), "HEAD~1").value(), first);
  EXPECT_EQ(ResolveCommit(repo.dir(), first.substr(0, 10)).value(), first);
  EXPECT_EQ(FileAtCommit(repo.dir(), first, "reports/journal.jsonl").value(), "one\n");
  EXPECT_EQ(FileAtCommit(repo.dir(), second, "reports/journal.jsonl").value(), "one\ntwo\n");
}

TEST(GitShowTest, AnUnknownRevisionOrPathIsOneClearError) {
  testing::GitRepo repo;
  std::string commit = repo.Commit("a.txt", "a\n");
  for (const char* bad : {"no-such-branch", "HEAD~5", "", "--output=x"}) {
    StatusOr<std::string> id = ResolveCommit(repo.dir(), bad);
    ASSERT_FALSE(id.ok()) << bad;
    EXPECT_EQ(id.status().code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(id.status().message().find("'" + std::string(bad) + "' is not a"), std::string::npos)
        << id.status().message();
  }
  // Nothing was written by the option-looking revision.
  EXPECT_FALSE(PathExists(repo.dir() + "/x"));
  StatusOr<std::string> missing = FileAtCommit(repo.dir(), commit, "reports/journal.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_NE(missing.status().message().find(commit.substr(0, 12) + ":reports/journal.jsonl: not in that commit"),
            std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace tmx::matrix
