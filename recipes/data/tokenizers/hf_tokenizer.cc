#include "recipes/data/tokenizers/hf_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/file_util.h"
#include "base/input_file.h"
#include "base/json_io.h"

namespace tmx::data {
namespace {

using nlohmann::json;

StatusOr<json> ReadJson(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path, TokenizerInput());
  if (!text.ok()) return text.status();
  return ParseJsonText(path, *text);
}

// "a string", "an object", "null": the type of `value` as a message names it.
std::string TypeName(const json& value) {
  if (value.is_null()) return "null";
  return std::string(value.is_array() || value.is_object() ? "an " : "a ") + value.type_name();
}

Status Unsupported(const std::string& path, const std::string& key, const json& value, const std::string& supported) {
  std::string shown = JsonForMessage(value);
  return Status::InvalidArgument(path + ": " + key + " " + shown + " is not supported (supported: " + supported +
                                 "); fix: use torchtune's family tokenizer for this model, or a tokenizer.json "
                                 "with a byte-level BPE model");
}

// node[key] when present and not null, else `fallback` (nlohmann's value() throws on a null).
template <typename T>
T Get(const json& node, const char* key, T fallback) {
  if (!node.is_object() || !node.contains(key) || node[key].is_null()) return fallback;
  return node[key].get<T>();
}

std::string TypeOf(const json& node) { return Get<std::string>(node, "type", ""); }

// Steps of a normalizer node, flattening Sequences.
std::vector<json> Steps(const json& node, const char* list_key) {
  if (node.is_null()) return {};
  if (TypeOf(node) != "Sequence") return {node};
  std::vector<json> steps;
  for (const json& item : Get<json>(node, list_key, json::array())) steps.push_back(item);
  return steps;
}

// A {"String": s} pattern's string; "" for a Regex pattern.
std::string StringPattern(const json& step) {
  return Get<std::string>(Get<json>(step, "pattern", json::object()), "String", "");
}

Status ReadNormalizer(const std::string& path, const json& node, ByteBpeOptions* options) {
  const char* supported = "null, NFC, Prepend, Replace of a String, or a Sequence of those";
  options->nfc = false;
  for (const json& step : Steps(node, "normalizers")) {
    std::string type = TypeOf(step);
    if (type == "NFC") {
      options->nfc = true;
    } else if (type == "Prepend") {
      options->normalize.push_back({true, "", Get<std::string>(step, "prepend", "")});
    } else if (type == "Replace" && !StringPattern(step).empty()) {
      options->normalize.push_back({false, StringPattern(step), Get<std::string>(step, "content", "")});
    } else {
      return Unsupported(path, "normalizer", step, supported);
    }
  }
  return Status::OK();
}

Status ReadPreTokenizer(const std::string& path, const json& node, ByteBpeOptions* options) {
  using P = ByteBpeOptions::PreTokenizer;
  const char* supported =
      "null, ByteLevel, Split(Regex, Isolated), Sequence of Split + ByteLevel(use_regex false), Split(String, "
      "MergedWithPrevious)";
  options->byte_level = false;
  options->pre_tokenizer = P::kNone;
  bool have_pattern = false;
  for (const json& step : Steps(node, "pretokenizers")) {
    std::string type = TypeOf(step);
    std::string behavior = Get<std::string>(step, "behavior", "");
    bool regex = Get<json>(step, "pattern", json::object()).contains("Regex");
    if (type == "Split" && !have_pattern && regex && behavior == "Isolated" && !Get<bool>(step, "invert", false)) {
      options->pattern = Get<json>(step, "pattern", json::object())["Regex"].get<std::string>();
      options->pre_tokenizer = P::kRegex;
      have_pattern = true;
    } else if (type == "Split" && !have_pattern && !StringPattern(step).empty() && behavior == "MergedWithPrevious" &&
               !Get<bool>(step, "invert", false)) {
      options->split_string = StringPattern(step);
      options->pre_tokenizer = P::kMergedWithPrevious;
      have_pattern = true;
    } else if (type == "ByteLevel" && !options->byte_level && !Get<bool>(step, "add_prefix_space", false)) {
      options->byte_level = true;
      if (Get<bool>(step, "use_regex", true)) {
        if (have_pattern) return Unsupported(path, "pre_tokenizer", node, supported);
        options->pattern = kGpt2Pattern;
        options->pre_tokenizer = P::kRegex;
        have_pattern = true;
      }
    } else {
      return Unsupported(path, "pre_tokenizer", step, supported);
    }
  }
  if (options->byte_level && !have_pattern) return Unsupported(path, "pre_tokenizer", node, supported);
  return Status::OK();
}

// The decoder of a character-level model; a byte-level one decodes bytes whatever its decoder says.
Status ReadDecoder(const std::string& path, const json& node, ByteBpeOptions* options) {
  if (options->byte_level) return Status::OK();
  for (const json& step : Steps(node, "decoders")) {
    std::string type = TypeOf(step);
    if (type == "Replace" && !StringPattern(step).empty()) {
      options->decode_replace.emplace_back(StringPattern(step), Get<std::string>(step, "content", ""));
    } else if (type == "Strip" && Get<int64_t>(step, "stop", 0) == 0) {
      options->strip_content = Get<std::string>(step, "content", " ");
      options->strip_leading = static_cast<int>(Get<int64_t>(step, "start", 0));
    } else if (type != "ByteFallback" && type != "Fuse") {
      return Unsupported(path, "decoder", step, "Replace of a String, ByteFallback, Fuse, Strip(start)");
    }
  }
  return Status::OK();
}

Status ReadModel(const std::string& path, const json& model, ByteBpeOptions* options) {
  if (TypeOf(model) != "BPE") return Unsupported(path, "model.type", Get<json>(model, "type", json()), "BPE");
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null())
      return Unsupported(path, std::string("model.") + key, model[key], "null");
  }
  options->byte_fallback = Get<bool>(model, "byte_fallback", false);
  options->fuse_unk = Get<bool>(model, "fuse_unk", false);
  options->ignore_merges = Get<bool>(model, "ignore_merges", false);
  options->drop_unknown_bytes_first = true;
  const json vocab = Get<json>(model, "vocab", json::object());
  for (const auto& [token, id] : vocab.items()) {
    options->model.vocab.emplace(token, id.get<int64_t>());
  }
  for (const json& merge : Get<json>(model, "merges", json::array())) {
    if (merge.is_string()) {
      std::string text = merge.get<std::string>();
      size_t space = text.find(' ');
      if (space == std::string::npos) return Unsupported(path, "model.merges entry", merge, "\"left right\"");
      options->model.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2) {
      options->model.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      return Unsupported(path, "model.merges entry", merge, "\"left right\" or [\"left\", \"right\"]");
    }
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = options->model.vocab.find(model["unk_token"].get<std::string>());
    if (it != options->model.vocab.end()) options->unk_id = it->second;
  }
  return Status::OK();
}

