#include "recipes/tokenize_cli.h"

#include <sstream>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "recipes/builtin.h"
#include "recipes/data/samples.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result Tok(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  int code = Tokenize(BuiltinRegistry(), args, in, out, err);
  return {code, out.str(), err.str()};
}

TEST(TokenizeCliTest, ByteTokensPlainAndInTheChatFormat) {
  Result r = Tok({"tiny/lora_single_device", "--text", "hi"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tokenizer: byte_tokenizer"), std::string::npos) << r.out;
  // BOS, 'h', 'i', EOS.
  EXPECT_NE(r.out.find("plain (BOS and EOS added): 4 tokens\n0\t256\t"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1\t104\th\n2\t105\ti\n3\t257\t"), std::string::npos) << r.out;
  // The user turn is masked, the (empty) assistant reply's end is trained on.
  EXPECT_NE(r.out.find("\t104\th\tmasked"), std::string::npos) << r.out;
}

TEST(TokenizeCliTest, ReadsStandardInputAndAppliesOverrides) {
  const std::string model = data::SamplesDir() + "/tokenizers/tiktoken_small.model";
  Result r = Tok({"tiny/lora_single_device", "tokenizer=torchtune.models.llama3.llama3_tokenizer",
                  "tokenizer.path=" + model, "--chat"},
                 "Hello");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tokenizer: llama3_tokenizer"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("plain ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0\t128000\t<|begin_of_text|>\tmasked"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\t128006\t<|start_header_id|>\tmasked"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\t128009\t<|eot_id|>\n"), std::string::npos) << r.out;  // the reply's end: trained on
}

TEST(TokenizeCliTest, AMissingTokenizerFileOrBadArgumentsExitTwoNamingThem) {
  Result missing = Tok({"tiny/lora_single_device", "tokenizer=torchtune.models.llama3.llama3_tokenizer",
                        "tokenizer.path=/nonexistent/tokenizer.model", "--text", "x"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/tokenizer.model"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.out, "");
  Result both = Tok({"tiny/lora_single_device", "--plain", "--chat", "--text", "x"});
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("--plain and --chat exclude each other"), std::string::npos) << both.err;
  Result none = Tok({});
  EXPECT_EQ(none.code, 2);
  Result unknown = Tok({"no/such_config", "--text", "x"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("no/such_config"), std::string::npos) << unknown.err;
}

// Hostile tokenizer files (issue 27): JSON errors other than syntax errors (a number no double holds, a field of
// the wrong type) escaped the readers as exceptions and aborted `tune tokenize`.
TEST(TokenizeCliTest, HostileTokenizerFilesExitTwoNamingTheFileAndField) {
  test::ScratchDir dir;
  const std::string specials = dir.path() + "/tokenizer.json";
  ASSERT_TRUE(WriteFileAtomically(specials, R"({"added_tokens": [{"content": 128000, "id": 128000}]})").ok());
  Result typed = Tok({"tiny/lora_single_device", "tokenizer=torchtune.models.llama3.llama3_tokenizer",
                      "tokenizer.path=" + data::SamplesDir() + "/tokenizers/tiktoken_small.model",
                      "tokenizer.special_tokens_path=" + specials, "--text", "x"});
  EXPECT_EQ(typed.code, 2);
  EXPECT_NE(typed.err.find(specials + ": added_tokens[0].content is a number, expected a string; fix: set "
                                      "special_tokens_path to the model's own tokenizer.json"),
            std::string::npos)
      << typed.err;
  EXPECT_EQ(typed.out, "");

  const std::string vocab = dir.path() + "/vocab.json", merges = dir.path() + "/merges.txt";
  ASSERT_TRUE(WriteFileAtomically(vocab, "{\"a\": 0, \"b\": 1e999}").ok());
  ASSERT_TRUE(WriteFileAtomically(merges, "a b\n").ok());
  Result overflow = Tok({"tiny/lora_single_device", "tokenizer=torchtune.models.qwen2_5.qwen2_5_tokenizer",
                         "tokenizer.path=" + vocab, "tokenizer.merges_file=" + merges, "--text", "x"});
  EXPECT_EQ(overflow.code, 2);
  EXPECT_NE(overflow.err.find(vocab + ":1:15: in b: number 1e999 is out of range"), std::string::npos) << overflow.err;
  EXPECT_EQ(overflow.out, "");
}

}  // namespace
}  // namespace tmx::recipes
