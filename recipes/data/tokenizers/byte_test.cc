#include "recipes/data/tokenizers/byte.h"

#include <gtest/gtest.h>

namespace tmx::data {
namespace {

TEST(ByteTokenizerTest, VocabularyAndSpecialIds) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 259);
  EXPECT_EQ(tok.bos_id(), 256);
  EXPECT_EQ(tok.eos_id(), 257);
  EXPECT_EQ(tok.pad_id(), 258);
}

TEST(ByteTokenizerTest, EncodesBytesWithOptionalBosAndEos) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.Encode("Hi!", false, false), (std::vector<int64_t>{72, 105, 33}));
  EXPECT_EQ(tok.Encode("Hi", true, false), (std::vector<int64_t>{256, 72, 105}));
  EXPECT_EQ(tok.Encode("Hi", false, true), (std::vector<int64_t>{72, 105, 257}));
  EXPECT_EQ(tok.Encode("", true, true), (std::vector<int64_t>{256, 257}));
}

TEST(ByteTokenizerTest, NonAsciiBytesAreUnsigned) {
  ByteTokenizer tok;
  // "é" is C3 A9 in UTF-8; "€" is E2 82 AC.
  EXPECT_EQ(tok.Encode("\xC3\xA9\xE2\x82\xAC", false, false), (std::vector<int64_t>{0xC3, 0xA9, 0xE2, 0x82, 0xAC}));
}

TEST(ByteTokenizerTest, RoundTripIsLosslessForAnyBytes) {
  ByteTokenizer tok;
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  const std::vector<std::string> cases = {
      "", "plain ascii", "Grüße, 世界! 🙂", std::string("nul\0inside", 10), all_bytes,
      "\xFF\xFE invalid UTF-8 \x80"};
  for (const std::string& text : cases) {
    SCOPED_TRACE(::testing::PrintToString(text));
    std::vector<int64_t> ids = tok.Encode(text, true, true);
    EXPECT_EQ(ids.size(), text.size() + 2);
    EXPECT_EQ(tok.Decode(ids, /*skip_special=*/true), text);
    EXPECT_EQ(tok.Decode(tok.Encode(text, false, false), false), text);
  }
}

TEST(ByteTokenizerTest, DecodeSkipsOrShowsSpecialTokens) {
  ByteTokenizer tok;
  std::vector<int64_t> ids = {256, 'o', 'k', 257, 258, 258};
  EXPECT_EQ(tok.Decode(ids, /*skip_special=*/true), "ok");
  EXPECT_EQ(tok.Decode(ids, /*skip_special=*/false), "<|bos|>ok<|eos|><|pad|><|pad|>");
}

TEST(ByteTokenizerTest, DecodeShowsIdsOutsideTheVocabulary) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.Decode({'a', 259, -1, 'b'}, /*skip_special=*/true), "a<|unk:259|><|unk:-1|>b");
}

}  // namespace
}  // namespace tmx::data

namespace tmx::data {
namespace {

TEST(ByteTokenizerTest, PiecesShowPrintableBytesAndNameTheRest) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.Piece('a'), "a");
  EXPECT_EQ(tok.Piece(0x0A), "<0x0A>");
  EXPECT_EQ(tok.Piece(ByteTokenizer::kEos), "<|eos|>");
  EXPECT_EQ(tok.SpecialId("<|pad|>"), ByteTokenizer::kPad);
}

}  // namespace
}  // namespace tmx::data
