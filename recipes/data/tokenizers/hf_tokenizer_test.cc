// Token ids must equal Hugging Face `tokenizers` 0.23.3 (recipes/data/testdata/tokenizer_ids.json["hf_*"], made
// by scripts/make_tokenizer_fixtures.py) and, through the wrapper, torchtune 0.6.1's HuggingFaceBaseTokenizer
// (torchtune_0_6_1.json["hf_base_tokenizer"], scripts/make_torchtune_0_6_1_fixtures.py).
#include "recipes/data/tokenizers/hf_tokenizer.h"

#include <gtest/gtest.h>

#include "recipes/data/testdata/fixtures.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

using test::SampleTokenizerPath;

std::unique_ptr<HfTokenizer> Load(const std::string& file,
                                  const std::string& generation_config = "generation_config.json") {
  HfTokenizerOptions options;
  options.path = SampleTokenizerPath(file);
  options.generation_config_path = SampleTokenizerPath(generation_config);
  auto tok = HfTokenizer::Load(options);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

void ExpectRawIds(const HfTokenizer& tok, const nlohmann::json& fixture) {
  ASSERT_GT(fixture["cases"].size(), 10u);
  for (const auto& c : fixture["cases"]) {
    std::string text = c["text"];
    SCOPED_TRACE(text);
    EXPECT_EQ(tok.EncodeRaw(text), c["ids"].get<std::vector<int64_t>>());
  }
}

TEST(HfTokenizerTest, TokenizerJsonIdsEqualTokenizers) {
  auto tok = Load("tokenizer.json");
  ASSERT_NE(tok, nullptr);
  ExpectRawIds(*tok, test::LoadFixture("tokenizer_ids.json")["hf_tokenizer_json"]);
}

TEST(HfTokenizerTest, NfcAndAddedTokensIdsEqualTokenizers) {
  auto tok = Load("tiny_bpe_tokenizer.json");
  ASSERT_NE(tok, nullptr);
  ExpectRawIds(*tok, test::LoadFixture("tokenizer_ids.json")["hf_tiny_bpe"]);
  EXPECT_EQ(tok->SpecialId("<|im_start|>"), 2001);
}

TEST(HfTokenizerTest, CharacterLevelByteFallbackIdsEqualTokenizers) {
  // Gemma's SentencePiece-converted tokenizer.json, cropped to 87 tokens: Replace normalizer, Split(" ",
  // MergedWithPrevious), byte fallback to <unk> (the crop has no <0xAB> tokens), fuse_unk, <bos> post-processor.
  auto tok = Load("tokenizer_gemma_cropped.json", "generation_config_gemma.json");
  ASSERT_NE(tok, nullptr);
  nlohmann::json fixture = test::LoadFixture("tokenizer_ids.json")["hf_gemma_cropped"];
  ExpectRawIds(*tok, fixture);
  for (const auto& c : fixture["decode"]) {
    std::string text = c["text"];
    EXPECT_EQ(tok->Decode(c["ids"].get<std::vector<int64_t>>(), false), text);
  }
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 1);                             // the first of generation_config's [1, 107]
  EXPECT_EQ(tok->Encode("hello", true, true).front(), 2);  // the post-processor's <bos>, not a second one
}

TEST(HfTokenizerTest, ByteFallbackIdsEqualTokenizers) {
  // The Gemma sample with the 256 <0xAB> tokens added (made by scripts/make_tokenizer_fixtures.py).
  HfTokenizerOptions options;
  options.path = test::TestDataPath("tokenizer_byte_fallback.json");
  options.generation_config_path = SampleTokenizerPath("generation_config_gemma.json");
  auto tok = HfTokenizer::Load(options);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  nlohmann::json fixture = test::LoadFixture("tokenizer_ids.json")["hf_byte_fallback"];
  ExpectRawIds(**tok, fixture);
  for (const auto& c : fixture["decode"]) {
    std::string text = c["text"];
    EXPECT_EQ((*tok)->Decode(c["ids"].get<std::vector<int64_t>>(), false), text);
  }
  EXPECT_EQ((*tok)->Piece((*tok)->EncodeRaw("\xC3\xA9")[1]), "<0xC3>");  // é has no token: its bytes
}

