// Datasets: torchtune's dataset components (torchtune.datasets.*) as loaders that read a local source, turn each
// record into messages, tokenize them with a ModelTokenizer and give training samples. Torch-free.
//
// Wiring contract (for the registry): a config's `dataset:` node maps key by key onto DatasetOptions (torchtune's
// argument names; unknown keys are torchtune's **load_dataset_kwargs, of which data_files, data_dir and split are
// understood) and its `_component_` onto LoadSftDataset / LoadPreferenceDataset's `component` (dotpath or short
// name; DatasetComponents() says which of the two each is). The tokenizer's max_seq_len bounds every sample and is
// the pack length for `packed: True`. Missing data is a NotFound saying what is missing and where to put it
// (sources.h); SampleDatasetOptions gives the shipped sample of the same kind instead.
//
// | component                     | default source                   | records                 | train_on_input |
// |-------------------------------|----------------------------------|-------------------------|----------------|
// | alpaca_dataset                | tatsu-lab/alpaca                 | instruction/input/output| true           |
// | alpaca_cleaned_dataset        | yahma/alpaca-cleaned             | instruction/input/output| true           |
// | slimorca_dataset              | Open-Orca/SlimOrca-Dedup         | ShareGPT conversations  | false          |
// | chat_dataset                  | (required)                       | sharegpt or openai      | false          |
// | instruct_dataset              | (required)                       | input/output            | false          |
// | samsum_dataset                | Samsung/samsum                   | dialogue -> summary     | false          |
// | grammar_dataset               | liweili/c4_200m                  | input/output            | false          |
// | text_completion_dataset       | (required)                       | text column             | (all trained)  |
// | hh_rlhf_helpful_dataset       | RLHFlow/HH-RLHF-Helpful-standard | chosen/rejected lists   | false (pairs)  |
// | stack_exchange_paired_dataset | lvwerra/stack-exchange-paired    | question/response_j/_k  | false (pairs)  |
// | multimodal.the_cauldron_dataset | HuggingFaceM4/the_cauldron (subset) | images + texts [{user, assistant}] | false |
// | multimodal.llava_instruct_dataset | liuhaotian/LLaVA-Instruct-150K | image + ShareGPT conversations | false |
// | multimodal.vqa_dataset        | (required)                       | image, input, output    | false          |
//
// And one of tune-matrix's own, for benchmarks: tune_matrix.datasets.random_tokens_dataset gives num_samples
// samples of exactly seq_len token ids drawn from `seed`, uniform over the model's vocabulary, every position
// trained. It reads no files and no tokenizer output, so every batch has the same shape [batch_size, seq_len]
// (the step a benchmark compares with another implementation's).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "recipes/data/chat_format.h"
#include "recipes/data/message_transforms.h"
#include "recipes/data/sample.h"

