#include "recipes/data/config_options.h"

#include <gtest/gtest.h>

namespace tmx::data {
namespace {

Config Parse(const std::string& yaml) {
  StatusOr<Config> config = Config::FromString(yaml, "cfg.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return std::move(config).value();
}

TEST(ConfigOptionsTest, TorchtuneLlama3Tokenizer) {
  Config config = Parse(
      "tokenizer:\n"
      "  _component_: torchtune.models.llama3.llama3_tokenizer\n"
      "  path: /tmp/Meta-Llama-3.1-8B-Instruct/original/tokenizer.model\n"
      "  max_seq_len: null\n");
  StatusOr<TokenizerConfig> t = TokenizerFromConfig(config);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->component, "torchtune.models.llama3.llama3_tokenizer");
  EXPECT_EQ(t->options.path, "/tmp/Meta-Llama-3.1-8B-Instruct/original/tokenizer.model");
  EXPECT_FALSE(t->options.max_seq_len.has_value());
  EXPECT_EQ(t->options.prompt_template.kind, PromptTemplateChoice::Kind::kBuilderDefault);
}

TEST(ConfigOptionsTest, PromptTemplateForms) {
  Config config = Parse(
      "tokenizer:\n"
      "  _component_: torchtune.models.mistral.mistral_tokenizer\n"
      "  path: m.model\n"
      "  max_seq_len: 512\n"
      "  prompt_template: null\n"
      "other:\n"
      "  _component_: torchtune.models.gemma.gemma_tokenizer\n"
      "  path: m.model\n"
      "  prompt_template:\n"
      "    user: [\"Q: \", \"\\nA: \"]\n");
  StatusOr<TokenizerConfig> t = TokenizerFromConfig(config);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->options.prompt_template.kind, PromptTemplateChoice::Kind::kNone);
  EXPECT_EQ(*t->options.max_seq_len, 512);
  t = TokenizerFromConfig(config, "other");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->options.prompt_template.kind, PromptTemplateChoice::Kind::kCustom);
  EXPECT_EQ(t->options.prompt_template.tags.at("user"), std::make_pair(std::string("Q: "), std::string("\nA: ")));
}

TEST(ConfigOptionsTest, UnknownKeyNamesLineAndSuggests) {
  Config config = Parse(
      "tokenizer:\n"
      "  _component_: torchtune.models.qwen2_5.qwen2_5_tokenizer\n"
      "  path: vocab.json\n"
      "  merge_file: merges.txt\n");
  StatusOr<TokenizerConfig> t = TokenizerFromConfig(config);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "cfg.yaml:4:3: key 'tokenizer.merge_file' is not an option of qwen2_5_tokenizer (did you mean "
            "merges_file?); fix: use one of: _component_, path, max_seq_len, prompt_template, truncation_type, "
            "merges_file, special_tokens_path");
}

TEST(ConfigOptionsTest, UnsupportedTemplateIsNamed) {
  Config config = Parse(
      "tokenizer:\n"
      "  _component_: torchtune.models.llama3.llama3_tokenizer\n"
      "  path: t.model\n"
      "  prompt_template: my.module.MyTemplate\n");
  StatusOr<TokenizerConfig> t = TokenizerFromConfig(config);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message().rfind("cfg.yaml:4:20: key 'tokenizer.prompt_template': prompt_template "
                                       "my.module.MyTemplate is not supported; fix: use null, a {role: [prepend, "
                                       "append]} map, or one of: ",
                                       0),
            0u)
      << t.status().message();
}

