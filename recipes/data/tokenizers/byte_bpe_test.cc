// Token ids must equal torchtune's Qwen2Tokenizer (recipes/data/testdata/tokenizer_ids.json["byte_bpe"] and
// ["byte_bpe_full"], made by scripts/make_tokenizer_fixtures.py with torchtune bd2a0fc7c314 and regex 2026.11.15):
// on the shipped tiny_bpe vocabulary and on torchtune's full-size vocab.json/merges.txt test asset.
#include "recipes/data/tokenizers/byte_bpe.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "recipes/data/testdata/fixtures.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

std::unique_ptr<ByteBpeTokenizer> LoadQwen(const std::string& vocab, const std::string& merges) {
  auto model = LoadByteBpeFiles(vocab, merges);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return nullptr;
  ByteBpeOptions options;
  options.model = std::move(model).value();
  options.special_tokens = {{"<|endoftext|>", 151643}, {"<|im_start|>", 151644}, {"<|im_end|>", 151645}};
  options.eos_id = 151645;
  options.pad_id = 151643;
  auto tok = ByteBpeTokenizer::Create(std::move(options));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

void ExpectFixture(const ByteBpeTokenizer& tok, const nlohmann::json& fixture) {
  ASSERT_GT(fixture["cases"].size(), 10u);
  for (const auto& c : fixture["cases"]) {
    std::string text = c["text"];
    SCOPED_TRACE(text);
    EXPECT_EQ(tok.Encode(text, false, false), c["ids"].get<std::vector<int64_t>>());
  }
  for (const auto& c : fixture["decode"]) {
    std::string text = c["text"];
    EXPECT_EQ(tok.Decode(c["ids"].get<std::vector<int64_t>>(), false), text);
  }
}

TEST(ByteBpeTest, IdsEqualTorchtuneOnTinyVocab) {
  auto tok =
      LoadQwen(test::SampleTokenizerPath("tiny_bpe_vocab.json"), test::SampleTokenizerPath("tiny_bpe_merges.txt"));
  ASSERT_NE(tok, nullptr);
  ExpectFixture(*tok, test::LoadFixture("tokenizer_ids.json")["byte_bpe"]);
}

TEST(ByteBpeTest, IdsEqualTorchtuneOnFullVocab) {
  auto tok = LoadQwen(test::TestDataPath("qwen2_vocab.json"), test::TestDataPath("qwen2_merges.txt"));
  ASSERT_NE(tok, nullptr);
  ExpectFixture(*tok, test::LoadFixture("tokenizer_ids.json")["byte_bpe_full"]);
}

TEST(ByteBpeTest, SpecialTokenTextBecomesItsId) {
  auto tok =
      LoadQwen(test::SampleTokenizerPath("tiny_bpe_vocab.json"), test::SampleTokenizerPath("tiny_bpe_merges.txt"));
  ASSERT_NE(tok, nullptr);
  std::vector<int64_t> ids = tok->Encode("<|im_start|>user<|im_end|>", false, true);
  std::vector<int64_t> user = tok->Encode("user", false, false);
  std::vector<int64_t> expected = {151644};
  expected.insert(expected.end(), user.begin(), user.end());
  expected.insert(expected.end(), {151645, 151645});  // <|im_end|>, then EOS, which is <|im_end|>
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(tok->Decode(ids, true), "user");
  EXPECT_EQ(tok->Piece(151644), "<|im_start|>");
  EXPECT_EQ(tok->vocab_size(), 151646);
}

TEST(ByteBpeTest, AddedTokensAreTextWithoutSplitOnAddedTokens) {
  // torchtune's GPT2BaseTokenizer (Phi-4) finds no added tokens in text; their ids still decode to their text.
  auto model = LoadByteBpeFiles(test::SampleTokenizerPath("tiny_bpe_vocab.json"),
                                test::SampleTokenizerPath("tiny_bpe_merges.txt"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ByteBpeOptions options;
  options.model = std::move(model).value();
  options.special_tokens = {{"<|im_start|>", 100264}};
  options.split_on_added_tokens = false;
  auto tok = ByteBpeTokenizer::Create(std::move(options));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::vector<int64_t> ids = (*tok)->Encode("<|im_start|>", false, false);
  // As torchtune's GPT2BaseTokenizer: "<", "|", "im", "_", "st", "art", "|", ">".
  EXPECT_EQ(ids, (std::vector<int64_t>{27, 91, 161, 62, 137, 320, 91, 29}));
  EXPECT_EQ((*tok)->Decode(ids, false), "<|im_start|>");
  EXPECT_EQ((*tok)->Decode({100264}, false), "<|im_start|>");
  EXPECT_EQ((*tok)->Decode({100264}, true), "");
  EXPECT_EQ((*tok)->vocab_size(), 100265);
}

TEST(ByteBpeTest, TorchtuneGpt2PatternSplitsAsPythonRe) {
  // kTorchtuneGpt2Pattern is torchtune's GPT2BaseTokenizer pattern rewritten for PCRE2; the pieces Python's re made
  // of the corpus and of texts where the two engines' \w and \s differ must come out the same.
  const nlohmann::json fixture =
      test::LoadFixture("torchtune_0_6_1.json")["families"]["phi4_tokenizer"]["pre_tokenizer"];
  EXPECT_EQ(fixture["pattern"], R"('s|'t|'re|'ve|'m|'ll|'d| ?[\w]+| ?\d+| ?[^\s\w\d]+|\s+(?!\S)|\s+)");
  auto regex = UnicodeRegex::Compile(kTorchtuneGpt2Pattern);
  ASSERT_TRUE(regex.ok()) << regex.status().ToString();
  ASSERT_GT(fixture["cases"].size(), 20u);
  for (const auto& c : fixture["cases"]) {
    std::string text = c["text"];
    SCOPED_TRACE(text);
    StatusOr<std::vector<std::string_view>> pieces = (*regex)->FindAll(text);
    ASSERT_TRUE(pieces.ok()) << pieces.status().ToString();
    EXPECT_EQ(std::vector<std::string>(pieces->begin(), pieces->end()), c["pieces"].get<std::vector<std::string>>());
  }
}

TEST(ByteBpeTest, Gpt2BaseTokenizerSkipsTheFirstMergesLine) {
  // torchtune's GPT2BaseTokenizer reads merges.txt's text.split("\n")[1:-1].
  test::ScratchDir dir;
  std::string vocab = dir.path() + "/vocab.json", merges = dir.path() + "/merges.txt";
  test::WriteTextFile(vocab, "{\"a\": 0, \"b\": 1}");
  test::WriteTextFile(merges, "x y\na b\nc d");
  ByteBpeFileOptions gpt2;
  gpt2.layout = MergesLayout::kFirstAndUnterminatedLastSkipped;
  using Merges = std::vector<std::pair<std::string, std::string>>;
  auto model = LoadByteBpeFiles(vocab, merges, gpt2);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->merges, (Merges{{"a", "b"}}));  // the first line, and the last without its '\n'
  model = LoadByteBpeFiles(vocab, merges);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->merges, (Merges{{"x", "y"}, {"a", "b"}, {"c", "d"}}));
  test::WriteTextFile(merges, "#version: 0.2\na b\nc d\n");
  model = LoadByteBpeFiles(vocab, merges, gpt2);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->merges, (Merges{{"a", "b"}, {"c", "d"}}));
  // A bad line is an error, naming the keys of the files' builder.
  test::WriteTextFile(merges, "#version: 0.2\na b c\n");
  gpt2.vocab_key = "vocab_path";
  model = LoadByteBpeFiles(vocab, merges, gpt2);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), merges +
                                          ":2: expected two symbols \"left right\", got \"a b c\"; fix: give the "
                                          "tokenizer's merges.txt (vocab goes in vocab_path)");
}

