#include "recipes/data/config_options.h"

#include <gtest/gtest.h>

#include <algorithm>

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

TEST(ConfigOptionsTest, Phi4TakesTorchtunesFileKeys) {
  // torchtune's phi4_tokenizer names its files vocab_path and merges_path; they fill the same options as Qwen's
  // path and merges_file, and a Qwen-style key is refused with the keys it takes.
  Config config = Parse(
      "tokenizer:\n"
      "  _component_: torchtune.models.phi4.phi4_tokenizer\n"
      "  vocab_path: /tmp/phi-4/vocab.json\n"
      "  merges_path: /tmp/phi-4/merges.txt\n"
      "  max_seq_len: null\n"
      "other:\n"
      "  _component_: torchtune.models.phi4.phi4_tokenizer\n"
      "  path: /tmp/phi-4/vocab.json\n");
  StatusOr<TokenizerConfig> t = TokenizerFromConfig(config);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->component, "torchtune.models.phi4.phi4_tokenizer");
  EXPECT_EQ(t->options.path, "/tmp/phi-4/vocab.json");
  EXPECT_EQ(t->options.merges_file, "/tmp/phi-4/merges.txt");
  StatusOr<TokenizerComponent> phi4 = FindTokenizerComponent(t->component);
  ASSERT_TRUE(phi4.ok());
  EXPECT_EQ(TokenizerFiles(*phi4, t->options),
            (std::vector<std::pair<std::string, std::string>>{{"vocab_path", "/tmp/phi-4/vocab.json"},
                                                              {"merges_path", "/tmp/phi-4/merges.txt"}}));
  EXPECT_EQ(TokenizerKeys(*phi4),
            (std::vector<std::string>{"_component_", "vocab_path", "merges_path", "max_seq_len", "prompt_template",
                                      "truncation_type", "special_tokens_path"}));
  t = TokenizerFromConfig(config, "other");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "cfg.yaml:8:3: key 'other.path' is not an option of phi4_tokenizer; fix: use one of: _component_, "
            "vocab_path, merges_path, max_seq_len, prompt_template, truncation_type, special_tokens_path");
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

// The node the registry would hand the reader: every key the schema gives a default, at that default, and a
// value for each required key without one (its first allowed value, or "x").
std::string NodeWithDefaults(const std::string& dotpath, const std::vector<FieldSpec>& params) {
  std::string yaml = "node:\n  _component_: " + dotpath + "\n";
  for (const FieldSpec& f : params) {
    if (!f.default_yaml.empty()) {
      yaml += "  " + f.name + ": " + f.default_yaml + "\n";
    } else if (f.required) {
      yaml += "  " + f.name + ": " + (f.choices.empty() ? "x" : f.choices.front()) + "\n";
    }
  }
  return yaml;
}

// Every default is YAML of the field's type that obeys the field's own bounds and allowed values.
void ExpectDefaultsObeyBounds(const std::string& component, const std::vector<FieldSpec>& params) {
  for (const FieldSpec& f : params) {
    SCOPED_TRACE(component + "." + f.name + " = " + f.default_yaml);
    if (f.default_yaml.empty()) continue;
    YAML::Node value = YAML::Load(f.default_yaml);
    if (value.IsNull()) {
      EXPECT_TRUE(f.nullable || f.value_check) << "a null default needs a nullable field";
      continue;
    }
    if (f.type == FieldType::kInt) {
      int64_t v = value.as<int64_t>();
      if (f.min) EXPECT_GE(v, *f.min);
    }
    if (f.type == FieldType::kBool) EXPECT_TRUE(f.default_yaml == "True" || f.default_yaml == "False");
    if (!f.choices.empty()) {
      EXPECT_NE(std::find(f.choices.begin(), f.choices.end(), f.default_yaml), f.choices.end());
    }
  }
}

std::vector<std::string> KeysOf(const std::vector<FieldSpec>& params) {
  std::vector<std::string> keys = {"_component_"};
  for (const FieldSpec& f : params) keys.push_back(f.name);
  return keys;
}