namespace tmx::data {

// kMultimodal: records of text and images (torchtune.datasets.multimodal), for an image transform's model.
enum class DatasetKind { kInstruct, kChat, kText, kPreference, kRandomTokens, kMultimodal };

// A conversation_style value: how the turns of a record are written, and the column the style reads them from
// (the column_map key that conversation_column fills; also the shipped sample's column).
struct ConversationStyle {
  std::string name;  // "sharegpt"
  MessageStyle style;
  std::string column;  // "conversations"
};

// One row per dataset: what differs between datasets is a column here, so no code compares their names.
struct DatasetComponent {
  std::string name;     // "alpaca_cleaned_dataset"
  std::string dotpath;  // "torchtune.datasets.alpaca_cleaned_dataset"
  DatasetKind kind;
  std::string default_source;  // "" when the builder requires one
  MessageStyle style;
  bool default_train_on_input;
  ColumnMap default_column_map;
  std::string default_data_dir;
  // Non-empty: the config says how the conversation is written (conversation_column and conversation_style, one
  // of these) instead of `style` and a column_map (chat_dataset).
  std::vector<ConversationStyle> conversation_styles;
  // kMultimodal: the column holding the record's image (or list of images).
  std::string image_column;
};

// The names of `styles`: the values conversation_style takes.
std::vector<std::string> ConversationStyleNames(const std::vector<ConversationStyle>& styles);

struct DatasetOptions {
  // Hub id, local folder, or json/jsonl/csv/text with data_files (sources.h). Empty: the builder's default.
  std::string source;
  std::vector<std::string> data_files;
  // Empty: the builder's default (stack_exchange_paired: data/rl).
  std::string data_dir;
  std::string split = "train";
  // Expected column -> the record's column. Empty: the builder's default.
  ColumnMap column_map;
  // Unset: the builder's default (see the table). Ignored by text completion.
  std::optional<bool> train_on_input;
  // torchtune's masking_strategy (train_on_all, train_on_assistant, train_on_last); wins over train_on_input.
  std::optional<std::string> masking_strategy;
  std::optional<std::string> new_system_prompt;
  // chat_dataset: the column holding the conversation and its style, "sharegpt" or "openai". Required there.
  std::string conversation_column;
  std::string conversation_style;
  // text_completion_dataset: the text column, and whether to end each sample with EOS.
  std::string column = "text";
  bool add_eos = true;
  // Pack samples into tokenizer.max_seq_len-long packs (packing.h). Not for preference datasets.
  bool packed = false;
  // the_cauldron_dataset: the subset (a folder of the source). torchtune's default spells it "orcvqa", a subset
  // the Cauldron does not have; every config names one.
  std::string subset = "ocrvqa";
  // llava_instruct_dataset, vqa_dataset: the folder the records' image paths are relative to (empty: the
  // source's folder).
  std::string image_dir;
  // Multimodal datasets: the image transform's tile size (the tokenizer's image_size, set by the recipe; 0: no
  // image transform, which a multimodal dataset refuses) and most tiles an image.
  int64_t image_size = 0;
  int64_t max_num_tiles = 4;
  // Unset: true for text completion, false otherwise (torchtune's defaults).
  std::optional<bool> split_across_pack;
  // random_tokens_dataset: how many samples, each seq_len ids, drawn from random_seed below vocab_size (the
  // recipe sets it to the model's vocabulary; 0 is an error).
  int64_t num_samples = 64;
  int64_t seq_len = 256;
  int64_t random_seed = 0;
  int64_t vocab_size = 0;
  // The bytes the dataset's samples (and packs) may hold, checked before each is made (sample_budget.h); not a
  // config key. 0: the machine's memory.
  int64_t max_sample_bytes = 0;
};

const std::vector<DatasetComponent>& DatasetComponents();

// NotFound with a did-you-mean and the list for an unknown name.
StatusOr<DatasetComponent> FindDatasetComponent(const std::string& component);

struct SftDataset {
  std::vector<Sample> samples;
  int64_t num_records = 0;
  std::string source;  // DescribeSource(): where the records came from
};

// An instruct, chat or text dataset. Errors: FindDatasetComponent's, the source's (NotFound for missing data),
// InvalidArgument "<file>:<line>: ..." for a bad record, bad options (packed without max_seq_len, an unknown
// conversation_style), a dataset with no records, or samples that would pass max_sample_bytes (naming the bound,
// before the memory is allocated).
StatusOr<SftDataset> LoadSftDataset(const std::string& component, const DatasetOptions& options,
                                    const ModelTokenizer& tokenizer);

// Whether the data `component` reads with `options` is on this machine, checked without reading it:
// FindDatasetComponent's and ResolveSource's errors (NotFound for missing data); OK for random_tokens_dataset.
Status CheckDatasetSource(const std::string& component, const DatasetOptions& options);

// A preference dataset (hh_rlhf_helpful_dataset, stack_exchange_paired_dataset).
StatusOr<std::vector<PreferenceSample>> LoadPreferenceDataset(const std::string& component,
                                                              const DatasetOptions& options,
                                                              const ModelTokenizer& tokenizer);

// `options` pointed at the shipped sample of `component`'s kind (SamplesDir()/datasets): source, data_files,
// data_dir, split and column names replaced; masking, packing and the system prompt kept. random_tokens_dataset
// needs no data: its options come back unchanged.
StatusOr<DatasetOptions> SampleDatasetOptions(const std::string& component, DatasetOptions options);

// Labels from a chat format's mask: kIgnoreIndex where masked, else the token.
Sample SampleFromMask(const TokenizedMessages& tokenized);

}  // namespace tmx::data
