// Token ids must equal the sentencepiece Python package 0.2.3's, the version torchtune 0.6.1 installs
// (recipes/data/testdata/tokenizer_ids.json["sentencepiece"], made by scripts/make_tokenizer_fixtures.py through
// torchtune's llama2_tokenizer on the shipped m.model, torchtune's test asset; and torchtune_0_6_1.json
// ["sentencepiece"], scripts/make_torchtune_0_6_1_fixtures.py, for m.model and two models with byte fallback).
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

TEST(SentencePieceTest, IdsEqualSentencepiece023WhereTiesAndBytesDecide) {
  // m.model is a unigram model; the two trained ones (unigram and BPE) fall back to bytes and have user-defined
  // symbols. The texts include ties ("V---", "www") that Debian's libsentencepiece 0.1.97 alone segments the
  // other way.
  nlohmann::json fixture = test::LoadFixture("torchtune_0_6_1.json")["sentencepiece"];
  ASSERT_EQ(fixture.size(), 3u);
  for (const auto& [name, cases] : fixture.items()) {
    SCOPED_TRACE(name);
    SentencePieceOptions options;
    options.path = name == "m.model" ? test::SampleTokenizerPath(name) : test::TestDataPath(name);
    auto tok = SentencePieceTokenizer::Load(options);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    ASSERT_GT(cases.size(), 30u);
    for (const auto& c : cases) {
      std::string text = c["text"];
      SCOPED_TRACE(text);
      EXPECT_EQ((*tok)->Encode(text, false, false), c["ids"].get<std::vector<int64_t>>());
    }
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
