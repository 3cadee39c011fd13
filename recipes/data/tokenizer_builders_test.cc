#include "recipes/data/tokenizer_builders.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "recipes/data/samples.h"
#include "recipes/data/tokenizers/hf_tokenizer.h"
#include "recipes/data/testdata/fixtures.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

TEST(TokenizerBuildersTest, EveryComponentBuildsOnItsSample) {
  for (const TokenizerComponent& c : TokenizerComponents()) {
    SCOPED_TRACE(c.dotpath);
    StatusOr<TokenizerOptions> options = SampleTokenizerOptions(c.dotpath, TokenizerOptions());
    ASSERT_TRUE(options.ok()) << options.status().ToString();
    auto tok = BuildTokenizer(c.dotpath, *options);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    EXPECT_EQ((*tok)->name(), c.name);
    EXPECT_FALSE((*tok)->Encode("Hello world", false, false).empty());
  }
}

TEST(TokenizerBuildersTest, FamilyIdsAsTorchtune) {
  auto tok = BuildTokenizer("llama3_tokenizer", *SampleTokenizerOptions("llama3_tokenizer", {}));
  ASSERT_TRUE(tok.ok());
  const nlohmann::json fixture = test::LoadFixture("tokenizer_ids.json");
  EXPECT_EQ((*tok)->bos_id(), fixture["tiktoken"]["bos_id"].get<int64_t>());
  EXPECT_EQ((*tok)->eos_id(), fixture["tiktoken"]["eos_id"].get<int64_t>());
  EXPECT_EQ((*tok)->pad_id(), fixture["tiktoken"]["pad_id"].get<int64_t>());
  EXPECT_EQ((*tok)->base().vocab_size(), fixture["tiktoken"]["vocab_size"].get<int64_t>());
  EXPECT_EQ(Llama3SpecialTokens().size(), 257u);
  EXPECT_EQ(Llama3SpecialTokens().at("<|reserved_special_token_244|>"), 128255);

  auto phi3 = BuildTokenizer("phi3_mini_tokenizer", *SampleTokenizerOptions("phi3_mini_tokenizer", {}));
  ASSERT_TRUE(phi3.ok());
  EXPECT_EQ((*phi3)->eos_id(), fixture["phi3"]["eos_id"].get<int64_t>());
  EXPECT_EQ((*phi3)->pad_id(), fixture["phi3"]["pad_id"].get<int64_t>());
  EXPECT_EQ((*phi3)->bos_id(), fixture["phi3"]["bos_id"].get<int64_t>());

  auto llama2 =
      BuildTokenizer("torchtune.models.llama2.llama2_tokenizer", *SampleTokenizerOptions("llama2_tokenizer", {}));
  ASSERT_TRUE(llama2.ok());
  EXPECT_EQ((*llama2)->pad_id(), 0);
  EXPECT_EQ(Qwen3SpecialTokens().at("</think>"), 151668);
  EXPECT_EQ(Qwen2_5SpecialTokens().at("<|file_sep|>"), 151664);
}

TEST(TokenizerBuildersTest, MissingFileSaysWhichOptionAndWhere) {
  TokenizerOptions options;
  options.path = "/nonexistent/Meta-Llama-3.1-8B-Instruct/original/tokenizer.model";
  auto tok = BuildTokenizer("torchtune.models.llama3.llama3_tokenizer", options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(tok.status().message(),
            "llama3_tokenizer: path /nonexistent/Meta-Llama-3.1-8B-Instruct/original/tokenizer.model does not exist; "
            "fix: put the model's original/tokenizer.model (tiktoken ranks) there (e.g. tune download <model> "
            "--output-dir <dir>), or set path to where it is");
  options.path = test::SampleTokenizerPath("tiny_bpe_vocab.json");
  tok = BuildTokenizer("qwen2_5_tokenizer", options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(),
            "qwen2_5_tokenizer: merges_file is not set; fix: set merges_file to the model's merges.txt");
}

TEST(TokenizerBuildersTest, Phi4AsTorchtune) {
  const nlohmann::json phi4 = test::LoadFixture("torchtune_0_6_1.json")["families"]["phi4_tokenizer"];
  EXPECT_EQ(Phi4SpecialTokens(), (phi4["special_tokens"].get<std::map<std::string, int64_t>>()));
  EXPECT_EQ(Phi4SpecialTokens().size(), 96u);  // 100256 .. 100351
  auto tok = BuildTokenizer("torchtune.models.phi4.phi4_tokenizer", *SampleTokenizerOptions("phi4_tokenizer", {}));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->bos_id(), 100257);  // <|endoftext|>
  EXPECT_EQ((*tok)->eos_id(), 100265);  // <|im_end|>
  EXPECT_EQ((*tok)->pad_id(), 100349);  // <|dummy_85|>
  EXPECT_EQ((*tok)->base().vocab_size(), 100352);
  EXPECT_EQ((*tok)->format(), ChatFormat::kPhi4);
}