TEST(ConfigOptionsTest, TorchtuneDatasets) {
  Config config = Parse(
      "dataset:\n"
      "  _component_: torchtune.datasets.alpaca_cleaned_dataset\n"
      "  packed: False\n"
      "chat:\n"
      "  _component_: torchtune.datasets.chat_dataset\n"
      "  source: json\n"
      "  data_files: data/my_chats.json\n"
      "  conversation_column: dialogue\n"
      "  conversation_style: sharegpt\n"
      "  split: train[:90%]\n"
      "instruct:\n"
      "  _component_: torchtune.datasets.instruct_dataset\n"
      "  source: csv\n"
      "  data_files: [a.csv, b.csv]\n"
      "  column_map: {input: question, output: answer}\n"
      "  train_on_input: True\n");
  StatusOr<DatasetConfig> d = DatasetFromConfig(config);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->component, "torchtune.datasets.alpaca_cleaned_dataset");
  EXPECT_FALSE(d->options.packed);
  d = DatasetFromConfig(config, "chat");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->options.data_files, std::vector<std::string>{"data/my_chats.json"});
  EXPECT_EQ(d->options.conversation_column, "dialogue");
  EXPECT_EQ(d->options.split, "train[:90%]");
  d = DatasetFromConfig(config, "instruct");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->options.data_files, (std::vector<std::string>{"a.csv", "b.csv"}));
  EXPECT_EQ(d->options.column_map.at("output"), "answer");
  EXPECT_EQ(*d->options.train_on_input, true);
}

TEST(ConfigOptionsTest, DatasetErrors) {
  Config config = Parse(
      "a:\n"
      "  _component_: torchtune.datasets.alpaca_dataset\n"
      "  new_system_prompt: Be brief.\n"
      "b:\n"
      "  _component_: torchtune.datasets.chat_dataset\n"
      "  source: json\n"
      "  conversation_column: c\n"
      "  conversation_style: vicuna\n"
      "c:\n"
      "  _component_: torchtune.datasets.instruct_dataset\n"
      "  column_map: {input: q, output: a}\n"
      "d:\n"
      "  _component_: torchtune.datasets.slimorca_dataset\n"
      "  filter_fn: my.filter\n");
  EXPECT_EQ(
      DatasetFromConfig(config, "a")
          .status()
          .message()
          .rfind("cfg.yaml:3:3: key 'a.new_system_prompt' is not an option of alpaca_dataset; fix: use one of: ", 0),
      0u);
  EXPECT_EQ(DatasetFromConfig(config, "b").status().message(),
            "cfg.yaml:8:23: key 'b.conversation_style': \"vicuna\" is not supported; fix: use sharegpt or openai");
  EXPECT_EQ(
      DatasetFromConfig(config, "c").status().message(),
      "cfg.yaml:10:3: key 'c.source': is required by instruct_dataset; fix: set it to a hub id or to json, jsonl, "
      "csv or text with data_files");
  EXPECT_EQ(DatasetFromConfig(config, "d").status().message(),
            "cfg.yaml:14:14: key 'd.filter_fn': a Python callable is not supported; fix: remove it and filter the data "
            "files");
}

TEST(ConfigOptionsTest, RandomTokensDataset) {
  Config config = Parse(
      "dataset:\n"
      "  _component_: tune_matrix.datasets.random_tokens_dataset\n"
      "  num_samples: 12\n"
      "  seq_len: 32\n"
      "  seed: 7\n"
      "short:\n"
      "  _component_: tune_matrix.datasets.random_tokens_dataset\n"
      "  seq_len: 1\n"
      "other:\n"
      "  _component_: tune_matrix.datasets.random_tokens_dataset\n"
      "  source: tatsu-lab/alpaca\n");
  StatusOr<DatasetConfig> d = DatasetFromConfig(config);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->component, "tune_matrix.datasets.random_tokens_dataset");
  EXPECT_EQ(d->options.num_samples, 12);
  EXPECT_EQ(d->options.seq_len, 32);
  EXPECT_EQ(d->options.random_seed, 7);

  StatusOr<DatasetConfig> too_short = DatasetFromConfig(config, "short");
  ASSERT_FALSE(too_short.ok());
  EXPECT_EQ(too_short.status().message(), "cfg.yaml:8:12: key 'short.seq_len': is 1; fix: use 2 or more");
  StatusOr<DatasetConfig> text_key = DatasetFromConfig(config, "other");
  ASSERT_FALSE(text_key.ok());
  EXPECT_NE(text_key.status().message().find("cfg.yaml:11:3: key 'other.source' is not an option of "
                                             "random_tokens_dataset"),
            std::string::npos)
      << text_key.status().message();
}

}  // namespace
}  // namespace tmx::data
