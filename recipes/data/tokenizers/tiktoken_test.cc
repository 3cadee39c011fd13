// Token ids must equal tiktoken's: recipes/data/testdata/tokenizer_ids.json["tiktoken"] was made by
// scripts/make_tokenizer_fixtures.py with tiktoken 0.14.0 through torchtune's llama3_tokenizer on the shipped
// tiktoken_small.model (torchtune's test asset).
#include "recipes/data/tokenizers/tiktoken.h"

#include <gtest/gtest.h>

#include "recipes/data/testdata/fixtures.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

using test::LoadFixture;
using test::SampleTokenizerPath;

std::map<std::string, int64_t> TestSpecials() {
  return {{"<|begin_of_text|>", 128000},
          {"<|end_of_text|>", 128001},
          {"<|finetune_right_pad_id|>", 128004},
          {"<|eot_id|>", 128009},
          {"<|reserved_special_token_250|>", 128256}};
}

std::unique_ptr<TiktokenTokenizer> LoadSmall() {
  TiktokenOptions options;
  options.path = SampleTokenizerPath("tiktoken_small.model");
  options.pattern = kCl100kPattern;
  options.special_tokens = TestSpecials();
  options.bos_id = 128000;
  options.eos_id = 128001;
  options.pad_id = 128004;
  auto tok = TiktokenTokenizer::Load(options);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

std::vector<int64_t> Ids(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

TEST(TiktokenTest, IdsEqualTiktoken) {
  auto tok = LoadSmall();
  ASSERT_NE(tok, nullptr);
  nlohmann::json fixture = LoadFixture("tokenizer_ids.json")["tiktoken"];
  ASSERT_GT(fixture["cases"].size(), 10u);
  for (const auto& c : fixture["cases"]) {
    std::string text = c["text"];
    SCOPED_TRACE(text);
    EXPECT_EQ(tok->Encode(text, false, false), Ids(c["ids"]));
  }
  for (const auto& c : fixture["with_bos_eos"]) {
    std::string text = c["text"];
    SCOPED_TRACE(text);
    EXPECT_EQ(tok->Encode(text, true, true), Ids(c["ids"]));
  }
  EXPECT_EQ(tok->base_vocab_size(), 2000);
}

TEST(TiktokenTest, DecodeRoundTripsValidText) {
  auto tok = LoadSmall();
  ASSERT_NE(tok, nullptr);
  // Held by name: a range-for over a member of a temporary would read it after it is destroyed.
  const auto fixture = LoadFixture("tokenizer_ids.json");
  for (const auto& c : fixture["tiktoken"]["cases"]) {
    std::string text = c["text"];
    EXPECT_EQ(tok->Decode(Ids(c["ids"]), true), text);
  }
  EXPECT_EQ(tok->Decode({128000, 73, 128009}, false), "<|begin_of_text|>I<|eot_id|>");
  EXPECT_EQ(tok->Decode({128000, 73, 128009}, true), "I");
  EXPECT_EQ(tok->Decode({999999}, true), "<|unk:999999|>");
}

TEST(TiktokenTest, SpecialTokenTextIsOrdinaryText) {
  auto tok = LoadSmall();
  ASSERT_NE(tok, nullptr);
  std::vector<int64_t> ids = tok->Encode("<|eot_id|>", false, false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 128009), 0);
  EXPECT_EQ(tok->Decode(ids, true), "<|eot_id|>");
  EXPECT_EQ(tok->Piece(128009), "<|eot_id|>");
  EXPECT_EQ(tok->Piece(10), "<0x0A>");  // "\n"
  EXPECT_EQ(tok->vocab_size(), 128257);
}

// The error of loading a ranks file with `content`, with the file's path replaced by "<path>".
std::string LoadError(const std::string& content) {
  test::ScratchDir dir;
  std::string path = dir.path() + "/tokenizer.model";
  test::WriteTextFile(path, content);
  TiktokenOptions options;
  options.path = path;
  options.pattern = kCl100kPattern;
  auto tok = TiktokenTokenizer::Load(options);
  if (tok.ok()) return "loaded";
  std::string message = tok.status().message();
  return message.replace(0, path.size(), "<path>");
}

TEST(TiktokenTest, BadFilesNameFileLineAndFix) {
  const std::string fix =
      "; fix: give the tiktoken ranks file (one \"<base64 token> <rank>\" per line, e.g. Llama "
      "3's original/tokenizer.model)";
  EXPECT_EQ(LoadError("IQ== 0\nnot-base64! 1\n"),
            "<path>:2: expected \"<base64 token> <rank>\", got \"not-base64! 1\"" + fix);
  EXPECT_EQ(LoadError("IQ== zero\n"), "<path>:1: rank \"zero\" is not a whole number >= 0" + fix);
  EXPECT_EQ(LoadError("IQ== 0\n"), "<path>: byte 0 has no rank, so some text could not be encoded" + fix);
  EXPECT_EQ(LoadError("\n"), "<path>: holds no tokens" + fix);
  // Ranks beyond int64 saturated to its largest (the merge loop's "no rank"), and rank + 1 overflowed.
  const std::string above = "\" is above 2147483647, the largest a ranks file may hold (the model's vocabulary "
                            "would be the largest rank + 1 ids)" + fix;
  EXPECT_EQ(LoadError("IQ== 99999999999999999999\n"), "<path>:1: rank \"99999999999999999999" + above);
  EXPECT_EQ(LoadError("IQ== 9223372036854775807\n"), "<path>:1: rank \"9223372036854775807" + above);
  EXPECT_EQ(LoadError("IQ== 2147483648\n"), "<path>:1: rank \"2147483648" + above);
}

TEST(TiktokenTest, Base64) {
  std::string out;
  EXPECT_TRUE(DecodeBase64("aGVsbG8=", &out));
  EXPECT_EQ(out, "hello");
  EXPECT_TRUE(DecodeBase64("IQ==", &out));
  EXPECT_EQ(out, "!");
  EXPECT_FALSE(DecodeBase64("a=bc", &out));
  EXPECT_FALSE(DecodeBase64("abc", &out));
}

}  // namespace
}  // namespace tmx::data