TEST(TokenizerBuildersTest, Phi4FileErrorsNameItsKeys) {
  TokenizerOptions options;
  options.path = "/nonexistent/phi-4/vocab.json";
  auto tok = BuildTokenizer("phi4_tokenizer", options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(tok.status().message(),
            "phi4_tokenizer: vocab_path /nonexistent/phi-4/vocab.json does not exist; fix: put the model's vocab.json "
            "there (e.g. tune download <model> --output-dir <dir>), or set vocab_path to where it is");
  options.path = test::SampleTokenizerPath("tiny_bpe_vocab.json");
  tok = BuildTokenizer("phi4_tokenizer", options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(),
            "phi4_tokenizer: merges_path is not set; fix: set merges_path to the model's merges.txt");
  // vocab.json and merges.txt swapped.
  options.merges_file = options.path;
  options.path = test::SampleTokenizerPath("tiny_bpe_merges.txt");
  tok = BuildTokenizer("phi4_tokenizer", options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message().rfind("phi4_tokenizer: " + options.path + ":1:", 0), 0u) << tok.status().message();
  test::ScratchDir dir;
  options.path = dir.path() + "/vocab.json";
  test::WriteTextFile(options.path, "[\"a\", \"b\"]");
  tok = BuildTokenizer("phi4_tokenizer", options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(), "phi4_tokenizer: " + options.path +
                                        ": expected a JSON object {\"token\": id, ...}; fix: give the tokenizer's "
                                        "vocab.json (merges go in merges_path)");
  options.path = test::SampleTokenizerPath("tiny_bpe_vocab.json");
  options.merges_file = dir.path() + "/merges.txt";
  test::WriteTextFile(options.merges_file, "#version: 0.2\nĠ t\nĠt he re\n");
  tok = BuildTokenizer("phi4_tokenizer", options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(), "phi4_tokenizer: " + options.merges_file +
                                        ":3: expected two symbols \"left right\", got \"Ġt he re\"; fix: give the "
                                        "tokenizer's merges.txt (vocab goes in vocab_path)");
}

TEST(TokenizerBuildersTest, SpecialTokensPathReplacesTheTable) {
  TokenizerOptions options = *SampleTokenizerOptions("qwen2_tokenizer", {});
  options.special_tokens_path = test::SampleTokenizerPath("tiny_bpe_tokenizer.json");
  auto tok = BuildTokenizer("qwen2_tokenizer", options);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->eos_id(), 2002);  // <|im_end|> as that file numbers it
  EXPECT_EQ((*tok)->pad_id(), 2000);
  EXPECT_EQ((*tok)->Encode("<|im_start|>", false, false), (std::vector<int64_t>{2001}));

  options = *SampleTokenizerOptions("llama3_tokenizer", {});
  options.special_tokens_path = test::SampleTokenizerPath("tiny_bpe_tokenizer.json");
  auto llama3 = BuildTokenizer("llama3_tokenizer", options);
  ASSERT_FALSE(llama3.ok());
  EXPECT_EQ(llama3.status().message(),
            "llama3_tokenizer: special token <|begin_of_text|> is missing from " + options.special_tokens_path +
                "; fix: give the model's own tokenizer.json as special_tokens_path, or leave it null for the family's "
                "table");
}