TEST(HfTokenizerTest, BosEosAsTorchtuneAddsThem) {
  // torchtune 0.6.1's HuggingFaceBaseTokenizer (torchtune_0_6_1.json, scripts/make_torchtune_0_6_1_fixtures.py),
  // plain and with BOS and EOS, on the varied corpus (special-token look-alikes included).
  auto tok = Load("tokenizer.json");
  ASSERT_NE(tok, nullptr);
  nlohmann::json fixture = test::LoadFixture("torchtune_0_6_1.json")["hf_base_tokenizer"];
  EXPECT_EQ(tok->bos_id(), fixture["bos_id"].get<int64_t>());
  EXPECT_EQ(tok->eos_id(), fixture["eos_id"].get<int64_t>());
  ASSERT_GT(fixture["encode"].size(), 20u);
  for (const auto& c : fixture["encode"]) {
    std::string text = c["text"];
    SCOPED_TRACE(text);
    EXPECT_EQ(tok->Encode(text, false, false), c["ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(tok->Encode(text, true, true), c["ids_with_bos_eos"].get<std::vector<int64_t>>());
  }
}

TEST(HfTokenizerTest, BosIsAddedEvenWhenTheTextHoldsItsText) {
  // torchtune 0.6.1's HuggingFaceBaseTokenizer.encode adds BOS whenever the post-processor does not; ids from it.
  auto tok = Load("tokenizer.json");  // BOS 0 from generation_config.json, whose token text is "<bos>"
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("<bos> hi", true, false), (std::vector<int64_t>{0, 60, 98, 813, 62, 297, 105}));
  EXPECT_EQ(tok->Encode("<bos> hi", false, false), (std::vector<int64_t>{60, 98, 813, 62, 297, 105}));
}

// A tokenizer.json of a byte-level BPE whose vocabulary is `vocab` (no merges) and whose pre-tokenizer is the
// Split `pattern`, written to `path`.
void WriteByteLevelTokenizerJson(const std::string& path, const nlohmann::json& vocab, const std::string& pattern) {
  nlohmann::json doc = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}}};
  test::WriteTextFile(path, doc.dump());
}

// Every printable ASCII byte's symbol in GPT-2's byte alphabet, numbered from 0.
nlohmann::json PrintableAsciiVocab() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = ' '; b <= '~'; ++b) vocab[ByteToUnicode()[static_cast<size_t>(b)]] = b - ' ';
  return vocab;
}

TEST(HfTokenizerTest, PatternAtPcre2MatchLimitIsAnErrorNamingFileAndPattern) {
  test::ScratchDir dir;
  std::string path = dir.path() + "/tokenizer.json";
  WriteByteLevelTokenizerJson(path, PrintableAsciiVocab(), "(a+)+b|\\S");
  HfTokenizerOptions options;
  options.path = path;
  options.generation_config_path = SampleTokenizerPath("generation_config.json");
  auto tok = HfTokenizer::Load(options);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->EncodeRaw("ab"), (std::vector<int64_t>{'a' - ' ', 'b' - ' '}));  // a match, no merges
  try {
    (*tok)->EncodeRaw("x" + std::string(40, 'a') + "c b");
    FAIL() << "expected a TokenizeError, not a text cut at the match limit";
  } catch (const TokenizeError& e) {
    EXPECT_EQ(e.status().message(), path +
                                        ": pre-tokenizer: regex pattern (a+)+b|\\S: matching stopped at byte 1 of a "
                                        "44-byte text (PCRE2: match limit exceeded); fix: use a pattern that does not "
                                        "backtrack catastrophically (the model's own), or split the text into shorter "
                                        "samples");
  }
}

TEST(HfTokenizerTest, ByteLevelVocabularyWithoutByteAlphabetIsRefused) {
  // A SentencePiece-style vocabulary under a ByteLevel pre-tokenizer: no "Ġ" (space) and no byte fallback, so every
  // text would encode to nothing. torchtune's own byte-level test files have 0x20-0x7E and load (tests above).
  test::ScratchDir dir;
  std::string path = dir.path() + "/tokenizer.json";
  WriteByteLevelTokenizerJson(path, {{"<unk>", 0}, {"\xE2\x96\x81the", 1}, {"a", 2}}, "\\S+");
  HfTokenizerOptions options;
  options.path = path;
  options.generation_config_path = SampleTokenizerPath("generation_config.json");
  auto tok = HfTokenizer::Load(options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(),
            path +
                ": the byte-level BPE vocabulary has no token for byte 0x20 (its symbol \"\xC4\xA0\"), so text would "
                "lose that byte and a sample made of such text would keep only its template tokens; fix: give the "
                "model's byte-level vocabulary (GPT-2's byte alphabet: a token for each byte's symbol), or for a "
                "SentencePiece-style vocabulary the model's tokenizer.json with its own pre-tokenizer, or the family's "
                "SentencePiece tokenizer");
  // The first missing symbol is named: with the space present, '!' (0x21) is next.
  nlohmann::json vocab = PrintableAsciiVocab();
  vocab.erase("!");
  WriteByteLevelTokenizerJson(path, vocab, "\\S+");
  tok = HfTokenizer::Load(options);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("no token for byte 0x21 (its symbol \"!\")"), std::string::npos)
      << tok.status().message();
}

