// Token ids must equal the sentencepiece Python package's (recipes/data/testdata/tokenizer_ids.json
// ["sentencepiece"], made by scripts/make_tokenizer_fixtures.py with sentencepiece 0.1.97 through torchtune's
// llama2_tokenizer on the shipped m.model, torchtune's test asset).
#include "recipes/data/tokenizers/sentencepiece.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "recipes/data/testdata/fixtures.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

std::unique_ptr<SentencePieceTokenizer> LoadM(SentencePieceOptions options = {}) {
  options.path = test::SampleTokenizerPath("m.model");
  auto tok = SentencePieceTokenizer::Load(options);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(SentencePieceTest, IdsEqualSentencepiece) {
  auto tok = LoadM();
  ASSERT_NE(tok, nullptr);
  nlohmann::json fixture = test::LoadFixture("tokenizer_ids.json")["sentencepiece"];
  EXPECT_EQ(tok->vocab_size(), fixture["vocab_size"].get<int64_t>());
  EXPECT_EQ(tok->bos_id(), fixture["bos_id"].get<int64_t>());
  EXPECT_EQ(tok->eos_id(), fixture["eos_id"].get<int64_t>());
  struct Mode {
    const char* key;
    EncodeOptions options;
  };
  EncodeOptions plain, both, trim;
  both.add_bos = both.add_eos = true;
  trim.trim_leading_whitespace = true;
  for (const Mode& mode : {Mode{"cases", plain}, Mode{"with_bos_eos", both}, Mode{"trim_leading_whitespace", trim}}) {
    ASSERT_GT(fixture[mode.key].size(), 10u);
    for (const auto& c : fixture[mode.key]) {
      std::string text = c["text"];
      SCOPED_TRACE(std::string(mode.key) + ": " + text);
      EXPECT_EQ(tok->Encode(text, mode.options), c["ids"].get<std::vector<int64_t>>());
    }
  }
  for (const auto& c : fixture["decode"]) {
    std::string text = c["text"];
    EXPECT_EQ(tok->Decode(c["ids"].get<std::vector<int64_t>>(), true), text);
  }
}

TEST(SentencePieceTest, ExtraSpecialTokensAboveTheModel) {
  SentencePieceOptions options;
  options.extra_special_tokens = {{"<|endoftext|>", 32000}, {"<|user|>", 32010}};
  options.eos_id = 32000;
  auto tok = LoadM(options);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->eos_id(), 32000);
  EXPECT_EQ(tok->SpecialId("<|user|>"), 32010);
  EXPECT_EQ(tok->Piece(32010), "<|user|>");
  std::vector<int64_t> ids = tok->Encode("hello", false, false);
  ids.insert(ids.begin(), 32010);
  EXPECT_EQ(tok->Decode(ids, false), "<|user|>hello");
  EXPECT_EQ(tok->Decode(ids, true), "hello");
  EXPECT_EQ(tok->vocab_size(), 2000);
}

TEST(SentencePieceTest, NotAModel) {
  test::ScratchDir dir;
  std::string path = dir.path() + "/tokenizer.model";
  test::WriteTextFile(path, "{\"not\": \"a model\"}");
  SentencePieceOptions options;
  options.path = path;
  auto tok = SentencePieceTokenizer::Load(options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(tok.status().message().rfind(path + ": not a SentencePiece model (", 0), 0u) << tok.status().message();
  options.path = dir.path() + "/missing.model";
  tok = SentencePieceTokenizer::Load(options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(),
            options.path + ": no such file; fix: set path to the model's SentencePiece tokenizer.model");
}

// SentencePiece used to open the path itself; the model is now read through the one guarded open, so a FIFO
// in its place is named as one (it was "no such file") and never waited on.
TEST(SentencePieceTest, AFifoInTheModelsPlaceIsNamed) {
  test::ScratchDir dir;
  SentencePieceOptions options;
  options.path = dir.path() + "/tokenizer.model";
  ASSERT_EQ(::mkfifo(options.path.c_str(), 0644), 0);
  auto tok = SentencePieceTokenizer::Load(options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(tok.status().message(), options.path + ": is a FIFO, not a regular file; fix: pass a regular file");
}

}  // namespace
}  // namespace tmx::data