TEST(ByteBpeTest, ByteAlphabetIsGpt2s) {
  const std::vector<std::string>& table = ByteToUnicode();
  EXPECT_EQ(table[' '], "\xC4\xA0");   // Ġ
  EXPECT_EQ(table['\n'], "\xC4\x8A");  // Ċ
  EXPECT_EQ(table['a'], "a");
}

TEST(ByteBpeTest, ReplaceAllMatchesTokenizersReplace) {
  // Hugging Face's Replace: occurrences left to right, never overlapping, never found in replaced text.
  EXPECT_EQ(ReplaceAll("aaaa", "aa", "a"), "aa");
  EXPECT_EQ(ReplaceAll("aaa", "aa", "b"), "ba");
  EXPECT_EQ(ReplaceAll("a a", "a", "aa"), "aa aa");
  EXPECT_EQ(ReplaceAll(" x ", " ", ""), "x");
  EXPECT_EQ(ReplaceAll("abc", "", "-"), "abc");
  EXPECT_EQ(ReplaceAll("", " ", "\xE2\x96\x81"), "");
}

TEST(ByteBpeTest, NormalizingATextWithManyReplacements) {
  // Gemma's normalizer (Prepend "▁", then Replace ' ' -> '▁') on 1.1 MB with 500k spaces: the result is checked; the
  // time is benchmarks/tokenizer_benchmark's BM_Normalize (replacing in place was quadratic).
  const std::string kMark = "\xE2\x96\x81";  // ▁
  std::string text, expected = kMark;
  for (int i = 0; i < 100000; ++i) {
    text += "ab c de  f ";
    expected += "ab" + kMark + "c" + kMark + "de" + kMark + kMark + "f" + kMark;
  }
  std::vector<ByteBpeOptions::NormalizeStep> steps = {{true, "", kMark}, {false, " ", kMark}};
  std::string got = ApplyNormalizeSteps(text, steps);
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "first difference at byte "
                               << (std::mismatch(got.begin(), got.end(), expected.begin(), expected.end()).first -
                                   got.begin());
  EXPECT_EQ(ApplyNormalizeSteps("", steps), "");  // Prepend leaves an empty span empty
}

