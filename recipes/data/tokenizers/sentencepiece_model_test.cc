#include "recipes/data/tokenizers/sentencepiece_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/file_util.h"
#include "recipes/data/testdata/fixtures.h"

namespace tmx::data {
namespace {

using Info = SentencePieceModelInfo;

Info::Piece P(std::string text, float score, Info::PieceType type = Info::PieceType::kNormal) {
  return Info::Piece{std::move(text), score, type};
}

std::vector<std::pair<std::string, int>> Segment(const Info& model, std::string_view text) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& [piece, id] : UnigramSegmenter(model).Segment(text)) out.emplace_back(piece, id);
  return out;
}

std::string ReadModel(const std::string& path) {
  StatusOr<std::string> bytes = ReadFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

TEST(SentencePieceModelTest, ReadsTheFieldsOfTorchtunesTestModel) {
  StatusOr<Info> info = ParseSentencePieceModel(ReadModel(test::SampleTokenizerPath("m.model")), "m.model");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->model_type, Info::ModelType::kUnigram);
  EXPECT_FALSE(info->byte_fallback);
  ASSERT_EQ(info->pieces.size(), 2000u);
  EXPECT_EQ(info->pieces[0].text, "<unk>");
  EXPECT_EQ(info->pieces[0].type, Info::PieceType::kUnknown);
  EXPECT_EQ(info->pieces[1].type, Info::PieceType::kControl);
  EXPECT_EQ(info->pieces[143].text, "w");  // sentencepiece 0.2.3: id_to_piece(143), get_score(143)
  EXPECT_FLOAT_EQ(info->pieces[143].score, -6.82821083f);
  EXPECT_EQ(info->pieces[1053].text, "ww");
}

TEST(SentencePieceModelTest, ReadsModelTypeByteFallbackAndUserDefinedSymbols) {
  StatusOr<Info> bpe =
      ParseSentencePieceModel(ReadModel(test::TestDataPath("sp_bpe_byte_fallback.model")), "bpe.model");
  ASSERT_TRUE(bpe.ok()) << bpe.status().ToString();
  EXPECT_EQ(bpe->model_type, Info::ModelType::kBpe);
  EXPECT_TRUE(bpe->byte_fallback);
  int user_defined = 0, bytes = 0;
  for (const auto& piece : bpe->pieces) {
    user_defined += piece.type == Info::PieceType::kUserDefined;
    bytes += piece.type == Info::PieceType::kByte;
  }
  EXPECT_EQ(user_defined, 3);  // <|user|>, [INST], ab
  EXPECT_EQ(bytes, 256);
}

TEST(SentencePieceModelTest, MalformedBytesAreNamedWithTheirOffset) {
  std::string model = ReadModel(test::SampleTokenizerPath("m.model"));
  StatusOr<Info> cut = ParseSentencePieceModel(std::string_view(model).substr(0, 100), "cut.model");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().message().rfind("cut.model: not a SentencePiece model (", 0), 0u) << cut.status().message();
  EXPECT_NE(cut.status().message().find(" at byte "), std::string::npos);
  StatusOr<Info> empty = ParseSentencePieceModel("", "empty.model");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "empty.model: not a SentencePiece model (no pieces at byte 0)");
  // A piece type outside the enum (7) is refused, not cast.
  std::string bad_type = std::string("\x0a\x05\x0a\x01x\x18\x07", 7);
  StatusOr<Info> typed = ParseSentencePieceModel(bad_type, "typed.model");
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.status().message(), "typed.model: not a SentencePiece model (piece 0 is malformed at byte 0)");
}

// m.model with one unit of its normalizer's trie overwritten. The unit is found from the normalizer_spec's
// name "nmt_nfkc": the precompiled_charsmap field (tag 0x12, a length, the 4-byte trie size, the units) follows.
std::string WithTrieUnit(std::string model, size_t unit, uint32_t value) {
  size_t name = model.find("nmt_nfkc");
  EXPECT_NE(name, std::string::npos);
  size_t at = name + 8;
  EXPECT_EQ(model[at], '\x12');
  ++at;
  while (static_cast<uint8_t>(model[at]) & 0x80) ++at;  // the blob's length
  at += 1 + 4 + 4 * unit;                              // its last byte, the trie size, the units before
  std::memcpy(&model[at], &value, 4);
  return model;
}

