#include "recipes/data/tokenizer_builders.h"

#include "base/file_util.h"
#include "recipes/data/components.h"
#include "recipes/data/samples.h"
#include "recipes/data/tokenizers/byte.h"
#include "recipes/data/tokenizers/byte_bpe.h"
#include "recipes/data/tokenizers/hf_tokenizer.h"
#include "recipes/data/tokenizers/sentencepiece.h"
#include "recipes/data/tokenizers/tiktoken.h"

namespace tmx::data {
namespace {

constexpr const char* kLlama2Chat = "torchtune.models.llama2.Llama2ChatTemplate";
constexpr const char* kMistralChat = "torchtune.models.mistral.MistralChatTemplate";

// The builder's name is added by BuildTokenizer as context.
Status Require(const char* option, const std::string& value, const char* what) {
  if (value.empty()) {
    return Status::InvalidArgument(std::string(option) + " is not set; fix: set " + option + " to " + what);
  }
  if (!IsRegularFile(value)) {
    return Status::NotFound(std::string(option) + " " + value + " does not exist; fix: put " + what +
                            " there (e.g. "
                            "tune download <model> --output-dir <dir>), or set " +
                            option + " to where it is");
  }
  return Status::OK();
}

StatusOr<std::map<std::string, int64_t>> Specials(const TokenizerOptions& options,
                                                  std::map<std::string, int64_t> defaults) {
  if (options.special_tokens_path.empty()) return defaults;
  return ReadHfAddedTokens(options.special_tokens_path);
}

Status RequireSpecials(const std::map<std::string, int64_t>& specials, const std::vector<std::string>& names,
                       const std::string& source) {
  for (const std::string& name : names) {
    if (!specials.count(name)) {
      return Status::InvalidArgument("special token " + name + " is missing from " + source +
                                     "; fix: give the model's own tokenizer.json as special_tokens_path, or leave "
                                     "it null for the family's table");
    }
  }
  return Status::OK();
}

StatusOr<std::optional<PromptTemplate>> ResolveTemplate(const PromptTemplateChoice& choice,
                                                        const std::string& builder_default) {
  switch (choice.kind) {
    case PromptTemplateChoice::Kind::kNone:
      return std::optional<PromptTemplate>();
    case PromptTemplateChoice::Kind::kCustom:
      return std::optional<PromptTemplate>(PromptTemplate::Custom(choice.tags));
    case PromptTemplateChoice::Kind::kNamed:
    case PromptTemplateChoice::Kind::kBuilderDefault: {
      std::string name = choice.kind == PromptTemplateChoice::Kind::kNamed ? choice.dotpath : builder_default;
      if (name.empty()) return std::optional<PromptTemplate>();
      StatusOr<PromptTemplate> t = PromptTemplate::FromName(name);
      if (!t.ok()) return t.status();
      return std::optional<PromptTemplate>(std::move(t).value());
    }
  }
  return std::optional<PromptTemplate>();
}

// Llama 3's and Llama 4's tiktoken tokenizers: the pre-tokenizer and the turn and padding tokens of the format.
StatusOr<std::unique_ptr<Tokenizer>> Llama3Base(const TokenizerComponent& c, const TokenizerOptions& options) {
  TM_RETURN_IF_ERROR(Require("path", options.path, "the model's original/tokenizer.model (tiktoken ranks)"));
  StatusOr<std::map<std::string, int64_t>> specials = Specials(options, c.special_tokens());
  if (!specials.ok()) return specials.status();
  const bool llama4 = c.chat_format == ChatFormat::kLlama4;
  const HeaderTokens turns = HeaderTokensOf(c.chat_format);
  const char* pad = llama4 ? "<|finetune_right_pad|>" : "<|finetune_right_pad_id|>";
  std::vector<std::string> required = {"<|begin_of_text|>", "<|end_of_text|>", turns.start, turns.end,
                                       turns.eom,            turns.eot,          pad};
  if (turns.python != nullptr) required.push_back(turns.python);
  TM_RETURN_IF_ERROR(
      RequireSpecials(*specials, required, options.special_tokens_path.empty() ? "the table" : options.special_tokens_path));
  TiktokenOptions tk;
  tk.path = options.path;
  tk.pattern = llama4 ? kO200kPattern : kCl100kPattern;
  tk.special_tokens = *specials;
  tk.bos_id = specials->at("<|begin_of_text|>");
  tk.eos_id = specials->at("<|end_of_text|>");
  tk.pad_id = specials->at(pad);
  StatusOr<std::unique_ptr<TiktokenTokenizer>> tok = TiktokenTokenizer::Load(tk);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

StatusOr<std::unique_ptr<Tokenizer>> SentencePieceBase(const TokenizerComponent& c, const TokenizerOptions& options) {
  TM_RETURN_IF_ERROR(Require("path", options.path, "the model's tokenizer.model (SentencePiece)"));
  SentencePieceOptions sp;
  sp.path = options.path;
  if (c.special_tokens) {  // Phi-3's turn tokens, added above the SentencePiece vocabulary
    StatusOr<std::map<std::string, int64_t>> specials = Specials(options, c.special_tokens());
    if (!specials.ok()) return specials.status();
    TM_RETURN_IF_ERROR(
        RequireSpecials(*specials, {"<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"},
                        options.special_tokens_path.empty() ? "the table" : options.special_tokens_path));
    sp.extra_special_tokens = *specials;
    sp.eos_id = sp.pad_id = specials->at("<|endoftext|>");
  } else {
    sp.pad_id = 0;  // torchtune sets pad_id = 0 for Llama 2, Mistral and Gemma
  }
  StatusOr<std::unique_ptr<SentencePieceTokenizer>> tok = SentencePieceTokenizer::Load(sp);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

// Qwen (kByteBpe: Qwen2Tokenizer's reader) and Phi-4 (kGpt2Bpe: GPT2BaseTokenizer's, which normalizes nothing and
// finds no added tokens in text; its BOS is <|endoftext|> and its pad <|dummy_85|>, and Qwen has no BOS).
StatusOr<std::unique_ptr<Tokenizer>> ByteBpeBase(const TokenizerComponent& c, const TokenizerOptions& options) {
  const bool gpt2 = c.kind == TokenizerFileKind::kGpt2Bpe;
  TM_RETURN_IF_ERROR(Require(PathKey(c.kind), options.path, "the model's vocab.json"));
  TM_RETURN_IF_ERROR(Require(MergesKey(c.kind), options.merges_file, "the model's merges.txt"));
  StatusOr<std::map<std::string, int64_t>> specials = Specials(options, c.special_tokens());
  if (!specials.ok()) return specials.status();
  std::vector<std::string> needed = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  if (gpt2) needed.insert(needed.end(), {"<|im_sep|>", "<|dummy_85|>"});
  TM_RETURN_IF_ERROR(RequireSpecials(*specials, needed,
                                     options.special_tokens_path.empty() ? "the table" : options.special_tokens_path));
  ByteBpeFileOptions files;
  files.layout = gpt2 ? MergesLayout::kFirstAndUnterminatedLastSkipped : MergesLayout::kOptionalVersionLine;
  files.vocab_key = PathKey(c.kind);
  files.merges_key = MergesKey(c.kind);
  StatusOr<ByteBpeModel> model = LoadByteBpeFiles(options.path, options.merges_file, files);
  if (!model.ok()) return model.status();
  ByteBpeOptions bpe;
  bpe.model = std::move(model).value();
  bpe.source = options.path;
  bpe.pattern = gpt2 ? kTorchtuneGpt2Pattern : kQwen2Pattern;
  bpe.nfc = !gpt2;
  bpe.split_on_added_tokens = !gpt2;
  bpe.special_tokens = *specials;
  bpe.eos_id = specials->at("<|im_end|>");
  if (gpt2) bpe.bos_id = specials->at("<|endoftext|>");
  bpe.pad_id = specials->at(gpt2 ? "<|dummy_85|>" : "<|endoftext|>");
  StatusOr<std::unique_ptr<ByteBpeTokenizer>> tok = ByteBpeTokenizer::Create(std::move(bpe));
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

StatusOr<std::unique_ptr<Tokenizer>> HfBase(const TokenizerOptions& options) {
  TM_RETURN_IF_ERROR(Require("tokenizer_json_path", options.tokenizer_json_path, "the model's tokenizer.json"));
  HfTokenizerOptions hf;
  hf.path = options.tokenizer_json_path;
  hf.tokenizer_config_path = options.tokenizer_config_json_path;
  hf.generation_config_path = options.generation_config_path;
  StatusOr<std::unique_ptr<HfTokenizer>> tok = HfTokenizer::Load(hf);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

}  // namespace

const char* PathKey(TokenizerFileKind kind) { return kind == TokenizerFileKind::kGpt2Bpe ? "vocab_path" : "path"; }

const char* MergesKey(TokenizerFileKind kind) {
  return kind == TokenizerFileKind::kGpt2Bpe ? "merges_path" : "merges_file";
}

std::vector<std::pair<std::string, std::string>> TokenizerFiles(const TokenizerComponent& c,
                                                                const TokenizerOptions& o) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& [option, path] : std::vector<std::pair<std::string, const std::string*>>{
           {PathKey(c.kind), &o.path},
           {MergesKey(c.kind), &o.merges_file},
           {"special_tokens_path", &o.special_tokens_path},
           {"tokenizer_json_path", &o.tokenizer_json_path},
           {"tokenizer_config_json_path", &o.tokenizer_config_json_path},
           {"generation_config_path", &o.generation_config_path}}) {
    if (!path->empty()) files.emplace_back(option, *path);
  }
  return files;
}

std::map<std::string, int64_t> Llama3SpecialTokens() {
  std::map<std::string, int64_t> t = {
      {"<|begin_of_text|>", 128000},
      {"<|end_of_text|>", 128001},
      {"<|reserved_special_token_0|>", 128002},
      {"<|reserved_special_token_1|>", 128003},
      {"<|finetune_right_pad_id|>", 128004},
      {"<|step_id|>", 128005},
      {"<|start_header_id|>", 128006},
      {"<|end_header_id|>", 128007},
      {"<|eom_id|>", 128008},
      {"<|eot_id|>", 128009},
      {"<|python_tag|>", 128010},
      {"<|image|>", 128256},
      {"<|video|>", 128012},
      {"<|reserved_special_token_245|>", 128011},
  };
  const int64_t num_reserved = 257 - static_cast<int64_t>(t.size());  // torchtune's RESERVED_TOKENS
  for (int64_t i = 0; i < num_reserved; ++i) {
    t["<|reserved_special_token_" + std::to_string(2 + i) + "|>"] = 128013 + i;
  }
  return t;
}

std::map<std::string, int64_t> ByteLlama3SpecialTokens() {
  std::map<std::string, int64_t> t = Llama3SpecialTokens();
  for (auto& entry : t) entry.second -= 128000 - 256;
  return t;
}

// torchtune's LLAMA4_SPECIAL_TOKENS: named tokens from 200000, reserved ones filling the gaps and 201144 .. 202047.
std::map<std::string, int64_t> Llama4SpecialTokens() {
  std::map<std::string, int64_t> t;
  auto reserved = [&t](int64_t from, int64_t to, const std::string& group, int64_t first) {
    const std::string prefix = group.empty() ? "<|reserved_special_token_" : "<|" + group + "_reserved_special_token_";
    for (int64_t id = from; id < to; ++id) t[prefix + std::to_string(first + id - from) + "|>"] = id;
  };
  const char* named[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>",
                         "<|fim_suffix|>",    "<|header_start|>", "<|header_end|>", "<|eom|>",
                         "<|eot|>",           "<|step|>"};
  for (int64_t i = 0; i < 10; ++i) t[named[i]] = 200000 + i;
  reserved(200010, 200018, "text_post_train", 0);
  t["<|finetune_right_pad|>"] = 200018;
  reserved(200019, 200080, "text_post_train", 8);
  const std::pair<const char*, int64_t> vision[] = {
      {"<|image_start|>", 200080}, {"<|image_end|>", 200081},       {"<|vision_reserved_special_token_0|>", 200082},
      {"<|vision_reserved_special_token_1|>", 200083},               {"<|tile_x_separator|>", 200084},
      {"<|tile_y_separator|>", 200085}};
  for (const auto& [name, id] : vision) t[name] = id;
  reserved(200086, 200090, "vision", 2);
  t["<|image|>"] = 200090;
  t["<|vision_reserved_special_token_6|>"] = 200091;
  t["<|patch|>"] = 200092;
  reserved(200093, 201134, "vision", 7);
  reserved(201134, 201142, "reasoning", 0);
  t["<|reasoning_thinking_start|>"] = 201142;
  t["<|reasoning_thinking_end|>"] = 201143;
  reserved(201144, 202048, "", 0);
  return t;
}

std::map<std::string, int64_t> Phi3SpecialTokens() {
  return {{"<|endoftext|>", 32000},    {"<|assistant|>", 32001},    {"<|placeholder1|>", 32002},
          {"<|placeholder2|>", 32003}, {"<|placeholder3|>", 32004}, {"<|placeholder4|>", 32005},
          {"<|system|>", 32006},       {"<|end|>", 32007},          {"<|placeholder5|>", 32008},
          {"<|placeholder6|>", 32009}, {"<|user|>", 32010}};
}

std::map<std::string, int64_t> Qwen2SpecialTokens() {
  return {{"<|endoftext|>", 151643}, {"<|im_start|>", 151644}, {"<|im_end|>", 151645}};
}

std::map<std::string, int64_t> Qwen2_5SpecialTokens() {
  std::map<std::string, int64_t> t = Qwen2SpecialTokens();
  const char* more[] = {"<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",    "<|box_end|>",
                        "<|quad_start|>",       "<|quad_end|>",       "<|vision_start|>", "<|vision_end|>",
                        "<|vision_pad|>",       "<|image_pad|>",      "<|video_pad|>",    "<tool_call>",
                        "</tool_call>",         "<|fim_prefix|>",     "<|fim_middle|>",   "<|fim_suffix|>",
                        "<|fim_pad|>",          "<|repo_name|>",      "<|file_sep|>"};
  int64_t id = 151646;
  for (const char* token : more) t[token] = id++;
  return t;
}

std::map<std::string, int64_t> Qwen3SpecialTokens() {
  std::map<std::string, int64_t> t = Qwen2_5SpecialTokens();
  t["<tool_response>"] = 151665;
  t["</tool_response>"] = 151666;
  t["<think>"] = 151667;
  t["</think>"] = 151668;
  return t;
}

// torchtune.models.phi4._tokenizer.PHI4_SPECIAL_TOKENS: <|dummy_4|> .. <|dummy_87|> fill 100267 .. 100351 around
// <|endofprompt|> (100276).
std::map<std::string, int64_t> Phi4SpecialTokens() {
  std::map<std::string, int64_t> t = {
      {"<|dummy_0|>", 100256},    {"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258}, {"<|fim_middle|>", 100259},
      {"<|fim_suffix|>", 100260}, {"<|dummy_1|>", 100261},   {"<|dummy_2|>", 100262},    {"<|dummy_3|>", 100263},
      {"<|im_start|>", 100264},   {"<|im_end|>", 100265},    {"<|im_sep|>", 100266},     {"<|endofprompt|>", 100276},
  };
  int64_t dummy = 4;
  for (int64_t id = 100267; id < 100352; ++id) {
    if (id != 100276) t["<|dummy_" + std::to_string(dummy++) + "|>"] = id;
  }
  return t;
}

const std::vector<TokenizerComponent>& TokenizerComponents() {
  using K = TokenizerFileKind;
  using F = ChatFormat;
  // SentencePiece tokenizers without a special-token table have no turn tokens (kNoSpecialTokens); Llama 2 and
  // Mistral mark turns with their [INST] template instead.
  static const auto* components = new std::vector<TokenizerComponent>{
      {"llama3_tokenizer", "torchtune.models.llama3.llama3_tokenizer", K::kTiktoken, F::kLlama3, "",
       Llama3SpecialTokens},
      {"llama4_transform", "torchtune.models.llama4.llama4_transform", K::kTiktoken, F::kLlama4, "",
       Llama4SpecialTokens},
      {"llama3_2_vision_transform", "torchtune.models.llama3_2_vision.llama3_2_vision_transform", K::kTiktoken,
       F::kLlama3, "", Llama3SpecialTokens, /*images=*/true},
      {"llama2_tokenizer", "torchtune.models.llama2.llama2_tokenizer", K::kSentencePiece, F::kNoSpecialTokens,
       kLlama2Chat, nullptr},
      {"mistral_tokenizer", "torchtune.models.mistral.mistral_tokenizer", K::kSentencePiece, F::kNoSpecialTokens,
       kMistralChat, nullptr},
      {"gemma_tokenizer", "torchtune.models.gemma.gemma_tokenizer", K::kSentencePiece, F::kNoSpecialTokens, "",
       nullptr},
      {"phi3_mini_tokenizer", "torchtune.models.phi3.phi3_mini_tokenizer", K::kSentencePiece, F::kPhi3, "",
       Phi3SpecialTokens},
      {"qwen2_tokenizer", "torchtune.models.qwen2.qwen2_tokenizer", K::kByteBpe, F::kQwen2, "", Qwen2SpecialTokens},
      {"qwen2_5_tokenizer", "torchtune.models.qwen2_5.qwen2_5_tokenizer", K::kByteBpe, F::kQwen2_5, "",
       Qwen2_5SpecialTokens},
      {"qwen3_tokenizer", "torchtune.models.qwen3.qwen3_tokenizer", K::kByteBpe, F::kQwen2_5, "", Qwen3SpecialTokens},
      {"phi4_tokenizer", "torchtune.models.phi4.phi4_tokenizer", K::kGpt2Bpe, F::kPhi4, "", Phi4SpecialTokens},
      {"HuggingFaceBaseTokenizer", "torchtune.modules.transforms.tokenizers.HuggingFaceBaseTokenizer",
       K::kHfTokenizerJson, F::kNone, "", nullptr},
      {"byte_tokenizer", "tune_matrix.data.byte_tokenizer", K::kNone, F::kNoSpecialTokens, "", nullptr},
      // The tiny vision model's transform: llama3_2_vision_transform over byte tokens, with no file to fetch.
      {"byte_vision_transform", "tune_matrix.data.byte_vision_transform", K::kTiktoken, F::kLlama3, "",
       ByteLlama3SpecialTokens, /*images=*/true, "tiktoken_bytes.model"},
  };
  return *components;
}

StatusOr<TokenizerComponent> FindTokenizerComponent(const std::string& component) {
  return FindComponent(TokenizerComponents(), component, "tokenizer");
}

StatusOr<std::unique_ptr<ModelTokenizer>> BuildTokenizer(const std::string& component,
                                                         const TokenizerOptions& options) {
  StatusOr<TokenizerComponent> found = FindTokenizerComponent(component);
  if (!found.ok()) return found.status();
  const std::string& name = found->name;
  if (options.truncation_type != "right" && options.truncation_type != "left") {
    return Status::InvalidArgument(name + ": truncation_type \"" + options.truncation_type +
                                   "\" is unknown; fix: use right or left");
  }
  if (options.max_seq_len && *options.max_seq_len < 1) {
    return Status::InvalidArgument(name + ": max_seq_len is " + std::to_string(*options.max_seq_len) +
                                   "; fix: set it to at least 1, or null for no limit");
  }
  StatusOr<std::unique_ptr<Tokenizer>> base = Status::Internal("unreachable");
  TokenizerOptions shipped = options;
  if (!found->shipped_path.empty()) shipped.path = SamplesDir() + "/tokenizers/" + found->shipped_path;
  switch (found->kind) {
    case TokenizerFileKind::kTiktoken:
      base = Llama3Base(*found, shipped);
      break;
    case TokenizerFileKind::kSentencePiece:
      base = SentencePieceBase(*found, options);
      break;
    case TokenizerFileKind::kByteBpe:
    case TokenizerFileKind::kGpt2Bpe:
      base = ByteBpeBase(*found, options);
      break;
    case TokenizerFileKind::kHfTokenizerJson:
      base = HfBase(options);
      break;
    case TokenizerFileKind::kNone:
      base = std::unique_ptr<Tokenizer>(new ByteTokenizer());
      break;
  }
  if (!base.ok()) return base.status().WithContext(name);
  StatusOr<std::optional<PromptTemplate>> prompt_template =
      ResolveTemplate(options.prompt_template, found->default_prompt_template);
  if (!prompt_template.ok()) return prompt_template.status().WithContext(name);
  ModelTokenizerOptions model_options;
  model_options.max_seq_len = options.max_seq_len;
  model_options.prompt_template = std::move(prompt_template).value();
  model_options.truncate_left = options.truncation_type == "left";
  return std::make_unique<ModelTokenizer>(name, std::move(base).value(), found->chat_format, std::move(model_options));
}

}  // namespace tmx::data