TEST(ByteBpeTest, BadMergeLineNamesFileAndLine) {
  test::ScratchDir dir;
  std::string vocab = dir.path() + "/vocab.json", merges = dir.path() + "/merges.txt";
  test::WriteTextFile(vocab, "{\"a\": 0, \"b\": 1}");
  test::WriteTextFile(merges, "#version: 0.2\na b\na b c\n");
  auto model = LoadByteBpeFiles(vocab, merges);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), merges +
                                          ":3: expected two symbols \"left right\", got \"a b c\"; fix: give the "
                                          "tokenizer's merges.txt (vocab goes in path)");
  test::WriteTextFile(vocab, "[1, 2]");
  model = LoadByteBpeFiles(vocab, merges);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), vocab +
                                          ": expected a JSON object {\"token\": id, ...}; fix: give the "
                                          "tokenizer's vocab.json (merges go in merges_file)");
}

// 1e999 made the JSON library throw out_of_range, which only parse errors were caught for: `tune tokenize` aborted.
TEST(ByteBpeTest, AnIdOutOfRangeInVocabIsAnErrorNamingTheFileAndToken) {
  test::ScratchDir dir;
  std::string vocab = dir.path() + "/vocab.json", merges = dir.path() + "/merges.txt";
  test::WriteTextFile(vocab, "{\"a\": 0,\n \"b\": 1e999}");
  test::WriteTextFile(merges, "a b\n");
  auto model = LoadByteBpeFiles(vocab, merges);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), vocab + ":2:7: in b: number 1e999 is out of range (a double holds magnitudes "
                                              "up to about 1.8e308); fix: write a number within that range, or "
                                              "regenerate the file");
  test::WriteTextFile(vocab, "{\"a\": 0, \"b\": \"1\"}");
  model = LoadByteBpeFiles(vocab, merges);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), vocab + ": token \"b\" has id \"1\", expected a whole number >= 0; fix: give "
                                              "the tokenizer's vocab.json");
}

// Found by tm_fuzz's tokenizer_json target: an id of 2^63 - 1 overflowed the vocabulary's size (undefined
// behaviour; the size wrapped and Encode gave ids past it), and a negative added-token id came out of Encode.
TEST(ByteBpeTest, IdsOutsideInt32AreRefusedNamingTheToken) {
  auto with_ids = [](int64_t token_id, int64_t added_id) {
    ByteBpeOptions options;
    options.byte_level = false;
    options.pre_tokenizer = ByteBpeOptions::PreTokenizer::kNone;
    options.source = "vocab.json";
    options.model.vocab = {{"a", 0}, {"b", token_id}};
    options.special_tokens = {{"<s>", added_id}};
    return ByteBpeTokenizer::Create(std::move(options));
  };
  auto huge = with_ids(9223372036854775807, 1);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(),
            "vocab.json: token \"b\" has id 9223372036854775807, expected a whole number from 0 to 2147483647; fix: "
            "give the tokenizer's own files");
  auto negative = with_ids(1, -3);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(),
            "vocab.json: added token \"<s>\" has id -3, expected a whole number from 0 to 2147483647; fix: give the "
            "tokenizer's own files");
  auto largest = with_ids(2147483647, 2);
  ASSERT_TRUE(largest.ok()) << largest.status().ToString();
  EXPECT_EQ((*largest)->vocab_size(), 2147483648);
}

}  // namespace
}  // namespace tmx::data