TEST(TokenizerBuildersTest, VocabJsonWithoutByteAlphabetIsRefused) {
  // A vocab.json of SentencePiece pieces given to a byte-level family: its text would all be dropped.
  test::ScratchDir dir;
  TokenizerOptions options = *SampleTokenizerOptions("qwen2_tokenizer", {});
  options.path = dir.path() + "/vocab.json";
  test::WriteTextFile(options.path, "{\"<unk>\": 0, \"\xE2\x96\x81the\": 1, \"a\": 2}");
  auto tok = BuildTokenizer("qwen2_tokenizer", options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(),
            "qwen2_tokenizer: " + options.path +
                ": the byte-level BPE vocabulary has no token for byte 0x20 (its symbol \"\xC4\xA0\"), so text would "
                "lose that byte and a sample made of such text would keep only its template tokens; fix: give the "
                "model's byte-level vocabulary (GPT-2's byte alphabet: a token for each byte's symbol), or for a "
                "SentencePiece-style vocabulary the model's tokenizer.json with its own pre-tokenizer, or the family's "
                "SentencePiece tokenizer");
}

TEST(TokenizerBuildersTest, SamplesStandInForMissingFiles) {
  TokenizerOptions options;
  options.path = "/models/Qwen2.5-0.5B/vocab.json";
  options.merges_file = "/models/Qwen2.5-0.5B/merges.txt";
  options.max_seq_len = 64;
  StatusOr<TokenizerOptions> sample = SampleTokenizerOptions("qwen2_5_tokenizer", options);
  ASSERT_TRUE(sample.ok());
  EXPECT_EQ(sample->path, SamplesDir() + "/tokenizers/tiny_bpe_vocab.json");
  EXPECT_EQ(sample->merges_file, SamplesDir() + "/tokenizers/tiny_bpe_merges.txt");
  EXPECT_EQ(*sample->max_seq_len, 64);
  EXPECT_EQ(
      SampleNote("tokenizer", "qwen2_5_tokenizer", "tiny_bpe_vocab.json", options.path),
      "tokenizer qwen2_5_tokenizer ran on the shipped sample tiny_bpe_vocab.json (/models/Qwen2.5-0.5B/vocab.json "
      "is absent)");
  // Phi-4 reads the same kind of files under other keys: the same sample stands in.
  sample = SampleTokenizerOptions("torchtune.models.phi4.phi4_tokenizer", options);
  ASSERT_TRUE(sample.ok());
  EXPECT_EQ(sample->path, SamplesDir() + "/tokenizers/tiny_bpe_vocab.json");
  EXPECT_EQ(sample->merges_file, SamplesDir() + "/tokenizers/tiny_bpe_merges.txt");
  setenv("TUNE_MATRIX_SAMPLES_DIR", "/elsewhere/samples", 1);
  EXPECT_EQ(SampleTokenizerOptions("gemma_tokenizer", {})->path, "/elsewhere/samples/tokenizers/m.model");
  unsetenv("TUNE_MATRIX_SAMPLES_DIR");
}

// The tiny vision model's transform reads the shipped byte-level ranks whatever the config says, with Llama 3's
// special tokens after the 256 bytes: the table the vision tests give as tiny_vision_special_tokens.json.
TEST(TokenizerBuildersTest, TheByteVisionTransformNeedsNoFile) {
  StatusOr<std::map<std::string, int64_t>> json =
      ReadHfAddedTokens(SamplesDir() + "/tokenizers/tiny_vision_special_tokens.json");
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_EQ(ByteLlama3SpecialTokens(), *json);
  TokenizerOptions options;
  options.path = "/nowhere/tokenizer.model";
  auto tok = BuildTokenizer("tune_matrix.data.byte_vision_transform", options);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->base().SpecialId("<|image|>"), 512);
  EXPECT_EQ((*tok)->bos_id(), 256);
  const std::vector<int64_t> ids = (*tok)->Encode("Hi", false, false);
  EXPECT_EQ(ids, (std::vector<int64_t>{'H', 'i'}));
}

TEST(TokenizerBuildersTest, UnknownComponentAndOptions) {
  auto tok = BuildTokenizer("torchtune.models.llama3.llama3_tokenizr", TokenizerOptions());
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message().rfind("tokenizer component torchtune.models.llama3.llama3_tokenizr is unknown "
                                         "(did you mean torchtune.models.llama3.llama3_tokenizer?); fix: use one of: ",
                                         0),
            0u)
      << tok.status().message();
  TokenizerOptions options = *SampleTokenizerOptions("gemma_tokenizer", {});
  options.truncation_type = "middle";
  tok = BuildTokenizer("gemma_tokenizer", options);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(), "gemma_tokenizer: truncation_type \"middle\" is unknown; fix: use right or left");
}

}  // namespace
}  // namespace tmx::data
