#include "harness/hub_listing.h"

#include <gtest/gtest.h>

#include "base/text.h"

namespace tmx {
namespace {

TEST(HubListing, Paths) {
  EXPECT_TRUE(CheckRepoPath("config.json", "r").ok());
  EXPECT_TRUE(CheckRepoPath("original/params.json", "r").ok());
  EXPECT_TRUE(CheckRepoPath("a..b/c", "r").ok());
  EXPECT_TRUE(CheckRepoPath(std::string(255, 'n') + "/" + std::string(255, 'm'), "r").ok());
  EXPECT_FALSE(CheckRepoPath(std::string(256, 'n'), "r").ok());
  EXPECT_FALSE(CheckRepoPath(std::string(4097, 'n'), "r").ok());
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
  for (const char* good :
       {".gitattributes", ".gitignore", "sub/.gitkeep", ".github/workflows/ci.yml", "git/config", "x.git/config",
        ".git-blame-ignore-revs", ".hgignore", ".cache/other/x", "a/.cache/huggingface/x", "my.git~1"}) {
    EXPECT_TRUE(CheckRepoPath(good, "org/r").ok()) << good << ": " << CheckRepoPath(good, "org/r").message();
  }
}

TEST(HubListing, RepoIdsAsTheHubValidatesThem) {
  for (const char* good :
       {"gpt2", "meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen2.5-0.5B", "a/b", "_x/y_", "o/a.b-c_d", "o/x2"}) {
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
      {"o/n\x1b[31m", "'n\\x1b[31m' holds a character other than letters, digits, '-', '_' and '.'"},
      {"o/" + std::string(97, 'n'), "'nnnnnnnnnnnnnnnnnnnn...' is longer than 96 characters"},
      {"o/\x1b" + std::string(97, 'n'),
       "'\\x1bnnnnnnnnnnnnnnnnnnn...' is longer than 96 characters"},  // found by fuzzing
  };
  for (const Case& c : bad) {
    Status s = ValidateRepoId(c.id);
    ASSERT_FALSE(s.ok()) << c.id;
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("'" + TerminalText(c.id) + "' is not a Hub repo id: " + c.why + "; fix: ", 0), 0u)
        << s.message();
  }
  EXPECT_TRUE(ValidateRepoId("o/" + std::string(96, 'n')).ok());
}

TEST(HubListing, OriginsAreComparedAsLibcurlConnects) {
  struct Case {
    std::string url, origin;
  } cases[] = {
      {"https://huggingface.co", "https://huggingface.co:443"},
      {"https://HuggingFace.CO:443/api/x?y=1", "https://huggingface.co:443"},
      {"HTTP://127.0.0.1:8080/", "http://127.0.0.1:8080"},
      {"http://user:pw@127.0.0.1:08080/x", "http://127.0.0.1:8080"},
      {"https://[::1]:9/x", "https://[::1]:9"},
      {"https://[::1]/x", "https://[::1]:443"},
      {"ftp://huggingface.co/x", ""},
      {"/api/models/x", ""},
      {"https://evil.example\\@huggingface.co/x", ""},  // a backslash: parsers disagree on the host
      {"https://a@b@huggingface.co/x", ""},
      {"https://huggingface.co x/", ""},
      {"https://huggingface.co:99999/", ""},
      {"https://huggingface.co:/", ""},
      {"https://:443/", ""},
      {"https://huggingface%2eco/", ""},
      {std::string("https://huggingface.co\0.evil/", 29), ""},  // found by fuzzing: a NUL ends libcurl's copy
  };
  for (const Case& c : cases) EXPECT_EQ(UrlOrigin(c.url), c.origin) << c.url;
  EXPECT_TRUE(SameOrigin("https://huggingface.co/api/models/x?cursor=2", "https://huggingface.co"));
  EXPECT_TRUE(SameOrigin("https://HUGGINGFACE.co:443/x", "https://huggingface.co/"));
  EXPECT_FALSE(SameOrigin("http://huggingface.co/x", "https://huggingface.co"));
  EXPECT_FALSE(SameOrigin("https://huggingface.co:8443/x", "https://huggingface.co"));
  EXPECT_FALSE(SameOrigin("https://huggingface.co.evil.example/x", "https://huggingface.co"));
  EXPECT_FALSE(SameOrigin("https://evil.example/?https://huggingface.co", "https://huggingface.co"));
  EXPECT_FALSE(SameOrigin("garbage", "garbage"));
}

TEST(HubListing, ShownUrlsHoldNoCredentialsAndNoControls) {
  EXPECT_EQ(ShownUrl("https://user:s3cret@hub.example:8443/api/x?y=a@b"), "https://hub.example:8443/api/x?y=a@b");
  EXPECT_EQ(ShownUrl("https://token@hub.example"), "https://hub.example");
  EXPECT_EQ(ShownUrl("https://hub.example/a@b"), "https://hub.example/a@b");
  EXPECT_EQ(ShownUrl("https://hub.example/\x1b[2J\n"), "https://hub.example/\\x1b[2J\\n");
  EXPECT_EQ(ShownUrl("not a url"), "not a url");
}

TEST(HubListing, NextPageFromTheLinkHeader) {
  const std::string page = "https://hub.example/api/models/o/r/tree/main?recursive=true";
  EXPECT_EQ(NextPageUrl("", page), "");
  EXPECT_EQ(NextPageUrl("<https://hub.example/api/x?cursor=abc>; rel=\"next\"", page),
            "https://hub.example/api/x?cursor=abc");
  EXPECT_EQ(NextPageUrl("<https://a/1>; rel=\"prev\", <https://a/2>; rel=\"next\"", page), "https://a/2");
  EXPECT_EQ(NextPageUrl("</api/x?cursor=2>; rel=\"next\"", page), "https://hub.example/api/x?cursor=2");
  EXPECT_EQ(NextPageUrl("<//evil.example/x>; rel=\"next\"", page), "//evil.example/x") << "never made absolute";
  EXPECT_EQ(NextPageUrl("rel=\"next\"", page), "");
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
  int64_t entries = 0;
  const std::string page = R"([{"type":"directory","path":"d"},{"type":"file","path":"a","size":1}])";
  ASSERT_TRUE(ParseTreeListing(page, "listing", 4, &entries).ok());
  ASSERT_TRUE(ParseTreeListing(page, "listing", 4, &entries).ok());
  EXPECT_EQ(entries, 4) << "folders count too";
  StatusOr<std::vector<HubFile>> over = ParseTreeListing(page, "listing", 4, &entries);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message().rfind("listing: the Hub's file listing has more than 4 entries", 0), 0u)
      << over.status().message();
  StatusOr<std::vector<HubFile>> deep = ParseTreeListing("[" + std::string(40, '[') + std::string(41, ']'), "listing");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nests JSON deeper than 32 levels"), std::string::npos);
  EXPECT_TRUE(
      ParseTreeListing(R"([{"type":"file","path":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x","size":1}])", "l").ok())
      << "brackets in strings are not nesting";
  EXPECT_FALSE(ParseTreeListing(R"([{"type":"file","path":"a"}])", "listing").ok());
  EXPECT_FALSE(ParseTreeListing(R"([{"type":"file","path":"a","size":-1}])", "listing").ok());
  StatusOr<std::vector<HubFile>> negative =  // found by fuzzing
      ParseTreeListing(R"([{"type":"file","path":"a","size":1,"lfs":{"oid":"x","size":-5}}])", "listing");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("a file of the Hub's file listing has a negative LFS size: {"),
            std::string::npos)
      << negative.status().message();
}

}  // namespace
}  // namespace tmx