TEST(ConfigOptionsTableTest, EveryTokenizerTakesItsSchemaAndItsDefaults) {
  for (const TokenizerComponent& c : TokenizerComponents()) {
    SCOPED_TRACE(c.name);
    std::vector<FieldSpec> params = TokenizerParams(c);
    EXPECT_EQ(TokenizerKeys(c), KeysOf(params));
    ExpectDefaultsObeyBounds(c.name, params);
    Config config = Parse(NodeWithDefaults(c.dotpath, params));
    StatusOr<TokenizerConfig> t = TokenizerFromConfig(config, "node");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->options.truncation_type, TokenizerOptions().truncation_type);
    // llama4_transform's builder defaults max_seq_len to 8192; every other tokenizer's to None.
    const std::optional<int64_t> max_seq_len =
        c.chat_format == ChatFormat::kLlama4 ? std::optional<int64_t>(8192) : TokenizerOptions().max_seq_len;
    EXPECT_EQ(t->options.max_seq_len, max_seq_len);
    EXPECT_EQ(t->options.max_num_tiles, TokenizerOptions().max_num_tiles);
  }
}

TEST(ConfigOptionsTableTest, EveryDatasetTakesItsSchemaAndItsDefaults) {
  for (const DatasetComponent& c : DatasetComponents()) {
    SCOPED_TRACE(c.name);
    std::vector<FieldSpec> params = DatasetParams(c);
    EXPECT_EQ(DatasetKeys(c), KeysOf(params));
    ExpectDefaultsObeyBounds(c.name, params);
    Config config = Parse(NodeWithDefaults(c.dotpath, params));
    StatusOr<DatasetConfig> d = DatasetFromConfig(config, "node");
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    const DatasetOptions defaults;
    EXPECT_EQ(d->options.split, defaults.split);
    EXPECT_EQ(d->options.packed, defaults.packed);
    EXPECT_EQ(d->options.num_samples, defaults.num_samples);
    EXPECT_EQ(d->options.seq_len, defaults.seq_len);
    if (!c.default_source.empty()) EXPECT_EQ(d->options.source, c.default_source);
  }
}

TEST(ConfigOptionsTableTest, AComponentsColumnsChooseItsKeys) {
  // special_tokens_path: the tokenizers with a special-token table to replace.
  for (const TokenizerComponent& c : TokenizerComponents()) {
    std::vector<std::string> keys = TokenizerKeys(c);
    EXPECT_EQ(std::count(keys.begin(), keys.end(), "special_tokens_path"), c.special_tokens != nullptr ? 1 : 0)
        << c.name;
  }
  // conversation_style: the datasets that take one, with their styles as its allowed values.
  for (const DatasetComponent& c : DatasetComponents()) {
    std::vector<FieldSpec> params = DatasetParams(c);
    auto style = std::find_if(params.begin(), params.end(),
                              [](const FieldSpec& f) { return f.name == "conversation_style"; });
    ASSERT_EQ(style != params.end(), !c.conversation_styles.empty()) << c.name;
    if (style != params.end()) EXPECT_EQ(style->choices, ConversationStyleNames(c.conversation_styles)) << c.name;
  }
  StatusOr<DatasetComponent> chat = FindDatasetComponent("chat_dataset");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(ConversationStyleNames(chat->conversation_styles), (std::vector<std::string>{"sharegpt", "openai"}));
  // The registry's order: what `tune validate` reports in and ApplySchemaDefaults writes in.
  EXPECT_EQ(DatasetKeys(*chat),
            (std::vector<std::string>{"_component_", "source", "split", "data_files", "data_dir", "filter_fn",
                                      "conversation_column", "conversation_style", "train_on_input",
                                      "masking_strategy", "new_system_prompt", "packed"}));
}

TEST(ConfigOptionsTableTest, BoundsComeFromTheSchema) {
  Config config = Parse(
      "t:\n"
      "  _component_: llama3_tokenizer\n"
      "  max_seq_len: 0\n"
      "u:\n"
      "  _component_: llama3_tokenizer\n"
      "  truncation_type: middle\n"
      "d:\n"
      "  _component_: alpaca_dataset\n"
      "  masking_strategy: train_on_input\n");
  EXPECT_EQ(TokenizerFromConfig(config, "t").status().message(),
            "cfg.yaml:3:16: key 't.max_seq_len': is 0; fix: set it to at least 1, or null");
  EXPECT_EQ(TokenizerFromConfig(config, "u").status().message(),
            "cfg.yaml:6:20: key 'u.truncation_type': \"middle\" is unknown; fix: use right or left");
  EXPECT_EQ(DatasetFromConfig(config, "d").status().message(),
            "cfg.yaml:9:21: key 'd.masking_strategy': masking_strategy \"train_on_input\" is unknown; fix: use "
            "train_on_all, train_on_assistant or train_on_last");
}

}  // namespace
}  // namespace tmx::data
