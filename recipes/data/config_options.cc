#include "recipes/data/config_options.h"

#include <algorithm>
#include <optional>
#include <type_traits>
#include <variant>

#include "base/text.h"
#include "recipes/data/prompt_templates.h"

namespace tmx::data {
namespace {

// Reads the values of one component node, naming file:line in every error.
class NodeReader {
 public:
  NodeReader(const Config& config, std::string key) : config_(config), key_(std::move(key)) {}

  std::string Path(const std::string& name) const { return key_ + "." + name; }
  bool Has(const std::string& name) const { return config_.Find(Path(name)).IsDefined(); }
  bool IsNull(const std::string& name) const { return config_.IsNull(Path(name)); }

  Status Error(const std::string& name, const std::string& problem) const {
    return Status::InvalidArgument(config_.OriginOf(Path(name)).ToString() + ": key '" + Path(name) + "': " + problem);
  }

  // Every key of the node must be in `allowed`.
  Status CheckKeys(const std::string& component, const std::vector<std::string>& allowed) const {
    for (const auto& item : config_.Find(key_)) {
      std::string name = item.first.as<std::string>();
      if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
      std::string message =
          config_.KeyOriginOf(Path(name)).ToString() + ": key '" + Path(name) + "' is not an option of " + component;
      std::string close = ClosestMatch(name, allowed);
      if (!close.empty()) message += " (did you mean " + close + "?)";
      return Status::InvalidArgument(message + "; fix: use one of: " + JoinStrings(allowed, ", "));
    }
    return Status::OK();
  }

  // Read: the value at `name` into `out`, which keeps its value when the key is absent or null.
  Status Read(const std::string& name, std::string* out) const {
    if (IsNull(name)) return Status::OK();
    StatusOr<std::string> v = config_.GetString(Path(name), *out);
    if (!v.ok()) return v.status();
    *out = *v;
    return Status::OK();
  }

  Status Read(const std::string& name, bool* out) const {
    if (IsNull(name)) return Status::OK();
    StatusOr<bool> v = config_.GetBool(Path(name), *out);
    if (!v.ok()) return v.status();
    *out = *v;
    return Status::OK();
  }

  Status Read(const std::string& name, int64_t* out) const {
    if (IsNull(name)) return Status::OK();
    StatusOr<int64_t> v = config_.GetInt(Path(name), 0);
    if (!v.ok()) return v.status();
    *out = *v;
    return Status::OK();
  }

  template <typename T>
  Status Read(const std::string& name, std::optional<T>* out) const {
    if (IsNull(name)) return Status::OK();
    T value{};
    TM_RETURN_IF_ERROR(Read(name, &value));
    *out = value;
    return Status::OK();
  }

  // A string or a list of strings.
  Status Read(const std::string& name, std::vector<std::string>* out) const {
    if (IsNull(name)) return Status::OK();
    YAML::Node node = config_.Find(Path(name));
    if (node.IsScalar()) {
      *out = {node.as<std::string>()};
      return Status::OK();
    }
    if (!node.IsSequence()) return Error(name, "expected a string or a list of strings, got " + DescribeNode(node));
    out->clear();
    for (const auto& item : node) {
      if (!item.IsScalar()) return Error(name, "expected a list of strings, got an item " + DescribeNode(item));
      out->push_back(item.as<std::string>());
    }
    return Status::OK();
  }

  // A {string: string} mapping.
  Status Read(const std::string& name, std::map<std::string, std::string>* out) const {
    if (IsNull(name)) return Status::OK();
    YAML::Node node = config_.Find(Path(name));
    if (!node.IsMap()) return Error(name, "expected a mapping, got " + DescribeNode(node));
    for (const auto& item : node) {
      if (!item.second.IsScalar()) {
        return Error(
            name, "expected string values, got " + DescribeNode(item.second) + " for " + item.first.as<std::string>());
      }
      (*out)[item.first.as<std::string>()] = item.second.as<std::string>();
    }
    return Status::OK();
  }

