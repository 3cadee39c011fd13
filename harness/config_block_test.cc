// The support block's place in a config file, and the hash of the config outside it.
#include "harness/config_block.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

const std::string kBlock = std::string(kSupportBlockBegin) + "\nmetadata:\n  supported_devices: [cpu]\n" +
                           kSupportBlockEnd + "\n";

TEST(ConfigBlockTest, FindsTheBlockWithItsLinesAndStripsIt) {
  const std::string text = "# mine\na: 1\n" + kBlock;
  SupportBlockLocation loc = LocateSupportBlock(text, "my.yaml");
  ASSERT_TRUE(loc.damage.ok()) << loc.damage.ToString();
  ASSERT_TRUE(loc.found);
  EXPECT_EQ(loc.begin_line, 3);
  EXPECT_EQ(loc.end_line, 6);
  EXPECT_EQ(loc.end, text.size());
  EXPECT_EQ(StripGeneratedBlock(text), "# mine\na: 1\n");
  EXPECT_EQ(StripGeneratedBlock("a: 1\n"), "a: 1\n");
  // A block that added the final line break the config lacked takes it away again.
  const std::string added = "a: 1\n" + std::string(kSupportBlockBegin) + "\n" + kSupportBlockEndAddedBreak + "\n";
  EXPECT_EQ(StripGeneratedBlock(added), "a: 1");
  // Lines the user wrote after the block stay, in order.
  EXPECT_EQ(StripGeneratedBlock("a: 1\n" + kBlock + "b: 2\n"), "a: 1\nb: 2\n");
}

TEST(ConfigBlockTest, DamagedMarkersAreNamedAndNothingIsStripped) {
  const std::string end_only = std::string("a: 1\n") + kSupportBlockEnd + "\n";
  SupportBlockLocation loc = LocateSupportBlock(end_only, "my.yaml");
  EXPECT_EQ(loc.damage.message(),
            "my.yaml:2: END line of a generated support block without a BEGIN line before it; fix: delete the "
            "damaged block and rerun `tune-matrix run`, which writes it again");
  EXPECT_EQ(StripGeneratedBlock(end_only), end_only);
  loc = LocateSupportBlock("a: 1\n" + kBlock + kBlock, "my.yaml");
  EXPECT_NE(loc.damage.message().find("my.yaml:6: a second generated support block begins here (the first begins "
                                      "at line 2)"),
            std::string::npos)
      << loc.damage.message();
}

TEST(ConfigBlockTest, TheHashCoversTheUsersTextOnly) {
  EXPECT_EQ(ConfigHash(""), "cbf29ce484222325");  // the FNV-1a 64 offset basis
  EXPECT_EQ(ConfigHash("a: 1\n" + kBlock), ConfigHash("a: 1\n"));
  EXPECT_NE(ConfigHash("a: 2\n" + kBlock), ConfigHash("a: 1\n"));
  EXPECT_NE(ConfigHash("a: 1\r\n"), ConfigHash("a: 1\n"));
  // Prose in the first column is left out; a value, an indented line or a comment after a value is not.
  EXPECT_EQ(ConfigHash("# fetch with hf download\na: 1\n# more\n"), ConfigHash("# fetch with tune download\na: 1\n"));
  EXPECT_EQ(ConfigHash("# header\na: 1\n"), ConfigHash("a: 1\n"));
  EXPECT_NE(ConfigHash("a: 1  # one\n"), ConfigHash("a: 1  # two\n"));
  EXPECT_NE(ConfigHash("a: |\n  # text\n"), ConfigHash("a: |\n  # other text\n"));
  EXPECT_NE(ConfigHash("a: 1\n#b: 2\n"), ConfigHash("a: 1\nb: 2\n"));
}

}  // namespace
}  // namespace tmx