TEST(SentencePieceModelTest, ADamagedCharacterMapIsRefusedBeforeTheLibraryReadsIt) {
  // Found by the sentencepiece_model fuzz target: Debian's libsentencepiece 0.1.97 loaded such a model and
  // crashed (SIGSEGV in Normalizer::NormalizePrefix) on its first text; sentencepiece 0.2.x refuses it.
  const std::string model = ReadModel(test::SampleTokenizerPath("m.model"));
  ASSERT_TRUE(ParseSentencePieceModel(model, "m.model").ok());
  StatusOr<Info> outside = ParseSentencePieceModel(WithTrieUnit(model, 1, 0x7FFFFC00u), "bad.model");
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().message(),
            "bad.model: normalizer_spec.precompiled_charsmap is damaged (trie unit 1 points outside the trie); fix: use "
            "the tokenizer.model the model was published with");
  StatusOr<Info> root = ParseSentencePieceModel(WithTrieUnit(model, 0, 0x100u), "bad.model");
  ASSERT_FALSE(root.ok());
  EXPECT_NE(root.status().message().find("(its trie's root is malformed)"), std::string::npos);
}

TEST(SentencePieceModelTest, PiecesTheLibraryWouldCrashOnAreRefused) {
  // Found by the fuzz target: an empty piece made Debian's 0.1.97 abort while building its trie.
  const std::string unk = std::string("\x0a\x09\x0a\x05<unk>\x18\x02", 11);
  StatusOr<Info> empty = ParseSentencePieceModel(unk + std::string("\x0a\x02\x0a\x00", 4), "empty.model");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "empty.model: not a usable SentencePiece model (piece 1 is empty); fix: use the "
                                      "tokenizer.model the model was published with");
  ASSERT_TRUE(ParseSentencePieceModel(unk + std::string("\x0a\x03\x0a\x01" "a", 5), "a.model").ok());

  Info model;
  model.pieces = {P("<unk>", 0, Info::PieceType::kUnknown), P("a", -1), P("b", -2)};
  EXPECT_TRUE(CheckPieces(model).ok());
  Info twice = model;
  twice.pieces.push_back(P("a", -3, Info::PieceType::kUserDefined));
  EXPECT_EQ(CheckPieces(twice).message(), "piece 3 (\"a\") is defined twice");
  Info control_too = model;
  control_too.pieces.push_back(P("a", 0, Info::PieceType::kControl));  // the library keeps these apart
  EXPECT_TRUE(CheckPieces(control_too).ok());
  Info nul = model;
  nul.pieces[1].text = std::string("a\0b", 3);
  EXPECT_EQ(CheckPieces(nul).message(), "piece 1 holds a NUL byte");
  Info inf = model;
  inf.pieces[2].score = INFINITY;
  EXPECT_EQ(CheckPieces(inf).message(), "piece 2 has a score that is not finite");
  Info two_unknowns = model;
  two_unknowns.pieces.push_back(P("<unk2>", 0, Info::PieceType::kUnknown));
  EXPECT_EQ(CheckPieces(two_unknowns).message(), "piece 3 is a second unknown piece");
  Info no_unknown = model;
  no_unknown.pieces[0].type = Info::PieceType::kControl;
  EXPECT_EQ(CheckPieces(no_unknown).message(), "it has no unknown piece");
  Info bytes = model;
  bytes.pieces.push_back(P("<0x41>", 0, Info::PieceType::kByte));
  EXPECT_EQ(CheckPieces(bytes).message(), "piece 3 is a byte piece but byte_fallback is off");
  bytes.byte_fallback = true;
  EXPECT_EQ(CheckPieces(bytes).message(), "byte_fallback is on but not all 256 byte pieces are there");
  bytes.pieces.back().text = "<0xZZ>";
  EXPECT_EQ(CheckPieces(bytes).message(), "piece 3 is a byte piece not of the form <0xNN>");
}

