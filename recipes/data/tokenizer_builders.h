// Tokenizer builders: torchtune's tokenizer components, by name, with their options. Torch-free.
//
// Wiring contract (for the registry): a config's `tokenizer:` node maps key by key onto TokenizerOptions (the
// field names are torchtune's argument names) and its `_component_` onto BuildTokenizer's `component`, either the
// dotpath ("torchtune.models.llama3.llama3_tokenizer") or its last part ("llama3_tokenizer").
// TokenizerComponents() lists them with the kind of file each reads, so validation can check names without
// loading files; a missing file is a run-time NotFound that says which option names it and where it was looked
// for (see samples.h for the shipped stand-ins).
//
//   llama3_tokenizer     tiktoken ranks file (path); <|begin_of_text|> = 128000 .. 128255; Llama 3 headers
//   llama4_transform     tiktoken ranks file (path), o200k pre-tokenizer; <|begin_of_text|> = 200000 .. 202047;
//                        <|header_start|>role<|header_end|> turns ending <|eot|>; text only (max_num_tiles and
//                        image_size accepted, unused)
//   llama2_tokenizer     SentencePiece model (path); pad 0; [INST] via Llama2ChatTemplate (the default template)
//   mistral_tokenizer    SentencePiece model (path); pad 0; [INST] via MistralChatTemplate (the default template)
//   gemma_tokenizer      SentencePiece model (path); pad 0; no template by default
//   phi3_mini_tokenizer  SentencePiece model (path); <|endoftext|> = 32000 .. <|user|> = 32010; Phi-3 turns
//   qwen2_tokenizer      vocab.json (path) + merges_file; <|endoftext|> 151643, <|im_start|>, <|im_end|>; ChatML
//   qwen2_5_tokenizer    the same; plus tool, vision and fim tokens 151646 .. 151664; ChatML with tool calls
//   qwen3_tokenizer      the same; plus <tool_response>, </tool_response>, <think>, </think> .. 151668
//   phi4_tokenizer       vocab_path (vocab.json) + merges_path (merges.txt), read as torchtune's GPT2BaseTokenizer
//                        (no NFC, no added tokens in text); <|dummy_0|> 100256 .. <|dummy_87|> 100351, BOS
//                        <|endoftext|>, EOS <|im_end|>, pad <|dummy_85|>; <|im_start|>role<|im_sep|> turns
//   llama3_2_vision_transform  llama3_tokenizer's text side (<|image|> = 128256 marks an image) and the image
//                        tiles of image_size pixels (image_transform.h)
//   byte_tokenizer       no file (tune_matrix.data.byte_tokenizer): bytes 0-255, BOS 256, EOS 257, PAD 258;
//                        BOS/EOS turns like Llama 2's, no template (the tiny configs' tokenizer)
//   HuggingFaceBaseTokenizer  tokenizer_json_path (+ tokenizer_config_json_path / generation_config_path);
//                        tokenizer.json's added tokens; no chat format
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "recipes/data/chat_format.h"
#include "recipes/data/prompt_templates.h"

