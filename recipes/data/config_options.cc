#include "recipes/data/config_options.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <type_traits>

#include "base/text.h"

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

  Status String(const std::string& name, std::string* out) const {
    if (IsNull(name)) return Status::OK();
    StatusOr<std::string> v = config_.GetString(Path(name), *out);
    if (!v.ok()) return v.status();
    *out = *v;
    return Status::OK();
  }

  Status Bool(const std::string& name, bool* out) const {
    if (IsNull(name)) return Status::OK();
    StatusOr<bool> v = config_.GetBool(Path(name), *out);
    if (!v.ok()) return v.status();
    *out = *v;
    return Status::OK();
  }

  template <typename T>
  Status Optional(const std::string& name, std::optional<T>* out) const {
    if (IsNull(name)) return Status::OK();
    T value{};
    Status s;
    if constexpr (std::is_same_v<T, bool>) {
      s = Bool(name, &value);
    } else if constexpr (std::is_same_v<T, int64_t>) {
      StatusOr<int64_t> v = config_.GetInt(Path(name), 0);
      if (!v.ok()) return v.status();
      value = *v;
    } else {
      s = String(name, &value);
    }
    if (!s.ok()) return s;
    *out = value;
    return Status::OK();
  }

  // A string or a list of strings.
  Status Strings(const std::string& name, std::vector<std::string>* out) const {
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
  Status Map(const std::string& name, std::map<std::string, std::string>* out) const {
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
  Status Template(const std::string& name, PromptTemplateChoice* out) const {
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

StatusOr<std::string> ComponentOf(const Config& config, const std::string& key, const char* what) {
  YAML::Node node = config.Find(key);
  if (!node.IsDefined() || !node.IsMap()) {
    return Status::InvalidArgument(config.OriginOf(key).ToString() + ": key '" + key + "': expected a " + what +
                                   " component (a mapping with _component_), got " + DescribeNode(node));
  }
  return config.GetString(key + "._component_", "");
}

}  // namespace

std::vector<std::string> TokenizerKeys(const TokenizerComponent& c) {
  if (c.kind == TokenizerFileKind::kNone) return {"_component_", "max_seq_len", "prompt_template", "truncation_type"};
  if (c.kind == TokenizerFileKind::kHfTokenizerJson) {
    return {"_component_", "tokenizer_json_path", "tokenizer_config_json_path", "generation_config_path"};
  }
  std::vector<std::string> keys = {"_component_", "path", "max_seq_len", "prompt_template", "truncation_type"};
  if (c.kind == TokenizerFileKind::kByteBpe) keys.push_back("merges_file");
  if (c.kind != TokenizerFileKind::kSentencePiece || c.name == "phi3_mini_tokenizer") {
    keys.push_back("special_tokens_path");
  }
  return keys;
}

std::vector<std::string> DatasetKeys(const DatasetComponent& c) {
  if (c.kind == DatasetKind::kRandomTokens) return {"_component_", "num_samples", "seq_len", "seed"};
  std::vector<std::string> keys = {"_component_", "source", "split", "filter_fn", "data_files", "data_dir"};
  auto add = [&](std::initializer_list<const char*> more) { keys.insert(keys.end(), more.begin(), more.end()); };
  if (c.kind == DatasetKind::kText) {
    add({"column", "add_eos", "packed", "split_across_pack"});
  } else if (c.name == "chat_dataset") {
    add({"conversation_column", "conversation_style", "train_on_input", "new_system_prompt", "packed",
         "masking_strategy"});
  } else {
    add({"column_map", "train_on_input", "masking_strategy"});
    if (c.kind != DatasetKind::kPreference) add({"packed"});
    if (c.style != MessageStyle::kAlpaca && c.style != MessageStyle::kStackExchangePaired) add({"new_system_prompt"});
  }
  return keys;
}

StatusOr<TokenizerConfig> TokenizerFromConfig(const Config& config, const std::string& key) {
  StatusOr<std::string> name = ComponentOf(config, key, "tokenizer");
  if (!name.ok()) return name.status();
  StatusOr<TokenizerComponent> c = FindTokenizerComponent(*name);
  if (!c.ok()) return Status::NotFound(config.OriginOf(key + "._component_").ToString() + ": " + c.status().message());
  NodeReader r(config, key);
  TM_RETURN_IF_ERROR(r.CheckKeys(c->name, TokenizerKeys(*c)));
  TokenizerConfig out;
  out.component = c->dotpath;
  TokenizerOptions& o = out.options;
  for (auto [field, target] : {std::make_pair("path", &o.path), std::make_pair("merges_file", &o.merges_file),
                               std::make_pair("special_tokens_path", &o.special_tokens_path),
                               std::make_pair("tokenizer_json_path", &o.tokenizer_json_path),
                               std::make_pair("tokenizer_config_json_path", &o.tokenizer_config_json_path),
                               std::make_pair("generation_config_path", &o.generation_config_path),
                               std::make_pair("truncation_type", &o.truncation_type)}) {
    TM_RETURN_IF_ERROR(r.String(field, target));
  }
  TM_RETURN_IF_ERROR(r.Optional("max_seq_len", &o.max_seq_len));
  if (o.max_seq_len && *o.max_seq_len < 1) {
    return r.Error("max_seq_len", "is " + std::to_string(*o.max_seq_len) + "; fix: set it to at least 1, or null");
  }
  if (o.truncation_type != "right" && o.truncation_type != "left") {
    return r.Error("truncation_type", "\"" + o.truncation_type + "\" is unknown; fix: use right or left");
  }
  TM_RETURN_IF_ERROR(r.Template("prompt_template", &o.prompt_template));
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
  NodeReader r(config, key);
  TM_RETURN_IF_ERROR(r.CheckKeys(c->name, DatasetKeys(*c)));
  if (!r.IsNull("filter_fn")) {
    return r.Error("filter_fn", "a Python callable is not supported; fix: remove it and filter the data files");
  }
  DatasetConfig out;
  out.component = c->dotpath;
  DatasetOptions& o = out.options;
  if (c->kind == DatasetKind::kRandomTokens) {
    for (auto [field, target, least] : {std::make_tuple("num_samples", &o.num_samples, int64_t{1}),
                                        std::make_tuple("seq_len", &o.seq_len, int64_t{2})}) {
      std::optional<int64_t> v;
      TM_RETURN_IF_ERROR(r.Optional(field, &v));
      if (v && *v < least) return r.Error(field, "is " + std::to_string(*v) + "; fix: use " + std::to_string(least) + " or more");
      if (v) *target = *v;
    }
    std::optional<int64_t> seed;
    TM_RETURN_IF_ERROR(r.Optional("seed", &seed));
    if (seed) o.random_seed = *seed;
    return out;
  }
  for (auto [field, target] :
       {std::make_pair("source", &o.source), std::make_pair("split", &o.split), std::make_pair("data_dir", &o.data_dir),
        std::make_pair("conversation_column", &o.conversation_column),
        std::make_pair("conversation_style", &o.conversation_style), std::make_pair("column", &o.column)}) {
    TM_RETURN_IF_ERROR(r.String(field, target));
  }
  TM_RETURN_IF_ERROR(r.Strings("data_files", &o.data_files));
  TM_RETURN_IF_ERROR(r.Map("column_map", &o.column_map));
  TM_RETURN_IF_ERROR(r.Optional("train_on_input", &o.train_on_input));
  TM_RETURN_IF_ERROR(r.Optional("masking_strategy", &o.masking_strategy));
  TM_RETURN_IF_ERROR(r.Optional("new_system_prompt", &o.new_system_prompt));
  TM_RETURN_IF_ERROR(r.Optional("split_across_pack", &o.split_across_pack));
  TM_RETURN_IF_ERROR(r.Bool("packed", &o.packed));
  TM_RETURN_IF_ERROR(r.Bool("add_eos", &o.add_eos));
  if (o.masking_strategy && !ParseMaskingStrategy(*o.masking_strategy).ok()) {
    return r.Error("masking_strategy", ParseMaskingStrategy(*o.masking_strategy).status().message());
  }
  if (c->name == "chat_dataset" && o.conversation_style != "sharegpt" && o.conversation_style != "openai") {
    return r.Error("conversation_style",
                   "\"" + o.conversation_style + "\" is not supported; fix: use sharegpt or openai");
  }
  if (c->default_source.empty() && o.source.empty()) {
    return r.Error("source", "is required by " + c->name +
                                 "; fix: set it to a hub id or to json, jsonl, csv or text "
                                 "with data_files");
  }
  return out;
}

}  // namespace tmx::data