  // torchtune's prompt_template: null, a dotpath, or {role: [prepend, append]}.
  Status Read(const std::string& name, PromptTemplateChoice* out) const {
    if (!Has(name)) return Status::OK();
    YAML::Node node = config_.Find(Path(name));
    if (node.IsNull()) {
      out->kind = PromptTemplateChoice::Kind::kNone;
    } else if (node.IsScalar()) {
      out->kind = PromptTemplateChoice::Kind::kNamed;
      out->dotpath = node.as<std::string>();
      StatusOr<PromptTemplate> named = PromptTemplate::FromName(out->dotpath);
      if (!named.ok()) return Error(name, named.status().message());
    } else if (node.IsMap()) {
      out->kind = PromptTemplateChoice::Kind::kCustom;
      for (const auto& item : node) {
        const YAML::Node& tags = item.second;
        if (!tags.IsSequence() || tags.size() != 2 || !tags[0].IsScalar() || !tags[1].IsScalar()) {
          return Error(name, "role " + item.first.as<std::string>() + " must map to [prepend, append], got " +
                                 DescribeNode(tags));
        }
        out->tags[item.first.as<std::string>()] = {tags[0].as<std::string>(), tags[1].as<std::string>()};
      }
    } else {
      return Error(name, "expected null, a template's dotpath or {role: [prepend, append]}, got " + DescribeNode(node));
    }
    return Status::OK();
  }

 private:
  const Config& config_;
  std::string key_;
};

// A key whose non-null value is refused (filter_fn: a Python callable), with the problem and its fix.
struct Refused {
  const char* problem;
};

// Where the reader stores a key's value: a member of the options struct, whose type says how the YAML is read,
// or nowhere (Refused).
template <typename Options>
using Target = std::variant<Refused, std::string Options::*, bool Options::*, int64_t Options::*,
                            std::optional<int64_t> Options::*, std::optional<bool> Options::*,
                            std::optional<std::string> Options::*, std::vector<std::string> Options::*,
                            ColumnMap Options::*, PromptTemplateChoice Options::*>;

// A member's value as YAML text, the way the schema writes defaults: "" for an empty string (no default), "null"
// for an unset optional and an empty list or map.
std::string YamlText(const std::string& v) { return v; }
std::string YamlText(bool v) { return v ? "True" : "False"; }
std::string YamlText(int64_t v) { return std::to_string(v); }
std::string YamlText(const PromptTemplateChoice&) { return ""; }  // absent: the builder's default
template <typename T>
std::string YamlText(const std::optional<T>& v) {
  return v ? YamlText(*v) : "null";
}
std::string YamlText(const std::vector<std::string>& v) { return v.empty() ? "null" : "[" + JoinStrings(v, ", ") + "]"; }
std::string YamlText(const ColumnMap& v) {
  if (v.empty()) return "null";
  std::vector<std::string> pairs;
  for (const auto& [from, to] : v) pairs.push_back(from + ": " + to);
  return "{" + JoinStrings(pairs, ", ") + "}";
}

// The schema's default of a key: its member's in-class default, so the options struct stays the one place
// defaults are written; "null" for a refused key.
template <typename Options>
std::string DefaultYaml(const Target<Options>& target) {
  static const Options defaults;
  return std::visit(
      [](auto member) -> std::string {
        if constexpr (std::is_same_v<decltype(member), Refused>) {
          return "null";
        } else {
          return YamlText(defaults.*member);
        }
      },
      target);
}

// One option of a component kind: a row of the tokenizer or dataset table.
template <typename Component, typename Options>
struct Option {
  // The key, type, doc, bounds and allowed values; default_yaml comes from the member (DefaultYaml).
  FieldSpec spec;
  Target<Options> target;
  // Which components take the key; null: every component of the kind.
  bool (*takes)(const Component&) = nullptr;
  // The parts of the spec that depend on the component (a builder's default, the file a path names).
  void (*adjust)(const Component&, FieldSpec*) = nullptr;
  // How the reader words a string outside spec.choices: "\"<value>\" <unknown>; fix: use a, b or c".
  const char* unknown = "is not supported";
  // The reader's check of a string value another module defines (instead of spec.choices): "" when valid.
  std::string (*problem)(const std::string& value) = nullptr;
  // Set: the reader refuses a required string left empty: "is required by <component>; fix: <required_fix>".
  const char* required_fix = nullptr;

