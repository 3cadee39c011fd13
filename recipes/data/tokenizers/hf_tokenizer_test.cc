// Token ids must equal Hugging Face `tokenizers` 0.23.3 (recipes/data/testdata/tokenizer_ids.json["hf_*"], made
// by scripts/make_tokenizer_fixtures.py; "hf_base_tokenizer" through torchtune's HuggingFaceBaseTokenizer).
#include "recipes/data/tokenizers/hf_tokenizer.h"

#include <gtest/gtest.h>

#include "recipes/data/testdata/fixtures.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

using test::SampleTokenizerPath;

std::unique_ptr<HfTokenizer> Load(const std::string& file) {
  HfTokenizerOptions options;
  options.path = SampleTokenizerPath(file);
  options.generation_config_path = SampleTokenizerPath("generation_config.json");
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

TEST(HfTokenizerTest, BosEosAsTorchtuneAddsThem) {
  auto tok = Load("tokenizer.json");
  ASSERT_NE(tok, nullptr);
  nlohmann::json fixture = test::LoadFixture("tokenizer_ids.json")["hf_base_tokenizer"];
  EXPECT_EQ(tok->bos_id(), fixture["bos_id"].get<int64_t>());
  EXPECT_EQ(tok->eos_id(), fixture["eos_id"].get<int64_t>());
  for (const auto& c : fixture["with_bos_eos"]) {
    std::string text = c["text"];
    SCOPED_TRACE(text);
    EXPECT_EQ(tok->Encode(text, true, true), c["ids"].get<std::vector<int64_t>>());
  }
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

}  // namespace
}  // namespace tmx::data