Status ReadPostProcessor(const std::string& path, const json& node, const ByteBpeOptions& options,
                         std::vector<int64_t>* prefix, std::vector<int64_t>* suffix) {
  std::string type = TypeOf(node);
  if (node.is_null() || type == "ByteLevel") return Status::OK();
  if (type != "TemplateProcessing")
    return Unsupported(path, "post_processor", node, "null, ByteLevel, TemplateProcessing");
  bool after = false;
  for (const json& item : Get<json>(node, "single", json::array())) {
    if (item.contains("Sequence")) {
      after = true;
    } else if (item.contains("SpecialToken")) {
      std::string name = item["SpecialToken"].value("id", "");
      const json& specials = Get<json>(node, "special_tokens", json::object());
      std::vector<int64_t> ids;
      if (specials.contains(name)) {
        for (const json& id : specials[name].value("ids", json::array())) ids.push_back(id.get<int64_t>());
      } else if (options.special_tokens.count(name)) {
        ids.push_back(options.special_tokens.at(name));
      } else {
        return Unsupported(path, "post_processor special token", name, "tokens listed in its special_tokens");
      }
      (after ? suffix : prefix)->insert((after ? suffix : prefix)->end(), ids.begin(), ids.end());
    }
  }
  return Status::OK();
}

// bos_token / eos_token of tokenizer_config.json: a string or {"content": string}; "" when absent.
std::string ConfigToken(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const json& token = config[key];
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content") && token["content"].is_string()) return token["content"];
  return "";
}