  Option(FieldSpec f, Target<Options> t) : spec(std::move(f)), target(t) { spec.default_yaml = DefaultYaml(target); }
  Option For(bool (*which)(const Component&)) const { return With(&Option::takes, which); }
  Option Adjust(void (*how)(const Component&, FieldSpec*)) const { return With(&Option::adjust, how); }
  Option Unknown(const char* words) const { return With(&Option::unknown, words); }
  Option Problem(std::string (*check)(const std::string&)) const { return With(&Option::problem, check); }
  Option RequiredFix(const char* fix) const { return With(&Option::required_fix, fix); }

  bool Takes(const Component& c) const { return takes == nullptr || takes(c); }
  FieldSpec SpecFor(const Component& c) const {
    FieldSpec f = spec;
    if (adjust != nullptr) adjust(c, &f);
    return f;
  }

 private:
  template <typename M, typename V>
  Option With(M Option::*member, V value) const {
    Option copy = *this;
    copy.*member = value;
    return copy;
  }
};

using TokenizerOption = Option<TokenizerComponent, TokenizerOptions>;
using DatasetOption = Option<DatasetComponent, DatasetOptions>;

// A file name; null or absent: not given.
FieldSpec PathField(const char* name, const char* doc) { return Nullable(Field(name, FieldType::kString, "", doc)); }

// torchtune's prompt_template: null, a template's dotpath, or {role: [prepend, append]}.
std::string PromptTemplateProblem(const YAML::Node& v) {
  if (v.IsScalar()) {
    StatusOr<PromptTemplate> t = PromptTemplate::FromName(v.Scalar());
    return t.ok() ? "" : t.status().message();
  }
  if (v.IsMap()) {
    for (const auto& role : v) {
      const YAML::Node& tags = role.second;
      if (!tags.IsSequence() || tags.size() != 2 || !tags[0].IsScalar() || !tags[1].IsScalar()) {
        return "role " + role.first.as<std::string>("?") + " must map to [prepend, append]";
      }
    }
    return "";
  }
  return "expected null, a template's dotpath or {role: [prepend, append]}";
}

std::string StringOrStringsProblem(const YAML::Node& v) {
  if (v.IsScalar()) return "";
  if (v.IsSequence()) {
    for (const auto& item : v) {
      if (!item.IsScalar()) return "expected a list of file names";
    }
    return "";
  }
  return "expected a file name or a list of them";
}

std::string StringMapProblem(const YAML::Node& v) {
  if (!v.IsMap()) return "expected a mapping of column names, e.g. {input: question, output: answer}";
  for (const auto& kv : v) {
    if (!kv.second.IsScalar()) return "column " + kv.first.as<std::string>("?") + " must map to a column name";
  }
  return "";
}

std::string MaskingStrategyProblem(const std::string& value) {
  StatusOr<MaskingStrategy> masking = ParseMaskingStrategy(value);
  return masking.ok() ? "" : masking.status().message();
}

// Tokenizers: each option once. The order is the order of the keys in messages and of the registry's params.
const std::vector<TokenizerOption>& TokenizerTable() {
  using K = TokenizerFileKind;
  using O = TokenizerOptions;
  static const auto* table = new std::vector<TokenizerOption>{
      TokenizerOption(Required(PathField("path", "")), &O::path)
          .For([](const TokenizerComponent& c) {
            return c.kind != K::kNone && c.kind != K::kHfTokenizerJson && c.kind != K::kGpt2Bpe &&
                   c.shipped_path.empty();
          })
          .Adjust([](const TokenizerComponent& c, FieldSpec* f) {
            f->doc = c.kind == K::kTiktoken        ? "the tiktoken ranks file (original/tokenizer.model)"
                     : c.kind == K::kSentencePiece ? "the SentencePiece model (tokenizer.model)"
                                                   : "vocab.json";
          }),
      // GPT2BaseTokenizer's builders (Phi-4) name the same two files vocab_path and merges_path.
      TokenizerOption(Required(PathField("vocab_path", "vocab.json")), &O::path)
          .For([](const TokenizerComponent& c) { return c.kind == K::kGpt2Bpe; }),
      TokenizerOption(Required(PathField("merges_path", "merges.txt")), &O::merges_file)
          .For([](const TokenizerComponent& c) { return c.kind == K::kGpt2Bpe; }),
      TokenizerOption(Nullable(AtLeast(Field("max_seq_len", FieldType::kInt, "", "cut samples to this many tokens"), 1)),
                      &O::max_seq_len)
          .For([](const TokenizerComponent& c) { return c.kind != K::kHfTokenizerJson; })
          .Adjust([](const TokenizerComponent& c, FieldSpec* f) {
            if (c.chat_format == ChatFormat::kLlama4) f->default_yaml = "8192";  // llama4_transform's default
          }),
      TokenizerOption(AtLeast(Field("max_num_tiles", FieldType::kInt, "16",
                                    "tiles an image is cut into at most (images are refused here: text only)"),
                              1),
                      &O::max_num_tiles)
          .For([](const TokenizerComponent& c) { return c.chat_format == ChatFormat::kLlama4; }),
      TokenizerOption(AtLeast(Field("image_size", FieldType::kInt, "336",
                                    "pixels of an image tile (images are refused here: text only)"),
                              1),
                      &O::image_size)
          .For([](const TokenizerComponent& c) { return c.chat_format == ChatFormat::kLlama4; }),
      TokenizerOption(WithValueCheck(Nullable(Field("prompt_template", FieldType::kAny, "",
                                                    "null, a template's dotpath or {role: [prepend, append]}; "
                                                    "absent: the builder's default")),
                                     PromptTemplateProblem),
                      &O::prompt_template)
          .For([](const TokenizerComponent& c) { return c.kind != K::kHfTokenizerJson; }),
      TokenizerOption(Choices(Field("truncation_type", FieldType::kString, "",
                                    "keep the first (right) or last (left) tokens"),
                              {"right", "left"}),
                      &O::truncation_type)
          .For([](const TokenizerComponent& c) { return c.kind != K::kHfTokenizerJson; })
          .Unknown("is unknown"),
      TokenizerOption(Required(PathField("merges_file", "merges.txt")), &O::merges_file)
          .For([](const TokenizerComponent& c) { return c.kind == K::kByteBpe; }),
      TokenizerOption(PathField("special_tokens_path", "a tokenizer.json whose added tokens replace the family's"),
                      &O::special_tokens_path)
          .For([](const TokenizerComponent& c) { return c.special_tokens != nullptr; }),
      TokenizerOption(AtLeast(Field("image_size", FieldType::kInt, "", "pixels on a side of one image tile"), 1),
                      &O::image_size)
          .For([](const TokenizerComponent& c) { return c.images; }),
      TokenizerOption(Required(PathField("tokenizer_json_path", "the model's tokenizer.json")), &O::tokenizer_json_path)
          .For([](const TokenizerComponent& c) { return c.kind == K::kHfTokenizerJson; }),
      TokenizerOption(PathField("tokenizer_config_json_path", "the model's tokenizer_config.json (bos/eos)"),
                      &O::tokenizer_config_json_path)
          .For([](const TokenizerComponent& c) { return c.kind == K::kHfTokenizerJson; }),
      TokenizerOption(PathField("generation_config_path", "the model's generation_config.json (bos/eos)"),
                      &O::generation_config_path)
          .For([](const TokenizerComponent& c) { return c.kind == K::kHfTokenizerJson; }),
  };
  return *table;
}

bool IsRandomTokens(const DatasetComponent& c) { return c.kind == DatasetKind::kRandomTokens; }
bool ReadsRecords(const DatasetComponent& c) { return !IsRandomTokens(c); }
bool IsText(const DatasetComponent& c) { return c.kind == DatasetKind::kText; }
// Instruct, chat and preference datasets: records become messages, masked by train_on_input.
bool MakesMessages(const DatasetComponent& c) { return ReadsRecords(c) && !IsText(c); }
bool TakesConversationStyle(const DatasetComponent& c) { return !c.conversation_styles.empty(); }
bool IsMultimodal(const DatasetComponent& c) { return c.kind == DatasetKind::kMultimodal; }
// torchtune's multimodal builders take neither train_on_input nor masking_strategy.
bool TakesMasking(const DatasetComponent& c) { return MakesMessages(c) && !IsMultimodal(c); }

// Where the records come from.
std::vector<DatasetOption> SourceOptions() {
  using O = DatasetOptions;
  return {
      DatasetOption(Field("source", FieldType::kString, "",
                          "a hub id (read from $TUNE_MATRIX_DATA), a local folder, or json/jsonl/csv/text with "
                          "data_files"),
                    &O::source)
          .For(ReadsRecords)
          .Adjust([](const DatasetComponent& c, FieldSpec* f) {
            f->default_yaml = c.default_source;
            if (c.default_source.empty()) *f = Required(*f);
          })
          .RequiredFix("set it to a hub id or to json, jsonl, csv or text with data_files"),
      DatasetOption(Field("split", FieldType::kString, "", "the split, or a slice such as train[:10%]"), &O::split)
          .For(ReadsRecords),
      DatasetOption(WithValueCheck(Nullable(Field("data_files", FieldType::kAny, "", "local files for json/jsonl/csv/text")),
                                   StringOrStringsProblem),
                    &O::data_files)
          .For(ReadsRecords),
      DatasetOption(Nullable(Field("data_dir", FieldType::kString, "", "folder inside the source")), &O::data_dir)
          .For(ReadsRecords),
      DatasetOption(WithValueCheck(Nullable(Field("filter_fn", FieldType::kAny, "", "not supported")),
                                   [](const YAML::Node&) {
                                     return std::string(
                                         "a Python callable cannot run in tune-matrix; remove it and filter "
                                         "the data files instead");
                                   }),
                    Refused{"a Python callable is not supported; fix: remove it and filter the data files"})
          .For(ReadsRecords),
  };
}

// How records become text or messages, and which get loss.
std::vector<DatasetOption> MessageOptions() {
  using O = DatasetOptions;
  using S = MessageStyle;
  return {
      DatasetOption(Field("column", FieldType::kString, "", "the column holding the text"), &O::column).For(IsText),
      DatasetOption(Field("add_eos", FieldType::kBool, "", "end each sample with EOS"), &O::add_eos).For(IsText),
      DatasetOption(Required(Field("conversation_column", FieldType::kString, "", "the column holding the conversation")),
                    &O::conversation_column)
          .For(TakesConversationStyle),
      DatasetOption(Required(Field("conversation_style", FieldType::kString, "", "how turns are written")),
                    &O::conversation_style)
          .For(TakesConversationStyle)
          .Adjust([](const DatasetComponent& c, FieldSpec* f) {
            *f = Choices(*f, ConversationStyleNames(c.conversation_styles));
          }),
      DatasetOption(WithValueCheck(Nullable(Field("column_map", FieldType::kAny, "", "expected column -> the data's")),
                                   StringMapProblem),
                    &O::column_map)
          .For([](const DatasetComponent& c) { return MakesMessages(c) && !TakesConversationStyle(c); }),
      DatasetOption(Field("train_on_input", FieldType::kBool, "", "take loss on the prompt too"), &O::train_on_input)
          .For(TakesMasking)
          .Adjust([](const DatasetComponent& c, FieldSpec* f) {
            f->default_yaml = c.default_train_on_input ? "True" : "False";
          }),
      DatasetOption(Nullable(Choices(Field("masking_strategy", FieldType::kString, "",
                                           "which messages get loss; wins over train_on_input"),
                                     {"train_on_all", "train_on_assistant", "train_on_last"})),
                    &O::masking_strategy)
          .For(TakesMasking)
          .Problem(MaskingStrategyProblem),
      // Alpaca's and Stack Exchange's records have no place for a system message.
      DatasetOption(Nullable(Field("new_system_prompt", FieldType::kString, "", "a system message to prepend")),
                    &O::new_system_prompt)
          .For([](const DatasetComponent& c) {
            return MakesMessages(c) && c.style != S::kAlpaca && c.style != S::kStackExchangePaired;
          }),
  };
}

// Packing, and where a multimodal dataset's images are.
std::vector<DatasetOption> PackingAndImageOptions() {
  using O = DatasetOptions;
  return {
      DatasetOption(Field("packed", FieldType::kBool, "", "pack samples into max_seq_len-long sequences"), &O::packed)
          .For([](const DatasetComponent& c) { return ReadsRecords(c) && c.kind != DatasetKind::kPreference; }),
      DatasetOption(Nullable(Field("split_across_pack", FieldType::kBool, "", "let a sample continue in the next pack")),
                    &O::split_across_pack)
          .For(IsText),
      DatasetOption(Field("subset", FieldType::kString, "", "the Cauldron's subset (ocrvqa, ai2d, ...)"), &O::subset)
          .For([](const DatasetComponent& c) { return IsMultimodal(c) && c.image_column == "images"; }),
      DatasetOption(Nullable(Field("image_dir", FieldType::kString, "", "folder of the records' image paths")),
                    &O::image_dir)
          .For([](const DatasetComponent& c) { return IsMultimodal(c) && c.image_column == "image"; })
          .Adjust([](const DatasetComponent& c, FieldSpec* f) {
            if (c.style == MessageStyle::kShareGpt) f->default_yaml = "coco/train2017/";
          }),
  };
}

// The random-token dataset's.
std::vector<DatasetOption> RandomTokenOptions() {
  using O = DatasetOptions;
  return {
      DatasetOption(AtLeast(Field("num_samples", FieldType::kInt, "", "how many samples"), 1), &O::num_samples)
          .For(IsRandomTokens),
      DatasetOption(AtLeast(Field("seq_len", FieldType::kInt, "", "tokens in every sample"), 2), &O::seq_len)
          .For(IsRandomTokens),
      DatasetOption(Field("seed", FieldType::kInt, "", "seed of the token ids"), &O::random_seed).For(IsRandomTokens),
  };
}

// Datasets: each option once. The order is the order of the registry's params and of the keys in messages.
const std::vector<DatasetOption>& DatasetTable() {
  static const auto* table = [] {
    auto* all = new std::vector<DatasetOption>;
    for (auto part : {SourceOptions, MessageOptions, PackingAndImageOptions, RandomTokenOptions}) {
      std::vector<DatasetOption> some = part();
      all->insert(all->end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
    }
    return all;
  }();
  return *table;
}

StatusOr<std::string> ComponentOf(const Config& config, const std::string& key, const char* what) {
  YAML::Node node = config.Find(key);
  if (!node.IsDefined() || !node.IsMap()) {
    return Status::InvalidArgument(config.OriginOf(key).ToString() + ": key '" + key + "': expected a " + what +
                                   " component (a mapping with _component_), got " + DescribeNode(node));
  }
  return config.GetString(key + "._component_", "");
}

template <typename Component, typename Options>
std::vector<FieldSpec> Params(const std::vector<Option<Component, Options>>& table, const Component& c) {
  std::vector<FieldSpec> params;
  for (const auto& option : table) {
    if (option.Takes(c)) params.push_back(option.SpecFor(c));
  }
  return params;
}

template <typename Component, typename Options>
std::vector<std::string> Keys(const std::vector<Option<Component, Options>>& table, const Component& c) {
  std::vector<std::string> keys = {"_component_"};
  for (const FieldSpec& f : Params(table, c)) keys.push_back(f.name);
  return keys;
}

// The stored value's problem with the spec's bounds, allowed values or requirement; "" when it has none. Runs
// after every value is read, so it sees defaults too (an absent conversation_style is "").
template <typename Component, typename Options>
std::string BoundsProblem(const Option<Component, Options>& option, const FieldSpec& spec, const Component& c,
                          const Options& o) {
  return std::visit(
      [&](auto member) -> std::string {
        if constexpr (std::is_same_v<decltype(member), Refused>) {
          return "";
        } else {
          using V = std::decay_t<decltype(o.*member)>;
          std::optional<int64_t> number;
          std::optional<std::string> text;
          if constexpr (std::is_same_v<V, int64_t>) number = o.*member;
          if constexpr (std::is_same_v<V, std::optional<int64_t>>) number = o.*member;
          if constexpr (std::is_same_v<V, std::string>) text = o.*member;
          if constexpr (std::is_same_v<V, std::optional<std::string>>) text = o.*member;
          if (number && spec.min && *number < *spec.min) {
            std::string least = std::to_string(static_cast<int64_t>(*spec.min));
            return "is " + std::to_string(*number) + "; fix: " +
                   (spec.nullable ? "set it to at least " + least + ", or null" : "use " + least + " or more");
          }
          if (!text) return "";
          if (option.required_fix != nullptr && spec.required && text->empty()) {
            return "is required by " + c.name + "; fix: " + option.required_fix;
          }
          if (option.problem != nullptr) return option.problem(*text);
          if (!spec.choices.empty() &&
              std::find(spec.choices.begin(), spec.choices.end(), *text) == spec.choices.end()) {
            return "\"" + *text + "\" " + option.unknown + "; fix: use " + JoinAlternatives(spec.choices);
          }
          return "";
        }
      },
      option.target);
}

// Reads the node at `key` for component `c` through its kind's table: the keys it takes, refused values, every
// value into its member, then the bounds.
template <typename Component, typename Options>
Status ReadOptions(const Config& config, const std::string& key, const std::vector<Option<Component, Options>>& table,
                   const Component& c, Options* o) {
  NodeReader r(config, key);
  TM_RETURN_IF_ERROR(r.CheckKeys(c.name, Keys(table, c)));
  for (const auto& option : table) {
    const std::string& name = option.spec.name;
    const auto* refused = std::get_if<Refused>(&option.target);
    if (option.Takes(c) && refused != nullptr && !r.IsNull(name)) return r.Error(name, refused->problem);
  }
  for (const auto& option : table) {
    if (!option.Takes(c)) continue;
    TM_RETURN_IF_ERROR(std::visit(
        [&](auto member) -> Status {
          if constexpr (std::is_same_v<decltype(member), Refused>) {
            return Status::OK();
          } else {
            return r.Read(option.spec.name, &(o->*member));
          }
        },
        option.target));
  }
  for (const auto& option : table) {
    if (!option.Takes(c)) continue;
    std::string problem = BoundsProblem(option, option.SpecFor(c), c, *o);
    if (!problem.empty()) return r.Error(option.spec.name, problem);
  }
  return Status::OK();
}

}  // namespace

std::vector<FieldSpec> TokenizerParams(const TokenizerComponent& c) { return Params(TokenizerTable(), c); }
std::vector<FieldSpec> DatasetParams(const DatasetComponent& c) { return Params(DatasetTable(), c); }
std::vector<std::string> TokenizerKeys(const TokenizerComponent& c) { return Keys(TokenizerTable(), c); }
std::vector<std::string> DatasetKeys(const DatasetComponent& c) { return Keys(DatasetTable(), c); }

StatusOr<TokenizerConfig> TokenizerFromConfig(const Config& config, const std::string& key) {
  StatusOr<std::string> name = ComponentOf(config, key, "tokenizer");
  if (!name.ok()) return name.status();
  StatusOr<TokenizerComponent> c = FindTokenizerComponent(*name);
  if (!c.ok()) return Status::NotFound(config.OriginOf(key + "._component_").ToString() + ": " + c.status().message());
  TokenizerConfig out;
  out.component = c->dotpath;
  TM_RETURN_IF_ERROR(ReadOptions(config, key, TokenizerTable(), *c, &out.options));
  return out;
}

StatusOr<DatasetConfig> DatasetFromConfig(const Config& config, const std::string& key) {
  if (config.Find(key).IsSequence()) {
    return Status::InvalidArgument(config.OriginOf(key).ToString() + ": key '" + key +
                                   "': a list of datasets (ConcatDataset) is not supported; fix: use one dataset");
  }
  StatusOr<std::string> name = ComponentOf(config, key, "dataset");
  if (!name.ok()) return name.status();
  StatusOr<DatasetComponent> c = FindDatasetComponent(*name);
  if (!c.ok()) return Status::NotFound(config.OriginOf(key + "._component_").ToString() + ": " + c.status().message());
  DatasetConfig out;
  out.component = c->dotpath;
  TM_RETURN_IF_ERROR(ReadOptions(config, key, DatasetTable(), *c, &out.options));
  return out;
}

}  // namespace tmx::data