TEST(SentencePieceModelTest, CharacterMapChecks) {
  EXPECT_TRUE(CheckPrecompiledCharsMap("").ok());  // no normalization rules
  EXPECT_EQ(CheckPrecompiledCharsMap("abc").message(), "shorter than its 4-byte trie size");
  std::string blob(4 + 2048 + 2, '\0');
  uint32_t size = 4096;
  std::memcpy(&blob[0], &size, 4);
  EXPECT_EQ(CheckPrecompiledCharsMap(blob).message(), "its trie size runs past its end");
  size = 1000;
  std::memcpy(&blob[0], &size, 4);
  EXPECT_EQ(CheckPrecompiledCharsMap(blob).message(), "its trie size 1000 is not a multiple of 1024");
  size = 2048;
  std::memcpy(&blob[0], &size, 4);
  blob.back() = 'x';
  EXPECT_EQ(CheckPrecompiledCharsMap(blob).message(), "its replacement strings do not end with a NUL");
  blob.back() = '\0';
  EXPECT_EQ(CheckPrecompiledCharsMap(blob).message(), "its trie's root is malformed");  // offset 0
  // A root whose children (base 256) lie in the 512 units, one child 'a' (unit 256 ^ 'a') with a leaf at unit 128
  // whose value names a string past the map's two bytes.
  auto unit = [&](size_t i, uint32_t v) { std::memcpy(&blob[4 + 4 * i], &v, 4); };
  unit(0, 256u << 10);                                  // root: offset 256, label 0, no leaf
  const size_t a = 256 ^ 'a';
  unit(a, (static_cast<uint32_t>(a ^ 128) << 10) | (1u << 8) | 'a');  // child 'a', has a leaf at a ^ offset
  unit(128, (1u << 31) | 5u);                           // the leaf: value 5, past the 2 bytes of strings
  EXPECT_EQ(CheckPrecompiledCharsMap(blob).message(), "trie unit 128 names a string outside the map");
  unit(128, (1u << 31) | 0u);                           // value 0: the first string
  EXPECT_TRUE(CheckPrecompiledCharsMap(blob).ok()) << CheckPrecompiledCharsMap(blob).message();
}

TEST(SentencePieceModelTest, AnEqualScoreTieKeepsThePathFoundFirstInFloat) {
  // "www" = "w" + "ww" = "ww" + "w" with equal float sums: the path whose last piece starts first wins, so the
  // long piece comes last (sentencepiece 0.2.x; 0.1.97 summed in double and could pick the other).
  Info model;
  model.pieces = {P("<unk>", 0, Info::PieceType::kUnknown), P("w", -6.82821083f), P("ww", -8.99694157f)};
  EXPECT_EQ(Segment(model, "www"), (std::vector<std::pair<std::string, int>>{{"w", 1}, {"ww", 2}}));
  EXPECT_EQ(Segment(model, "wwww"), (std::vector<std::pair<std::string, int>>{{"ww", 2}, {"ww", 2}}));
}

TEST(SentencePieceModelTest, UnknownCharactersAndUserDefinedSymbols) {
  Info model;
  model.pieces = {P("<unk>", 0, Info::PieceType::kUnknown), P("a", -1), P("b", -1), P("ab", -5),
                  P("abab", -3, Info::PieceType::kUserDefined), P("c", -1, Info::PieceType::kUnused)};
  // The cheaper "a"+"b" beats "ab"; a user-defined symbol beats any split; an unused piece is never used, so
  // "c" is unknown (one piece per character, "é" is two bytes); the empty text has no pieces.
  EXPECT_EQ(Segment(model, "ab"), (std::vector<std::pair<std::string, int>>{{"a", 1}, {"b", 2}}));
  EXPECT_EQ(Segment(model, "abab"), (std::vector<std::pair<std::string, int>>{{"abab", 4}}));
  EXPECT_EQ(Segment(model, "c\xc3\xa9"
                           "a"),
            (std::vector<std::pair<std::string, int>>{{"c", 0}, {"\xc3\xa9", 0}, {"a", 1}}));
  EXPECT_TRUE(Segment(model, "").empty());
}

TEST(SentencePieceModelTest, LongTextsKeepTheirSegmentationPastTheScoreReset) {
  // Path scores are re-based past 1e5 in magnitude: 40,000 pieces of -3 cross it several times and the pieces
  // stay whole.
  Info model;
  model.pieces = {P("<unk>", 0, Info::PieceType::kUnknown), P("a", -3), P("aa", -5.5f)};
  std::string text(80000, 'a');
  auto pieces = UnigramSegmenter(model).Segment(text);
  ASSERT_EQ(pieces.size(), 40000u);
  for (const auto& [piece, id] : pieces) ASSERT_EQ(id, 2);
}

}  // namespace
}  // namespace tmx::data
