#include "base/text.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

// A count is said in words that agree with it: "1 cell", never "1 cells".
TEST(TextTest, CountedAgreesWithItsNumber) {
  EXPECT_EQ(Counted(0, "cell"), "0 cells");
  EXPECT_EQ(Counted(1, "cell"), "1 cell");
  EXPECT_EQ(Counted(2, "cell"), "2 cells");
  EXPECT_EQ(Counted(1, "entry", "entries"), "1 entry");
  EXPECT_EQ(Counted(3, "entry", "entries"), "3 entries");
}

TEST(TextTest, EditDistance) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("lora_rank", "lora_rnak"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(TextTest, ClosestMatchSuggestsOnlyPlausibleTypos) {
  std::vector<std::string> keys = {"lora_rank", "lora_alpha", "batch_size", "device"};
  EXPECT_EQ(ClosestMatch("lora_rnk", keys), "lora_rank");
  EXPECT_EQ(ClosestMatch("devcie", keys), "device");
  EXPECT_EQ(ClosestMatch("batch", keys), "batch_size");  // a prefix counts
  EXPECT_EQ(ClosestMatch("completely_different", keys), "");
}

TEST(TextTest, ClosestMatchesAreAFewNearOnesNearestFirst) {
  std::vector<std::string> names = {"torch.optim.SGD", "torch.optim.AdamW", "torch.optim.Adam", "torch.optim.Adamax"};
  // "Adam" and "AdamW" are one edit away, "Adamax" two: all near; "SGD" is five edits away, beside one-edit ones.
  EXPECT_EQ(ClosestMatches("torch.optim.Adamw", names, 5),
            (std::vector<std::string>{"torch.optim.AdamW", "torch.optim.Adam", "torch.optim.Adamax"}));
  EXPECT_EQ(ClosestMatches("torch.optim.Adamw", names, 1), (std::vector<std::string>{"torch.optim.AdamW"}));
  EXPECT_EQ(ClosestMatches("lr", {"lr_scheduler", "loss", "seed"}, 3), (std::vector<std::string>{"lr_scheduler"}));
  EXPECT_TRUE(ClosestMatches("completely_different", names, 3).empty());
}

TEST(TextTest, Formats) {
  EXPECT_EQ(FormatFlops(829.4e9), "829 GFLOP/s");
  EXPECT_EQ(FormatFlops(1.234e12), "1.23 TFLOP/s");
  EXPECT_EQ(FormatFlops(45.6e6), "45.6 MFLOP/s");
  EXPECT_EQ(FormatFlops(999.7e9), "1.00 TFLOP/s");  // rounds up into the next unit, not "1000 GFLOP/s"
  EXPECT_EQ(FormatFlops(12), "12.0 FLOP/s");
  EXPECT_EQ(FormatFlops(-1), "0 FLOP/s");
  EXPECT_EQ(FormatBandwidth(21.34e9), "21.3 GB/s");
  EXPECT_EQ(FormatBandwidth(3.351e12), "3.35 TB/s");
  EXPECT_EQ(FormatBytes(17), "17 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.00 GiB");
  EXPECT_EQ(FormatDuration(0.25), "0s");
  EXPECT_EQ(FormatDuration(12.6), "13s");
  EXPECT_EQ(FormatDuration(245), "4m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m00s");
  EXPECT_EQ(FormatDuration(-3), "0s");
  EXPECT_EQ(FormatNumber(47.66, 1), "47.7");
  EXPECT_EQ(FormatNumber(812.4, 0), "812");
  EXPECT_EQ(FormatNumber(-0.01, 0), "0");
  EXPECT_EQ(FormatNumber(1e308, 100), "1.000e+308");  // too long in fixed form
}

}  // namespace
TEST(TextTest, SplitList) {
  EXPECT_EQ(SplitList("cpu,cuda"), (std::vector<std::string>{"cpu", "cuda"}));
  EXPECT_EQ(SplitList(",cpu,,cuda,"), (std::vector<std::string>{"cpu", "cuda"}));
  EXPECT_TRUE(SplitList("").empty());
  EXPECT_EQ(SplitList("a/b", '/'), (std::vector<std::string>{"a", "b"}));
}

TEST(TextTest, JoinAlternatives) {
  EXPECT_EQ(JoinAlternatives({}), "");
  EXPECT_EQ(JoinAlternatives({"right"}), "right");
  EXPECT_EQ(JoinAlternatives({"right", "left"}), "right or left");
  EXPECT_EQ(JoinAlternatives({"a", "b", "c"}), "a, b or c");
  EXPECT_EQ(JoinAlternatives({"cuda", "xpu", "hpu"}, "and"), "cuda, xpu and hpu");
  EXPECT_EQ(JoinAlternatives({"a", "b", "c"}, ""), "a, b, c");
}

TEST(TextTest, EndsWith) {
  EXPECT_TRUE(EndsWith("config.yaml", ".yaml"));
  EXPECT_TRUE(EndsWith("x", ""));
  EXPECT_FALSE(EndsWith("yaml", ".yaml"));
  EXPECT_FALSE(EndsWith("config.yml", ".yaml"));
}

TEST(TextTest, TerminalTextLeavesNothingATerminalActsOn) {
  struct Case {
    std::string raw, shown;
  } cases[] = {
      {"config.json", "config.json"},
      {"caf\xc3\xa9/\xe6\xa8\xa1\xe5\x9e\x8b.bin", "caf\xc3\xa9/\xe6\xa8\xa1\xe5\x9e\x8b.bin"},  // printable UTF-8 kept
      {"a\x1b[31mred\x1b[0m", "a\\x1b[31mred\\x1b[0m"},                                          // colours
      {"t\x1b]0;owned\x07.txt", "t\\x1b]0;owned\\x07.txt"},  // the window title, a bell
      {"two\nlines\r\tx", "two\\nlines\\r\\tx"},
      {std::string("nul\0del\x7f", 8), "nul\\x00del\\x7f"},
      {std::string("c1\xc2\x9b") + "31m", "c1\\u009b31m"},  // CSI as a C1 control
      {"rtl\xe2\x80\xaetxt.exe", "rtl\\u202etxt.exe"},  // right-to-left override
      {"sep\xe2\x80\xa8x", "sep\\u2028x"},
      {"bad\xff\xc3", "bad\\xff\\xc3"},  // not UTF-8
      {"back\\slash", "back\\\\slash"},
  };
  for (const Case& c : cases) EXPECT_EQ(TerminalText(c.raw), c.shown) << c.shown;
}

TEST(TextTest, PercentEncodeKeepsOnlyUnreservedBytes) {
  EXPECT_EQ(PercentEncode("refs/pr/1"), "refs%2Fpr%2F1");
  EXPECT_EQ(PercentEncode("a b/c.safetensors", true), "a%20b/c.safetensors");
  EXPECT_EQ(PercentEncode("llama3_2/1B@cpu"), "llama3_2%2F1B%40cpu");
  EXPECT_EQ(PercentEncode("A-z_0.~"), "A-z_0.~");
  EXPECT_EQ(PercentEncode("\xc3\xa9#?&"), "%C3%A9%23%3F%26");
}

}  // namespace tmx
