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
