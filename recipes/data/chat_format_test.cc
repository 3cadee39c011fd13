// Golden tests: tokens and masks must equal torchtune's model tokenizers (recipes/data/testdata/chat_formats.json,
// made by scripts/make_tokenizer_fixtures.py: torchtune bd2a0fc7c314's llama3/llama2/mistral/gemma/
// qwen2/qwen2_5/qwen3 tokenizers on the shipped sample files, each conversation masked with mask_messages and
// tokenized by the tokenizer's __call__, with and without max_seq_len, and with torchtune's tag templates).
// Every family torchtune 0.6.1 has, Phi-3 and Phi-4 included, against 0.6.1
// (recipes/data/testdata/torchtune_0_6_1.json, scripts/make_torchtune_0_6_1_fixtures.py).
#include "recipes/data/chat_format.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "recipes/data/samples.h"
#include "recipes/data/tokenizer_builders.h"
#include "recipes/data/tokenizers/byte_bpe.h"
#include "recipes/data/testdata/fixtures.h"

namespace tmx::data {
namespace {

std::vector<Message> Conversation(const std::string& name) {
  if (name == "single_turn") {
    return {Message("user", "What is the meaning of life?"), Message("assistant", "The meaning of life is 42.")};
  }
  return {Message("system", "You are an AI assistant."), Message("user", "What is the meaning of life?"),
          Message("assistant", "The meaning of life is 42."), Message("user", "That's ridiculous.\n\nReally?"),
          Message("assistant", "I agree.  ")};
}

std::unique_ptr<ModelTokenizer> Build(const std::string& component, const nlohmann::json& c) {
  TokenizerOptions options;
  if (!c["max_seq_len"].is_null()) options.max_seq_len = c["max_seq_len"].get<int64_t>();
  if (!c["prompt_template"].is_null()) {
    options.prompt_template.kind = PromptTemplateChoice::Kind::kNamed;
    options.prompt_template.dotpath = c["prompt_template"];
  }
  StatusOr<TokenizerOptions> sample = SampleTokenizerOptions(component, options);
  EXPECT_TRUE(sample.ok()) << sample.status().ToString();
  auto tok = BuildTokenizer(component, *sample);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(ChatFormatTest, TokensAndMasksEqualTorchtune) {
  nlohmann::json cases = test::LoadFixture("chat_formats.json");
  ASSERT_GT(cases.size(), 90u);
  for (const auto& c : cases) {
    std::string component = c["tokenizer"];
    SCOPED_TRACE(c.dump().substr(0, 160));
    auto tok = Build(component, c);
    ASSERT_NE(tok, nullptr);
    std::vector<Message> messages = Conversation(c["conversation"]);
    StatusOr<MaskingStrategy> strategy = ParseMaskingStrategy(c["masking_strategy"]);
    ASSERT_TRUE(strategy.ok());
    MaskMessages(&messages, *strategy);
    StatusOr<TokenizedMessages> got = tok->TokenizeMessages(messages);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->tokens, c["tokens"].get<std::vector<int64_t>>());
    EXPECT_EQ(got->mask, c["mask"].get<std::vector<bool>>());
  }
}

TEST(ChatFormatTest, EveryFamilyEqualsTorchtune061) {
  // Each tokenizer torchtune 0.6.1 has, on a corpus of whitespace, numbers, code, emoji, CJK, NFC/NFD and special
  // token look-alikes: plain ids, ids with BOS and EOS, and training samples (tokens and masks) with the prompt
  // masked or not, whole and truncated. Phi-3's plain text ends with the model's </s> (2), not <|endoftext|>; no
  // <|endoftext|> follows its assistant turns and truncation replaces no token. Phi-4 (GPT2BaseTokenizer) encodes
  // special-token look-alikes as text, has lost the sample merges.txt's first merge ("Ġ Ġ"), and closes no assistant
  // turn with <|im_end|>.
  nlohmann::json fixture = test::LoadFixture("torchtune_0_6_1.json");
  ASSERT_EQ(fixture["families"].size(), 8u);
  for (const auto& [family, expected] : fixture["families"].items()) {
    SCOPED_TRACE(family);
    auto plain = Build(family, nlohmann::json{{"max_seq_len", nullptr}, {"prompt_template", nullptr}});
    ASSERT_NE(plain, nullptr);
    auto id = [](const nlohmann::json& value) { return value.is_null() ? kNoId : value.get<int64_t>(); };
    EXPECT_EQ(plain->bos_id(), id(expected["bos_id"]));
    EXPECT_EQ(plain->eos_id(), id(expected["eos_id"]));
    EXPECT_EQ(plain->pad_id(), id(expected["pad_id"]));
    ASSERT_GT(expected["encode"].size(), 20u);
    for (const auto& c : expected["encode"]) {
      std::string text = c["text"];
      SCOPED_TRACE(text);
      EXPECT_EQ(plain->Encode(text, false, false), c["ids"].get<std::vector<int64_t>>());
      EXPECT_EQ(plain->Encode(text, true, true), c["ids_with_bos_eos"].get<std::vector<int64_t>>());
    }
    ASSERT_GE(expected["chat"].size(), 8u);
    for (const auto& c : expected["chat"]) {
      SCOPED_TRACE(c["conversation"].get<std::string>() + " max_seq_len " + c["max_seq_len"].dump() + " masked " +
                   c["messages"][0]["masked"].dump());
      auto tok = Build(family, nlohmann::json{{"max_seq_len", c["max_seq_len"]}, {"prompt_template", nullptr}});
      ASSERT_NE(tok, nullptr);
      std::vector<Message> messages;
      for (const auto& m : c["messages"]) messages.emplace_back(m["role"], m["content"], m["masked"].get<bool>());
      // torchtune 0.6.1's Phi-3 and Phi-4 __call__ ignore `inference`: both ways give the training sample.
      const bool phi = family == "phi3_mini_tokenizer" || family == "phi4_tokenizer";
      for (bool add_end_tokens : phi ? std::vector<bool>{true, false} : std::vector<bool>{true}) {
        StatusOr<TokenizedMessages> got = tok->TokenizeMessages(messages, add_end_tokens);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        EXPECT_EQ(got->tokens, c["tokens"].get<std::vector<int64_t>>());
        EXPECT_EQ(got->mask, c["mask"].get<std::vector<bool>>());
      }
    }
  }
}

TEST(ChatFormatTest, Phi4OnAFullVocabularyEqualsTorchtune061) {
  // On torchtune's full-size vocab.json/merges.txt every byte has a token, so the corpus's non-ASCII text and the
  // pre-tokenizer's split show in the ids (the tiny sample drops those bytes).
  TokenizerOptions options;
  options.path = test::TestDataPath("qwen2_vocab.json");
  options.merges_file = test::TestDataPath("qwen2_merges.txt");
  auto tok = BuildTokenizer("phi4_tokenizer", options);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const nlohmann::json cases = test::LoadFixture("torchtune_0_6_1.json")["phi4_full_vocab"]["encode"];
  ASSERT_GT(cases.size(), 20u);
  for (const auto& c : cases) {
    std::string text = c["text"];
    SCOPED_TRACE(text);
    EXPECT_EQ((*tok)->Encode(text, false, false), c["ids"].get<std::vector<int64_t>>());
  }
}

TEST(ChatFormatTest, Llama3InferenceLeavesTheLastTurnOpen) {
  auto tok = Build("llama3_tokenizer", nlohmann::json{{"max_seq_len", nullptr}, {"prompt_template", nullptr}});
  ASSERT_NE(tok, nullptr);
  std::vector<Message> messages = Conversation("single_turn");
  StatusOr<TokenizedMessages> train = tok->TokenizeMessages(messages, true);
  StatusOr<TokenizedMessages> infer = tok->TokenizeMessages(messages, false);
  ASSERT_TRUE(train.ok() && infer.ok());
  // Training ends "... <|eot_id|> <|end_of_text|>"; inference drops both.
  EXPECT_EQ(std::vector<int64_t>(train->tokens.end() - 2, train->tokens.end()), (std::vector<int64_t>{128009, 128001}));
  EXPECT_EQ(infer->tokens, std::vector<int64_t>(train->tokens.begin(), train->tokens.end() - 2));
}

// Llama 4's turns are Llama 3's with its own special tokens (torchtune's Llama4Tokenizer): on texts both
// pre-tokenizers split alike, the same tokens with the special ids mapped.
TEST(ChatFormatTest, Llama4TurnsAreLlama3sWithLlama4sSpecialTokens) {
  const nlohmann::json plain{{"max_seq_len", nullptr}, {"prompt_template", nullptr}};
  auto llama3 = Build("llama3_tokenizer", plain);
  auto llama4 = Build("torchtune.models.llama4.llama4_transform", plain);
  ASSERT_NE(llama3, nullptr);
  ASSERT_NE(llama4, nullptr);
  const std::map<int64_t, int64_t> mapped = {
      {128000, 200000}, {128001, 200001}, {128006, 200005}, {128007, 200006}, {128009, 200008}};
  for (bool end_tokens : {true, false}) {
    StatusOr<TokenizedMessages> three = llama3->TokenizeMessages(Conversation("single_turn"), end_tokens);
    StatusOr<TokenizedMessages> four = llama4->TokenizeMessages(Conversation("single_turn"), end_tokens);
    ASSERT_TRUE(three.ok() && four.ok());
    std::vector<int64_t> expected = three->tokens;
    for (int64_t& id : expected) id = mapped.count(id) ? mapped.at(id) : id;
    EXPECT_EQ(four->tokens, expected);
    EXPECT_EQ(four->mask, three->mask);
  }
  EXPECT_EQ(llama4->StopTokens(), (std::vector<int64_t>{200001, 200008, 200007}));  // eos, <|eot|>, <|eom|>
}

TEST(ChatFormatTest, Llama4SpecialTokensAreTorchtunes) {
  const std::map<std::string, int64_t> t = Llama4SpecialTokens();
  EXPECT_EQ(t.size(), 2048u);  // 200000 .. 202047, each id once
  std::set<int64_t> ids;
  for (const auto& [name, id] : t) ids.insert(id);
  EXPECT_EQ(ids.size(), 2048u);
  EXPECT_EQ(*ids.begin(), 200000);
  EXPECT_EQ(*ids.rbegin(), 202047);
  EXPECT_EQ(t.at("<|finetune_right_pad|>"), 200018);
  EXPECT_EQ(t.at("<|text_post_train_reserved_special_token_8|>"), 200019);
  EXPECT_EQ(t.at("<|image|>"), 200090);
  EXPECT_EQ(t.at("<|patch|>"), 200092);
  EXPECT_EQ(t.at("<|vision_reserved_special_token_7|>"), 200093);
  EXPECT_EQ(t.at("<|reasoning_thinking_end|>"), 201143);
  EXPECT_EQ(t.at("<|reserved_special_token_0|>"), 201144);
  EXPECT_EQ(t.at("<|reserved_special_token_903|>"), 202047);
}

// torchtune's stop_tokens: [eos_id, eot_id, eom_id] (Llama 3), [eos_id, pad_id] (Qwen 2/2.5), [eos_id] (others).
TEST(ChatFormatTest, StopTokensAreTorchtunes) {
  const nlohmann::json plain{{"max_seq_len", nullptr}, {"prompt_template", nullptr}};
  const std::vector<std::pair<std::string, std::vector<int64_t>>> cases = {
      {"llama3_tokenizer", {128001, 128009, 128008}},
      {"qwen2_tokenizer", {151645, 151643}},  // <|im_end|>, <|endoftext|>
      {"qwen3_tokenizer", {151645, 151643}},
      {"llama2_tokenizer", {2}},
      {"phi3_mini_tokenizer", {32000}},
  };
  for (const auto& [component, stops] : cases) {
    auto tok = Build(component, plain);
    ASSERT_NE(tok, nullptr) << component;
    EXPECT_EQ(tok->StopTokens(), stops) << component;
  }
}

TEST(ChatFormatTest, MistralRefusesSystemPrompts) {
  auto tok = Build("mistral_tokenizer", nlohmann::json{{"max_seq_len", nullptr}, {"prompt_template", nullptr}});
  ASSERT_NE(tok, nullptr);
  StatusOr<TokenizedMessages> got = tok->TokenizeMessages(Conversation("system_multi_turn"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "mistral_tokenizer: MistralChatTemplate does not support system prompts (message 0 is one); fix: drop "
            "the system message or set the tokenizer's prompt_template to null");
}

TEST(ChatFormatTest, QwenRefusesChatMLTemplate) {
  auto tok = Build("qwen2_tokenizer",
                   nlohmann::json{{"max_seq_len", nullptr}, {"prompt_template", "torchtune.data.ChatMLTemplate"}});
  ASSERT_NE(tok, nullptr);
  StatusOr<TokenizedMessages> got = tok->TokenizeMessages(Conversation("single_turn"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "qwen2_tokenizer: prompt_template torchtune.data.ChatMLTemplate would wrap every message in <|im_*|> "
            "tokens twice; fix: set it to null (the Qwen format is ChatML already)");
}

TEST(ChatFormatTest, PatternAtPcre2MatchLimitIsAStatus) {
  // A Qwen vocabulary whose pre-tokenizer pattern backtracks catastrophically on a run of a's: the conversation is
  // an error naming the tokenizer, its file and the pattern, not a sample of template tokens only.
  ByteBpeOptions options;
  for (int b = ' '; b <= '~'; ++b) options.model.vocab[ByteToUnicode()[static_cast<size_t>(b)]] = b - ' ';
  options.source = "/models/qwen/vocab.json";
  options.pattern = "(a+)+b|\\S";
  options.special_tokens = {{"<|im_start|>", 100}, {"<|im_end|>", 101}};
  options.eos_id = 101;
  auto base = ByteBpeTokenizer::Create(std::move(options));
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ModelTokenizer tok("qwen2_tokenizer", std::move(base).value(), ChatFormat::kQwen2, {});
  StatusOr<TokenizedMessages> got = tok.TokenizeMessages({Message("user", "x" + std::string(40, 'a') + "c b")});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "qwen2_tokenizer: /models/qwen/vocab.json: pre-tokenizer: regex pattern (a+)+b|\\S: matching stopped at "
            "byte 1 of a 44-byte text (PCRE2: match limit exceeded); fix: use a pattern that does not backtrack "
            "catastrophically (the model's own), or split the text into shorter samples");
}

TEST(ChatFormatTest, TruncateEndsWithEos) {
  EXPECT_EQ(ModelTokenizer::Truncate<int64_t>({1, 2, 3, 4}, 3, false, int64_t{9}), (std::vector<int64_t>{1, 2, 9}));
  EXPECT_EQ(ModelTokenizer::Truncate<int64_t>({1, 2, 3, 4}, 3, true, std::nullopt), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(ModelTokenizer::Truncate<int64_t>({1, 9}, 3, false, int64_t{9}), (std::vector<int64_t>{1, 9}));
}

}  // namespace
}  // namespace tmx::data