TEST(HfTokenizerTest, NeedsAConfigForBosAndEos) {
  HfTokenizerOptions options;
  options.path = SampleTokenizerPath("tokenizer.json");
  auto tok = HfTokenizer::Load(options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(),
            options.path +
                ": neither tokenizer_config_json_path nor generation_config_path is set, so BOS and EOS "
                "are unknown; fix: set at least one of them");
}

TEST(HfTokenizerTest, UnsupportedModelIsNamed) {
  test::ScratchDir dir;
  std::string path = dir.path() + "/tokenizer.json";
  test::WriteTextFile(path, R"({"model": {"type": "Unigram", "vocab": []}})");
  HfTokenizerOptions options;
  options.path = path;
  options.generation_config_path = SampleTokenizerPath("generation_config.json");
  auto tok = HfTokenizer::Load(options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(),
            path +
                ": model.type \"Unigram\" is not supported (supported: BPE); fix: use torchtune's family "
                "tokenizer for this model, or a tokenizer.json with a byte-level BPE model");
}

TEST(HfTokenizerTest, AddedTokensForSpecialTokensPath) {
  auto tokens = ReadHfAddedTokens(SampleTokenizerPath("tiny_bpe_tokenizer.json"));
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(*tokens,
            (std::map<std::string, int64_t>{{"<|endoftext|>", 2000}, {"<|im_start|>", 2001}, {"<|im_end|>", 2002}}));
}

// A field of the wrong type made get<T>() throw type_error out of ReadHfAddedTokens (an abort in `tune tokenize`).
TEST(HfTokenizerTest, AddedTokensOfTheWrongTypeNameTheFileAndField) {
  test::ScratchDir dir;
  std::string path = dir.path() + "/tokenizer.json";
  const std::string fix = "; fix: set special_tokens_path to the model's own tokenizer.json";
  struct Case {
    std::string added_tokens, expected;
  };
  const Case cases[] = {
      {R"([{"content": "<s>", "id": 1}, {"content": 7, "id": 2}])",
       path + ": added_tokens[1].content is a number, expected a string" + fix},
      {R"([{"content": "<s>", "id": "1"}])", path + ": added_tokens[0].id is \"1\", expected a whole number >= 0" + fix},
      {R"([{"content": "<s>", "id": -3}])", path + ": added_tokens[0].id is -3, expected a whole number >= 0" + fix},
      {R"([{"content": "<s>", "id": 1e999}])",
       path + ":1:44: in added_tokens[0].id: number 1e999 is out of range (a double holds magnitudes up to about "
              "1.8e308); fix: write a number within that range, or regenerate the file"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.added_tokens);
    test::WriteTextFile(path, "{\"added_tokens\": " + c.added_tokens + "}");
    auto tokens = ReadHfAddedTokens(path);
    ASSERT_FALSE(tokens.ok());
    EXPECT_EQ(tokens.status().message(), c.expected);
  }
}

// Found by tm_fuzz's tokenizer_json target: the tokenizer.json reader took an added token's negative id (and a
// vocabulary id of 2^63 - 1) as is; Encode then gave the negative id for the token's text.
TEST(HfTokenizerTest, AnIdOutsideInt32IsRefused) {
  test::ScratchDir dir;
  std::string path = dir.path() + "/tokenizer.json";
  HfTokenizerOptions options;
  options.path = path;
  options.generation_config_path = SampleTokenizerPath("generation_config.json");
  test::WriteTextFile(path, R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},)"
                            R"( "added_tokens": [{"id": -3, "content": "Hello", "special": true}]})");
  auto tok = HfTokenizer::Load(options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(), path + ": added token \"Hello\" has id -3, expected a whole number from 0 to "
                                           "2147483647; fix: give the tokenizer's own files");
  test::WriteTextFile(path, R"({"model": {"type": "BPE", "vocab": {"a": 9223372036854775807}, "merges": []}})");
  tok = HfTokenizer::Load(options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(), path + ": token \"a\" has id 9223372036854775807, expected a whole number from "
                                           "0 to 2147483647; fix: give the tokenizer's own files");
}

}  // namespace
}  // namespace tmx::data
