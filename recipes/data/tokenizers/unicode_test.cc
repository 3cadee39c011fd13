#include "recipes/data/tokenizers/unicode.h"

#include <gtest/gtest.h>

namespace tmx::data {
namespace {

TEST(UnicodeTest, NfcComposesDecomposedLetters) {
  EXPECT_EQ(NormalizeNfc("cafe\xCC\x81"), "caf\xC3\xA9");  // e + COMBINING ACUTE -> é
  EXPECT_EQ(NormalizeNfc("A\xCC\x8A"), "\xC3\x85");        // A + COMBINING RING -> Å
  EXPECT_EQ(NormalizeNfc("plain"), "plain");
}

TEST(UnicodeTest, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(ToValidUtf8("ok"), "ok");
  EXPECT_EQ(ToValidUtf8("a\xFF"
                        "b"),
            "a\xEF\xBF\xBD"
            "b");
  // A truncated 3-byte sequence is one maximal invalid subpart: one U+FFFD, as Python's decode(errors="replace").
  EXPECT_EQ(ToValidUtf8("\xE2\x82"
                        "x"),
            "\xEF\xBF\xBD"
            "x");
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate: 3 subparts
}

TEST(UnicodeTest, PrintableBytesShowsControlAndBrokenBytes) {
  EXPECT_EQ(PrintableBytes(" world"), " world");
  EXPECT_EQ(PrintableBytes("\n"), "<0x0A>");
  EXPECT_EQ(PrintableBytes("\xE4\xBD"), "<0xE4><0xBD>");
  EXPECT_EQ(PrintableBytes("\xE4\xBD\xA0"), "\xE4\xBD\xA0");
}

TEST(UnicodeTest, PythonSpace) {
  for (char32_t c : {U' ', U'\t', U'\n', U'\x0b', U'\x0c', U'\r', U'\x1c', U'\x85', U'\xa0', U'\u2003', U'\u3000'}) {
    EXPECT_TRUE(IsPythonSpace(c)) << static_cast<uint32_t>(c);
  }
  for (char32_t c : {U'a', U'0', U'\u200b', U'_'}) EXPECT_FALSE(IsPythonSpace(c)) << static_cast<uint32_t>(c);
}

TEST(UnicodeTest, RegexFindsUnicodeClasses) {
  auto regex = UnicodeRegex::Compile(R"(\p{L}+|\p{N}{1,3}|\s+(?!\S)|\s+|[^\s\p{L}\p{N}]+)");
  ASSERT_TRUE(regex.ok()) << regex.status().ToString();
  auto pieces = (*regex)->FindAll("caf\xC3\xA9 12345  \xE4\xBD\xA0\xE5\xA5\xBD!");
  ASSERT_TRUE(pieces.ok()) << pieces.status().ToString();
  std::vector<std::string> got(pieces->begin(), pieces->end());
  EXPECT_EQ(got,
            (std::vector<std::string>{"caf\xC3\xA9", " ", "123", "45", " ", " ", "\xE4\xBD\xA0\xE5\xA5\xBD", "!"}));
}

TEST(UnicodeTest, CaseInsensitiveGroupMatchesContractions) {
  auto regex = UnicodeRegex::Compile(R"((?i:'s|'ll)|\p{L}+)");
  ASSERT_TRUE(regex.ok());
  auto pieces = (*regex)->FindAll("IT'S THEY'LL");
  ASSERT_TRUE(pieces.ok()) << pieces.status().ToString();
  std::vector<std::string> got(pieces->begin(), pieces->end());
  EXPECT_EQ(got, (std::vector<std::string>{"IT", "'S", "THEY", "'LL"}));
}

TEST(UnicodeTest, MatchLimitIsAnErrorNotTheEndOfTheText) {
  // (a+)+b backtracks exponentially on a run of a's not followed by b: PCRE2 gives up at its match limit. The
  // matches before that point must not be returned as if they were the whole text.
  auto regex = UnicodeRegex::Compile("(a+)+b|c");
  ASSERT_TRUE(regex.ok());
  auto pieces = (*regex)->FindAll("c" + std::string(40, 'a') + "c b");
  ASSERT_FALSE(pieces.ok());
  EXPECT_EQ(pieces.status().message(),
            "regex pattern (a+)+b|c: matching stopped at byte 1 of a 44-byte text (PCRE2: match limit exceeded); fix: "
            "use a pattern that does not backtrack catastrophically (the model's own), or split the text into shorter "
            "samples");
}

TEST(UnicodeTest, BadPatternNamesOffsetAndReason) {
  auto regex = UnicodeRegex::Compile("(abc");
  ASSERT_FALSE(regex.ok());
  EXPECT_EQ(regex.status().message(),
            "regex pattern (abc: does not compile at offset 4 (missing closing parenthesis); fix: use a pattern in "
            "PCRE2/Python regex syntax");
}

}  // namespace
}  // namespace tmx::data