// bos_token_id / eos_token_id of generation_config.json: a number, or a list whose first number is taken.
std::optional<int64_t> ConfigId(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& id = config[key];
  if (id.is_number_integer()) return id.get<int64_t>();
  if (id.is_array() && !id.empty() && id[0].is_number_integer()) return id[0].get<int64_t>();
  return std::nullopt;
}

}  // namespace

StatusOr<std::map<std::string, int64_t>> ReadHfAddedTokens(const std::string& path) {
  StatusOr<json> doc = ReadJson(path);
  if (!doc.ok()) return doc.status();
  std::map<std::string, int64_t> tokens;
  if (!doc->is_object() || !doc->contains("added_tokens") || !(*doc)["added_tokens"].is_array()) {
    return Status::InvalidArgument(path +
                                   ": has no \"added_tokens\" list; fix: set special_tokens_path to the "
                                   "model's tokenizer.json (or leave it null for the family's own special tokens)");
  }
  const json& added = (*doc)["added_tokens"];
  for (size_t i = 0; i < added.size(); ++i) {
    const json& token = added[i];
    if (!token.is_object() || !token.contains("content") || !token.contains("id")) {
      return Status::InvalidArgument(path + ": added token " + JsonForMessage(token) +
                                     " lacks \"content\" or \"id\"; fix: "
                                     "give every added token both");
    }
    std::string field = path + ": added_tokens[" + std::to_string(i) + "].";
    const char* fix = "; fix: set special_tokens_path to the model's own tokenizer.json";
    if (!token["content"].is_string()) {
      return Status::InvalidArgument(field + "content is " + TypeName(token["content"]) + ", expected a string" + fix);
    }
    if (!token["id"].is_number_integer() || token["id"].get<int64_t>() < 0) {
      return Status::InvalidArgument(field + "id is " + JsonForMessage(token["id"]) +
                                     ", expected a whole number >= 0" + fix);
    }
    tokens[token["content"].get<std::string>()] = token["id"].get<int64_t>();
  }
  return tokens;
}

StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const HfTokenizerOptions& options) {
  try {
    return LoadUnchecked(options);
  } catch (const json::exception& e) {  // a field of an unexpected type somewhere in the files
    return Status::InvalidArgument(options.path + ": unexpected content (" + std::string(e.what()) +
                                   "); fix: give the model's own tokenizer.json and config files");
  }
}

StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::LoadUnchecked(const HfTokenizerOptions& options) {
  if (options.tokenizer_config_path.empty() && options.generation_config_path.empty()) {
    return Status::InvalidArgument(options.path +
                                   ": neither tokenizer_config_json_path nor generation_config_path "
                                   "is set, so BOS and EOS are unknown; fix: set at least one of them");
  }
  StatusOr<json> doc = ReadJson(options.path);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object() || !doc->contains("model")) {
    return Status::InvalidArgument(options.path + ": has no \"model\"; fix: give a Hugging Face tokenizer.json");
  }
  ByteBpeOptions bpe;
  bpe.source = options.path;
  TM_RETURN_IF_ERROR(ReadModel(options.path, (*doc)["model"], &bpe));
  TM_RETURN_IF_ERROR(ReadNormalizer(options.path, Get<json>(*doc, "normalizer", json()), &bpe));
  TM_RETURN_IF_ERROR(ReadPreTokenizer(options.path, Get<json>(*doc, "pre_tokenizer", json()), &bpe));
  TM_RETURN_IF_ERROR(ReadDecoder(options.path, Get<json>(*doc, "decoder", json()), &bpe));
  for (const json& token : Get<json>(*doc, "added_tokens", json::array())) {
    std::string content = Get<std::string>(token, "content", "");
    bpe.special_tokens[content] = Get<int64_t>(token, "id", int64_t{0});
    if (!Get<bool>(token, "special", false)) bpe.non_special_added.insert(content);
  }
  std::unique_ptr<HfTokenizer> tok(new HfTokenizer());
  TM_RETURN_IF_ERROR(
      ReadPostProcessor(options.path, Get<json>(*doc, "post_processor", json()), bpe, &tok->prefix_, &tok->suffix_));
  auto token_id = [&](const std::string& text) -> int64_t {
    if (text.empty()) return kNoId;
    auto special = bpe.special_tokens.find(text);
    if (special != bpe.special_tokens.end()) return special->second;
    auto it = bpe.model.vocab.find(text);
    return it == bpe.model.vocab.end() ? kNoId : it->second;
  };
  bool have_bos = false, have_eos = false;
  if (!options.tokenizer_config_path.empty()) {
    StatusOr<json> config = ReadJson(options.tokenizer_config_path);
    if (!config.ok()) return config.status();
    tok->bos_id_ = token_id(ConfigToken(*config, "bos_token"));
    tok->eos_id_ = token_id(ConfigToken(*config, "eos_token"));
    tok->pad_id_ = token_id(ConfigToken(*config, "pad_token"));
    have_bos = tok->bos_id_ != kNoId;
    have_eos = tok->eos_id_ != kNoId;
  }
  if (!options.generation_config_path.empty()) {
    StatusOr<json> config = ReadJson(options.generation_config_path);
    if (!config.ok()) return config.status();
    std::optional<int64_t> bos = ConfigId(*config, "bos_token_id");
    std::optional<int64_t> eos = ConfigId(*config, "eos_token_id");
    std::optional<int64_t> pad = ConfigId(*config, "pad_token_id");
    if (!have_bos && bos) tok->bos_id_ = *bos, have_bos = true;
    if (!have_eos && eos) tok->eos_id_ = *eos, have_eos = true;
    if (tok->pad_id_ == kNoId && pad) tok->pad_id_ = *pad;
  }
  if (!have_bos || !have_eos) {
    return Status::InvalidArgument(options.path + ": could not infer the " + std::string(have_bos ? "EOS" : "BOS") +
                                   " id from tokenizer_config.json (bos_token/eos_token) or generation_config.json "
                                   "(bos_token_id/eos_token_id); fix: give the model's config files");
  }
  bpe.bos_id = tok->bos_id_;
  bpe.eos_id = tok->eos_id_;
  bpe.pad_id = tok->pad_id_;
  StatusOr<std::unique_ptr<ByteBpeTokenizer>> model = ByteBpeTokenizer::Create(std::move(bpe));
  if (!model.ok()) return model.status();  // names options.path (bpe.source)
  tok->bpe_ = std::move(model).value();
  tok->special_tokens_ = tok->bpe_->special_tokens();
  std::vector<int64_t> empty = tok->EncodeRaw("");  // the post-processor's tokens alone
  tok->adds_bos_ = std::find(empty.begin(), empty.end(), tok->bos_id_) != empty.end();
  tok->adds_eos_ = std::find(empty.begin(), empty.end(), tok->eos_id_) != empty.end();
  return tok;
}

std::vector<int64_t> HfTokenizer::EncodeRaw(std::string_view text) const {
  std::vector<int64_t> ids = prefix_;
  std::vector<int64_t> body = bpe_->Encode(text, EncodeOptions());
  ids.insert(ids.end(), body.begin(), body.end());
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

std::vector<int64_t> HfTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int64_t> ids = EncodeRaw(text);
  if (options.add_bos && !adds_bos_) ids.insert(ids.begin(), bos_id_);
  if (options.add_eos && !adds_eos_) ids.push_back(eos_id_);
  return ids;
}

}  // namespace tmx::data
