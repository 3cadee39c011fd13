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

// The page links commits to the repository's web address, made from the remote's URL without credentials.
TEST(GitShowTest, ARemotesWebAddressLeavesOutCredentialsAndGitsSuffix) {
  EXPECT_EQ(RepositoryWebUrl("git@github.com:owner/tune-matrix.git"), "https://github.com/owner/tune-matrix");
  EXPECT_EQ(RepositoryWebUrl("https://github.com/owner/tune-matrix.git\n"), "https://github.com/owner/tune-matrix");
  EXPECT_EQ(RepositoryWebUrl("https://user:secret@github.com/owner/tune-matrix"), "https://github.com/owner/tune-matrix");
  EXPECT_EQ(RepositoryWebUrl("ssh://git@git.example.com:2222/team/tune-matrix.git"),
            "https://git.example.com/team/tune-matrix");
  EXPECT_EQ(RepositoryWebUrl("http://gitlab.example.com/group/sub/tune-matrix/"),
            "https://gitlab.example.com/group/sub/tune-matrix");
  for (const char* none : {"", "/srv/git/tune-matrix.git", "file:///srv/git/tune-matrix", "../tune-matrix",
                           "https://github.com", "https://github.com/o/r\"onmouseover=\"x"}) {
    EXPECT_EQ(RepositoryWebUrl(none), "") << none;
  }
}

TEST(GitShowTest, TheOriginRemotesWebAddressOrNone) {
  testing::GitRepo repo;
  EXPECT_EQ(OriginWebUrl(repo.dir()), "");  // no remote
  repo.Git({"remote", "add", "origin", "git@github.com:owner/tune-matrix.git"});
  EXPECT_EQ(OriginWebUrl(repo.dir()), "https://github.com/owner/tune-matrix");
  EXPECT_EQ(OriginWebUrl("/nonexistent/folder"), "");
}

}  // namespace
}  // namespace tmx::matrix
