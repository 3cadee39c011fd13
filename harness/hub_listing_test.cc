#include "harness/hub_listing.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(HubListing, Paths) {
  EXPECT_TRUE(CheckRepoPath("config.json", "r").ok());
  EXPECT_TRUE(CheckRepoPath("original/params.json", "r").ok());
  EXPECT_TRUE(CheckRepoPath("a..b/c", "r").ok());
  for (const char* bad : {"", "/x", "..", "a/..", "a/./b", "a/", "x.incomplete"}) {
    EXPECT_FALSE(CheckRepoPath(bad, "r").ok()) << "'" << bad << "'";
  }
}

// Git refuses these components in a tree (any case; with what HFS+ ignores and NTFS drops; NTFS's short name)
// because a file under them configures the checkout it lands in (`core.fsmonitor` runs a command on the next
// `git status`); Mercurial's, Subversion's and Bazaar's folders do the same for theirs.
TEST(HubListing, ControlFoldersAreRefusedInAnyCase) {
  for (const char* bad : {".git/config", ".GIT/config", ".Git/hooks/pre-commit", "sub/.git/hooks/x", "a/b/.gIt/HEAD",
                          ".git", ".git./config", ".git  /config", "git~1/config", "GIT~1/config",
                          ".g\xe2\x80\x8cit/config", "\xef\xbb\xbf.git/config", ".hg/hgrc", "sub/.HG/hgrc",
                          ".svn/entries", ".bzr/branch/branch.conf", ".cache/huggingface/download/x.metadata"}) {
    Status s = CheckRepoPath(bad, "org/r");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << bad;
    EXPECT_NE(s.message().find("control folder"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("refused, nothing downloaded"), std::string::npos) << s.message();
  }
  // What Hub repos hold and git allows: .gitattributes in every repo, names that only start like a control folder.
  for (const char* good : {".gitattributes", ".gitignore", "sub/.gitkeep", ".github/workflows/ci.yml", "git/config",
                           "x.git/config", ".git-blame-ignore-revs", ".hgignore", ".cache/other/x", "a/.cache/huggingface/x",
                           "my.git~1"}) {
    EXPECT_TRUE(CheckRepoPath(good, "org/r").ok()) << good << ": " << CheckRepoPath(good, "org/r").message();
  }
}

TEST(HubListing, RepoIdsAsTheHubValidatesThem) {
  for (const char* good : {"gpt2", "meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen2.5-0.5B", "a/b", "_x/y_", "o/a.b-c_d",
                           "o/x2"}) {
    EXPECT_TRUE(ValidateRepoId(good).ok()) << good << ": " << ValidateRepoId(good).message();
  }
  struct Case {
    std::string id, why;
  } bad[] = {
      {"owner/.", "'.' starts or ends with '.'"},
      {"owner/..", "'--' and '..' are not allowed in it"},
      {"./x", "'.' starts or ends with '.'"},
      {"owner/.hidden", "'.hidden' starts or ends with '.'"},
      {"owner/name-", "'name-' starts or ends with '-'"},
      {"a--b/c", "'--' and '..' are not allowed in it"},
      {"a/b/c", "it must be one name or owner/name"},
      {"/x", "it must be one name or owner/name"},
      {"x/", "it must be one name or owner/name"},
      {"a//b", "it must be one name or owner/name"},
      {"", "it must be one name or owner/name"},
      {"o/na me", "'na me' holds a character other than letters, digits, '-', '_' and '.'"},
      {"o/n\x1b[31m", "'n\x1b[31m' holds a character other than letters, digits, '-', '_' and '.'"},
      {"o/" + std::string(97, 'n'), "'nnnnnnnnnnnnnnnnnnnn...' is longer than 96 characters"},
  };
  for (const Case& c : bad) {
    Status s = ValidateRepoId(c.id);
    ASSERT_FALSE(s.ok()) << c.id;
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("'" + c.id + "' is not a Hub repo id: " + c.why + "; fix: ", 0), 0u) << s.message();
  }
  EXPECT_TRUE(ValidateRepoId("o/" + std::string(96, 'n')).ok());
}

TEST(HubListing, Patterns) {
  struct Case {
    std::string path, pattern;
    bool matches;
  } cases[] = {
      {"model.safetensors", "*.safetensors", true},
      {"sub/model.safetensors", "*.safetensors", true},  // `*` crosses folders, as in fnmatch
      {"original/consolidated.00.pth", "original/consolidated.00.pth", true},
      {"original/params.json", "original/", true},
      {"original/params.json", "original/*", true},
      {"config.json", "original/*", false},
      {"config.json", "*.safetensors", false},
  };
  for (const Case& c : cases) EXPECT_EQ(MatchesPattern(c.path, c.pattern), c.matches) << c.path << " ~ " << c.pattern;
}

TEST(HubListing, Listing) {
  StatusOr<std::vector<HubFile>> files = ParseTreeListing(
      R"([{"type":"directory","oid":"d","size":0,"path":"original"},
          {"type":"file","oid":"1111111111111111111111111111111111111111","size":12,"path":"config.json"},
          {"type":"file","oid":"2222222222222222222222222222222222222222","size":134,"path":"original/w.pth",
           "lfs":{"oid":"abc","size":9000,"pointerSize":134}}])",
      "listing");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].path, "config.json");
  EXPECT_EQ((*files)[0].sha256, "");
  EXPECT_EQ((*files)[1].size, 9000);
  EXPECT_EQ((*files)[1].sha256, "abc");
  EXPECT_FALSE(ParseTreeListing("{\"error\":\"x\"}", "listing").ok());
  EXPECT_FALSE(ParseTreeListing(R"([{"type":"file","path":"a"}])", "listing").ok());
}

}  // namespace
}  // namespace tmx