namespace tmx::data {

// The kind of file a tokenizer reads; each kind has a shipped sample (samples.h). kByteBpe is vocab.json (path) +
// merges.txt (merges_file) as Hugging Face and torchtune's Qwen2Tokenizer read them; kGpt2Bpe the same files as
// torchtune's GPT2BaseTokenizer reads them (byte_bpe.h's kTorchtuneGpt2Pattern and MergesLayout), named by its
// builders' arguments vocab_path and merges_path.
enum class TokenizerFileKind { kTiktoken, kSentencePiece, kByteBpe, kGpt2Bpe, kHfTokenizerJson, kNone };

// torchtune's prompt_template argument: the builder's default, null, a dotpath, or a {role: [prepend, append]} map.
struct PromptTemplateChoice {
  enum class Kind { kBuilderDefault, kNone, kNamed, kCustom };
  Kind kind = Kind::kBuilderDefault;
  std::string dotpath;        // kNamed
  PromptTemplate::Tags tags;  // kCustom
};

struct TokenizerOptions {
  // The tokenizer file: the tiktoken ranks file, the SentencePiece model, or vocab.json (byte-level BPE; Phi-4's
  // config key vocab_path).
  std::string path;
  // merges.txt (qwen2/2.5/3; Phi-4's config key merges_path). Required for those.
  std::string merges_file;
  // A tokenizer.json whose added_tokens replace the family's special tokens (llama3, phi3, qwen). Empty: the
  // family's own table.
  std::string special_tokens_path;
  // HuggingFaceBaseTokenizer's files (tokenizer_json_path required; one of the two configs required).
  std::string tokenizer_json_path;
  std::string tokenizer_config_json_path;
  std::string generation_config_path;
  // Longest tokenized sample; unset (torchtune's null) means no limit.
  std::optional<int64_t> max_seq_len;
  PromptTemplateChoice prompt_template;
  // "right" (default) or "left".
  std::string truncation_type = "right";
  // llama4_transform's tiles an image is cut into at most (accepted so torchtune's configs validate; only text
  // is tokenized there, and an image is refused).
  int64_t max_num_tiles = 16;
  // Image transforms: pixels on a side of one image tile. llama3_2_vision_transform's default is 560 (the
  // Instruct weights; 448 for the base ones); llama4_transform's schema writes its own (336), which changes
  // nothing there (text only).
  int64_t image_size = 560;
};

// The config keys of TokenizerOptions::path and ::merges_file for a kind: "path" and "merges_file", or kGpt2Bpe's
// "vocab_path" and "merges_path".
const char* PathKey(TokenizerFileKind kind);
const char* MergesKey(TokenizerFileKind kind);

// One row per tokenizer: what differs between tokenizers is a column here, so no code compares their names.
struct TokenizerComponent {
  std::string name;     // "llama3_tokenizer"
  std::string dotpath;  // "torchtune.models.llama3.llama3_tokenizer"
  TokenizerFileKind kind;
  // How a conversation is written around the turns (chat_format.h).
  ChatFormat chat_format = ChatFormat::kNone;
  // The prompt template used when the config leaves prompt_template out (torchtune's builder default); "": none.
  std::string default_prompt_template;
  // The family's special-token table. Set: a special_tokens_path (a tokenizer.json) may replace it, so the
  // tokenizer takes that key. Null: the file defines every token (or there is none), and the key is refused.
  std::map<std::string, int64_t> (*special_tokens)() = nullptr;
  // An image-and-text transform (torchtune's llama3_2_vision_transform): it also cuts images into tiles of
  // image_size pixels (recipes/data/image_transform.h); its text side is the row's tokenizer.
  bool images = false;
  // A tokenizer file shipped with tune-matrix (under SamplesDir()/tokenizers) that it always reads: the config
  // names no path. "": the config's path.
  std::string shipped_path;
};

// Every supported tokenizer component.
const std::vector<TokenizerComponent>& TokenizerComponents();

// The files `options` names that are set, as (option as `component`'s configs spell it, path): what the tokenizer
// reads.
std::vector<std::pair<std::string, std::string>> TokenizerFiles(const TokenizerComponent& component,
                                                                const TokenizerOptions& options);

// The component named `component` (dotpath or short name); NotFound with a did-you-mean and the list otherwise.
StatusOr<TokenizerComponent> FindTokenizerComponent(const std::string& component);

// Loads the files and builds the tokenizer. Errors: the component's (above), InvalidArgument for a missing
// required option ("<component>: path is not set; fix: ..."), a bad truncation_type or prompt template, and the
// file readers' NotFound/InvalidArgument (file, line, problem, fix).
StatusOr<std::unique_ptr<ModelTokenizer>> BuildTokenizer(const std::string& component, const TokenizerOptions& options);

// The special-token tables torchtune's tokenizers use by default.
std::map<std::string, int64_t> Llama3SpecialTokens();
std::map<std::string, int64_t> Llama4SpecialTokens();
std::map<std::string, int64_t> Phi3SpecialTokens();
std::map<std::string, int64_t> Qwen2SpecialTokens();
std::map<std::string, int64_t> Qwen2_5SpecialTokens();
std::map<std::string, int64_t> Qwen3SpecialTokens();
std::map<std::string, int64_t> Phi4SpecialTokens();
// Llama 3's table moved down to follow 256 byte tokens (<|begin_of_text|> 256, <|image|> 512): the tiny vision
// model's, whose 512-token vocabulary's first fusion token is <|image|> (tune_matrix.data.byte_vision_transform).
std::map<std::string, int64_t> ByteLlama3SpecialTokens();

}  // namespace tmx::data
