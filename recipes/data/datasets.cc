#include "recipes/data/datasets.h"

#include <algorithm>
#include <random>

#include "base/text.h"
#include "recipes/data/components.h"
#include "recipes/data/multimodal.h"
#include "recipes/data/packing.h"
#include "recipes/data/sample_budget.h"
#include "recipes/data/samples.h"
#include "recipes/data/sources.h"

namespace tmx::data {
namespace {

const ConversationStyle* FindConversationStyle(const DatasetComponent& c, const std::string& name) {
  for (const ConversationStyle& s : c.conversation_styles) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

SourceOptions SourceFor(const DatasetComponent& c, const DatasetOptions& options) {
  SourceOptions source;
  source.source = options.source.empty() ? c.default_source : options.source;
  source.data_files = options.data_files;
  source.data_dir = options.data_dir.empty() ? c.default_data_dir : options.data_dir;
  source.split = options.split;
  return source;
}

StatusOr<MessageTransform> TransformFor(const DatasetComponent& c, const DatasetOptions& options) {
  MessageTransform t;
  t.style = c.style;
  t.column_map = options.column_map.empty() ? c.default_column_map : options.column_map;
  t.train_on_input = options.train_on_input.value_or(c.default_train_on_input);
  t.masking = MaskingFromTrainOnInput(t.train_on_input);
  if (options.masking_strategy) {
    StatusOr<MaskingStrategy> masking = ParseMaskingStrategy(*options.masking_strategy);
    if (!masking.ok()) return masking.status();
    t.masking = *masking;
  }
  t.new_system_prompt = options.new_system_prompt;
  if (!c.conversation_styles.empty()) {
    const ConversationStyle* style = FindConversationStyle(c, options.conversation_style);
    if (style == nullptr) {
      return Status::InvalidArgument("conversation_style \"" + options.conversation_style +
                                     "\" is not supported; fix: use " +
                                     JoinAlternatives(ConversationStyleNames(c.conversation_styles)));
    }
    t.style = style->style;
    t.column_map = {{style->column, options.conversation_column}};
    if (options.conversation_column.empty()) {
      return Status::InvalidArgument(
          "conversation_column is not set; fix: name the column that holds the "
          "conversation (e.g. conversations or messages)");
    }
  }
  return t;
}

StatusOr<std::vector<Record>> Records(const DatasetComponent& c, const DatasetOptions& options) {
  SourceOptions source = SourceFor(c, options);
  StatusOr<std::vector<Record>> records = LoadSource(source);
  if (!records.ok()) return records.status();
  if (records->empty()) {
    return Status::InvalidArgument(DescribeSource(source) + ": split " + options.split +
                                   " has no records; fix: check split and data_files");
  }
  return records;
}

StatusOr<Sample> TextSample(const DatasetOptions& options, const Record& record, const ModelTokenizer& tokenizer) {
  const nlohmann::json& v = record.value;
  if (!v.is_object() || !v.contains(options.column) || !v[options.column].is_string()) {
    return Status::InvalidArgument(record.where() + "record has no string \"" + options.column +
                                   "\" column; fix: set column to the column that holds the text");
  }
  std::vector<int64_t> tokens;
  try {
    tokens = tokenizer.Encode(v[options.column].get<std::string>(), true, options.add_eos);
  } catch (const TokenizeError& e) {
    return e.status().WithContext(record.where() + tokenizer.name());
  }
  if (tokenizer.max_seq_len()) {  // torchtune truncates text samples to max_seq_len - 1
    tokens = ModelTokenizer::Truncate<int64_t>(std::move(tokens), *tokenizer.max_seq_len() - 1, false, std::nullopt);
  }
  Sample s;
  s.labels = tokens;
  s.tokens = std::move(tokens);
  return s;
}

// random_tokens_dataset: ids from a 64-bit Mersenne Twister (reduced modulo the vocabulary, the same on every
// standard library), labels equal to the ids.
StatusOr<SftDataset> RandomTokens(const DatasetOptions& options) {
  if (options.vocab_size < 1) {
    return Status::InvalidArgument("needs the model's vocabulary size (vocab_size is " +
                                   std::to_string(options.vocab_size) + "); fix: load it through a recipe");
  }
  if (options.num_samples < 1 || options.seq_len < 2) {
    return Status::InvalidArgument("num_samples=" + std::to_string(options.num_samples) + " and seq_len=" +
                                   std::to_string(options.seq_len) + "; fix: num_samples >= 1 and seq_len >= 2");
  }
  TM_RETURN_IF_ERROR(SampleBudget(options.max_sample_bytes)
                         .Take(SaturatingProduct({options.num_samples, options.seq_len, 2 * static_cast<int64_t>(sizeof(int64_t))}),
                               "num_samples=" + std::to_string(options.num_samples) + " samples of seq_len=" +
                                   std::to_string(options.seq_len) + " ids and labels at 8 bytes each",
                               "lower num_samples or seq_len"));
  std::mt19937_64 rng(static_cast<uint64_t>(options.random_seed));
  SftDataset ds;
  ds.num_records = options.num_samples;
  ds.source = "random tokens (seed " + std::to_string(options.random_seed) + ")";
  ds.samples.resize(static_cast<size_t>(options.num_samples));
  for (Sample& s : ds.samples) {
    s.tokens.resize(static_cast<size_t>(options.seq_len));
    for (int64_t& id : s.tokens) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(options.vocab_size));
    s.labels = s.tokens;
  }
  return ds;
}

// torchtune.datasets.multimodal's records (multimodal.h), tokenized with their images.
StatusOr<SftDataset> MultimodalDataset(const DatasetComponent& c, DatasetOptions options,
                                       const ModelTokenizer& tokenizer) {
  if (options.image_size < 1) {
    return Status::FailedPrecondition("holds images, which only an image transform's model takes; fix: use "
                                      "torchtune.models.llama3_2_vision.llama3_2_vision_transform as the tokenizer");
  }
  if (options.packed) {
    return Status::InvalidArgument("packed: True is not supported for multimodal datasets (nor in torchtune); fix: "
                                   "set packed: False");
  }
  if (c.image_column == "images" && options.data_dir.empty() && options.source == c.default_source) {
    options.data_dir = options.subset;  // the Cauldron's subsets are folders of its repository
  }
  StatusOr<MessageTransform> transform = TransformFor(c, options);
  if (!transform.ok()) return transform.status();
  StatusOr<std::vector<Record>> records = Records(c, options);
  if (!records.ok()) return records.status();
  ImageTransformOptions images;
  images.tile_size = options.image_size;
  images.max_num_tiles = options.max_num_tiles;
  SftDataset ds;
  ds.num_records = static_cast<int64_t>(records->size());
  ds.source = DescribeSource(SourceFor(c, options));
  for (const Record& record : *records) {
    StatusOr<std::vector<Message>> messages =
        c.image_column == "images" ? CauldronMessages(record, options) : ToMessages(*transform, record);
    if (!messages.ok()) return messages.status();
    StatusOr<std::vector<ImageTiles>> tiles = AttachImages(c, options, images, record, &*messages);
    if (!tiles.ok()) return tiles.status();
    StatusOr<TokenizedMessages> tokenized = tokenizer.TokenizeMessages(*messages);
    if (!tokenized.ok()) return tokenized.status().WithContext(record.path + ":" + std::to_string(record.line));
    ds.samples.push_back(SampleFromMask(*tokenized));
    // Truncation may cut image tokens: keep the images whose tokens remain.
    const int64_t image_id = tokenizer.base().SpecialId("<|image|>");
    const auto kept = std::count(ds.samples.back().tokens.begin(), ds.samples.back().tokens.end(), image_id);
    tiles->resize(std::min<size_t>(tiles->size(), static_cast<size_t>(kept)));
    ds.samples.back().images = std::move(tiles).value();
  }
  return ds;
}

}  // namespace

Sample SampleFromMask(const TokenizedMessages& tokenized) {
  Sample s;
  s.tokens = tokenized.tokens;
  s.labels.reserve(tokenized.tokens.size());
  for (size_t i = 0; i < tokenized.tokens.size(); ++i) {
    s.labels.push_back(tokenized.mask[i] ? kIgnoreIndex : tokenized.tokens[i]);
  }
  return s;
}

std::vector<std::string> ConversationStyleNames(const std::vector<ConversationStyle>& styles) {
  std::vector<std::string> names;
  for (const ConversationStyle& s : styles) names.push_back(s.name);
  return names;
}

const std::vector<DatasetComponent>& DatasetComponents() {
  using K = DatasetKind;
  using S = MessageStyle;
  static const auto* components = [] {
    auto* list = new std::vector<DatasetComponent>{
        {"alpaca_dataset", "", K::kInstruct, "tatsu-lab/alpaca", S::kAlpaca, true, {}, ""},
        {"alpaca_cleaned_dataset", "", K::kInstruct, "yahma/alpaca-cleaned", S::kAlpaca, true, {}, ""},
        {"slimorca_dataset", "", K::kChat, "Open-Orca/SlimOrca-Dedup", S::kShareGpt, false, {}, ""},
        {"chat_dataset",
         "",
         K::kChat,
         "",
         S::kShareGpt,
         false,
         {},
         "",
         {{"sharegpt", S::kShareGpt, "conversations"}, {"openai", S::kOpenAi, "messages"}}},
        {"instruct_dataset", "", K::kInstruct, "", S::kInputOutput, false, {}, ""},
        {"samsum_dataset",
         "",
         K::kInstruct,
         "Samsung/samsum",
         S::kInputOutput,
         false,
         {{"input", "dialogue"}, {"output", "summary"}},
         ""},
        {"grammar_dataset", "", K::kInstruct, "liweili/c4_200m", S::kInputOutput, false, {}, ""},
        {"text_completion_dataset", "", K::kText, "", S::kInputOutput, false, {}, ""},
        {"hh_rlhf_helpful_dataset",
         "",
         K::kPreference,
         "RLHFlow/HH-RLHF-Helpful-standard",
         S::kChosenRejected,
         false,
         {},
         ""},
        {"stack_exchange_paired_dataset",
         "",
         K::kPreference,
         "lvwerra/stack-exchange-paired",
         S::kStackExchangePaired,
         false,
         {{"prompt", "question"}, {"chosen", "response_j"}, {"rejected", "response_k"}},
         "data/rl"},
    };
    for (DatasetComponent& c : *list) c.dotpath = "torchtune.datasets." + c.name;
    list->push_back({"the_cauldron_dataset", "torchtune.datasets.multimodal.the_cauldron_dataset", K::kMultimodal,
                     "HuggingFaceM4/the_cauldron", S::kInputOutput, false, {}, "", {}, "images"});
    list->push_back({"llava_instruct_dataset", "torchtune.datasets.multimodal.llava_instruct_dataset", K::kMultimodal,
                     "liuhaotian/LLaVA-Instruct-150K", S::kShareGpt, false, {}, "", {}, "image"});
    list->push_back({"vqa_dataset", "torchtune.datasets.multimodal.vqa_dataset", K::kMultimodal, "", S::kInputOutput,
                     false, {}, "", {}, "image"});
    list->push_back({"random_tokens_dataset", "tune_matrix.datasets.random_tokens_dataset", K::kRandomTokens, "",
                     S::kInputOutput, false, {}, ""});
    return list;
  }();
  return *components;
}

StatusOr<DatasetComponent> FindDatasetComponent(const std::string& component) {
  return FindComponent(DatasetComponents(), component, "dataset");
}

Status CheckDatasetSource(const std::string& component, const DatasetOptions& options) {
  StatusOr<DatasetComponent> c = FindDatasetComponent(component);
  if (!c.ok()) return c.status();
  if (c->kind == DatasetKind::kRandomTokens) return Status::OK();
  StatusOr<std::vector<SourceFile>> files = ResolveSource(SourceFor(*c, options));
  return files.ok() ? Status::OK() : files.status().WithContext(c->name);
}

StatusOr<SftDataset> LoadSftDataset(const std::string& component, const DatasetOptions& options,
                                    const ModelTokenizer& tokenizer) {
  StatusOr<DatasetComponent> c = FindDatasetComponent(component);
  if (!c.ok()) return c.status();
  auto fail = [&](const Status& s) { return s.WithContext(c->name); };
  if (c->kind == DatasetKind::kPreference) {
    return fail(
        Status::InvalidArgument("is a preference dataset (chosen/rejected pairs); fix: use it with a "
                                "preference recipe (LoadPreferenceDataset)"));
  }
  if (options.packed && !tokenizer.max_seq_len()) {
    return fail(
        Status::InvalidArgument("packed: True needs the tokenizer's max_seq_len; fix: set "
                                "tokenizer.max_seq_len"));
  }
  if (c->kind == DatasetKind::kMultimodal) {
    StatusOr<SftDataset> multimodal = MultimodalDataset(*c, options, tokenizer);
    return multimodal.ok() ? multimodal : fail(multimodal.status());
  }
  if (c->kind == DatasetKind::kRandomTokens) {
    StatusOr<SftDataset> random = RandomTokens(options);
    return random.ok() ? random : fail(random.status());
  }
  StatusOr<MessageTransform> transform = TransformFor(*c, options);
  if (!transform.ok()) return fail(transform.status());
  StatusOr<std::vector<Record>> records = Records(*c, options);
  if (!records.ok()) return fail(records.status());
  SftDataset ds;
  ds.num_records = static_cast<int64_t>(records->size());
  ds.source = DescribeSource(SourceFor(*c, options));
  SampleBudget budget(options.max_sample_bytes);
  const std::string kFewer = "train on fewer records (split: train[:N]) or a shorter max_seq_len";
  for (const Record& record : *records) {
    if (c->kind == DatasetKind::kText) {
      StatusOr<Sample> s = TextSample(options, record, tokenizer);
      if (!s.ok()) return fail(s.status());
      TM_RETURN_IF_ERROR(fail(budget.Take(SampleBytes(*s), record.where() + "its sample", kFewer)));
      ds.samples.push_back(std::move(s).value());
      continue;
    }
    StatusOr<std::vector<Message>> messages = ToMessages(*transform, record);
    if (!messages.ok()) return fail(messages.status());
    Status valid = ValidateMessages(*messages);
    if (!valid.ok()) return fail(Status::InvalidArgument(record.where() + valid.message()));
    StatusOr<TokenizedMessages> tokenized = tokenizer.TokenizeMessages(*messages);
    if (!tokenized.ok()) return fail(tokenized.status().WithContext(record.path + ":" + std::to_string(record.line)));
    // The sample is the tokens and one label each: counted before the labels are made.
    TM_RETURN_IF_ERROR(fail(budget.Take(2 * static_cast<int64_t>(tokenized->tokens.size() * sizeof(int64_t)),
                                        record.where() + "its sample", kFewer)));
    ds.samples.push_back(SampleFromMask(*tokenized));
  }
  if (options.packed) {
    PackOptions pack;
    pack.max_bytes = std::max<int64_t>(1, budget.left());
    pack.max_seq_len = *tokenizer.max_seq_len();
    pack.split_across_pack = options.split_across_pack.value_or(c->kind == DatasetKind::kText);
    StatusOr<std::vector<Sample>> packs = PackSamples(ds.samples, pack);
    if (!packs.ok()) return fail(packs.status());
    ds.samples = std::move(packs).value();
  }
  return ds;
}

StatusOr<std::vector<PreferenceSample>> LoadPreferenceDataset(const std::string& component,
                                                              const DatasetOptions& options,
                                                              const ModelTokenizer& tokenizer) {
  StatusOr<DatasetComponent> c = FindDatasetComponent(component);
  if (!c.ok()) return c.status();
  auto fail = [&](const Status& s) { return s.WithContext(c->name); };
  if (c->kind != DatasetKind::kPreference) {
    return fail(Status::InvalidArgument("is not a preference dataset; fix: use LoadSftDataset"));
  }
  if (options.packed) {
    return fail(
        Status::InvalidArgument("packed: True is not supported for preference datasets; fix: set packed: "
                                "False"));
  }
  StatusOr<MessageTransform> transform = TransformFor(*c, options);
  if (!transform.ok()) return fail(transform.status());
  StatusOr<std::vector<Record>> records = Records(*c, options);
  if (!records.ok()) return fail(records.status());
  std::vector<PreferenceSample> pairs;
  SampleBudget budget(options.max_sample_bytes);
  for (const Record& record : *records) {
    auto messages = ToPreferenceMessages(*transform, record);
    if (!messages.ok()) return fail(messages.status());
    PreferenceSample pair;
    for (auto [side, out] :
         {std::make_pair(&messages->first, &pair.chosen), std::make_pair(&messages->second, &pair.rejected)}) {
      StatusOr<TokenizedMessages> tokenized = tokenizer.TokenizeMessages(*side);
      if (!tokenized.ok()) return fail(tokenized.status().WithContext(record.path + ":" + std::to_string(record.line)));
      *out = SampleFromMask(*tokenized);
      TM_RETURN_IF_ERROR(fail(budget.Take(SampleBytes(*out), record.where() + "its pair",
                                          "train on fewer records (split: train[:N]) or a shorter max_seq_len")));
    }
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

StatusOr<DatasetOptions> SampleDatasetOptions(const std::string& component, DatasetOptions options) {
  StatusOr<DatasetComponent> c = FindDatasetComponent(component);
  if (!c.ok()) return c.status();
  if (c->kind == DatasetKind::kRandomTokens) return options;  // needs no data
  const std::string dir = SamplesDir() + "/datasets/";
  options.data_dir.clear();
  options.split = "train";
  options.source = "json";
  options.column_map.clear();
  if (c->style == MessageStyle::kAlpaca) {
    options.data_files = {dir + "alpaca_sample.json"};
  } else if (c->kind == DatasetKind::kMultimodal) {
    // Their images are PPM files under images/, named relative to the sample.
    options.image_dir.clear();
    options.data_files = {dir + (c->image_column == "images"           ? "cauldron_sample.json"
                                 : c->style == MessageStyle::kShareGpt ? "llava_sample.json"
                                                                       : "vqa_sample.json")};
  } else if (c->kind == DatasetKind::kChat) {
    // A conversation_style the dataset does not take gets the first one's sample.
    const ConversationStyle* style = FindConversationStyle(*c, options.conversation_style);
    if (style == nullptr && !c->conversation_styles.empty()) style = &c->conversation_styles.front();
    bool openai = style != nullptr && style->style == MessageStyle::kOpenAi;
    options.source = openai ? "jsonl" : "json";
    options.data_files = {dir + (openai ? "openai_sample.jsonl" : "sharegpt_sample.json")};
    if (style != nullptr) {
      options.conversation_style = style->name;
      options.conversation_column = style->column;
    }
  } else if (c->kind == DatasetKind::kText) {
    options.source = "text";
    options.column = "text";
    options.data_files = {dir + "text_sample.txt"};
  } else if (c->kind == DatasetKind::kInstruct) {
    options.data_files = {dir + "instruct_sample.json"};
    options.column_map = {{"input", "instruction"}, {"output", "response"}};
  } else if (c->style == MessageStyle::kChosenRejected) {
    options.data_files = {dir + "hh_rlhf_sample.json"};
  } else {
    options.data_files = {dir + "stack_exchange_paired_sample.json"};
    options.column_map = c->default_column_map;
  }
  return options;
}

}  // namespace tmx::data
