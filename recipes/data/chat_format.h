// ModelTokenizer: a Tokenizer plus its family's chat format, turning a conversation into tokens and a loss mask
// exactly as torchtune's model tokenizers' tokenize_messages do (their __call__, i.e. with the end tokens a
// training sample has). Torch-free.
//
// Formats (ChatFormat):
//   kLlama3           <|begin_of_text|>, then per message <|start_header_id|>role<|end_header_id|>\n\n, the
//                     stripped text, <|eot_id|> (or <|eom_id|>); <|end_of_text|> at the end (Llama3Tokenizer).
//   kLlama4           the same with Llama 4's <|header_start|>, <|header_end|>, <|eot|>, <|eom|> and no python tag
//                     (Llama4Tokenizer; text only: image content is refused before tokenizing).
//   kNoSpecialTokens  BOS at each turn start, the text parts encoded one by one, EOS after each assistant message
//                     (tokenize_messages_no_special_tokens: Llama 2, Mistral and Gemma, whose [INST] tags, if
//                     any, come from the prompt template).
//   kPhi3             <s><|user|>\n text <|end|>\n <|assistant|>\n ..., as torchtune 0.6.1 (the release mirrored
//                     for Phi-3; later commits differ): no <|endoftext|> after the answer, one BOS, and the same
//                     tokens with or without add_end_tokens.
//   kQwen2            ChatML: <|im_start|>role\n text <|im_end|>\n, the last assistant message left open, then
//                     EOS (<|im_end|>).
//   kQwen2_5          kQwen2 plus Qwen 2.5 / 3's tool-call and tool-response wrapping.
//   kPhi4             <|im_start|>role<|im_sep|> text <|im_end|> per message, as torchtune 0.6.1: no BOS, and no
//                     <|im_end|> after an assistant message, with or without add_end_tokens.
//   kNone             no chat format (the Hugging Face tokenizer.json wrapper: torchtune renders the model's Jinja
//                     chat template, which tune-matrix does not): TokenizeMessages is FailedPrecondition.
// mask[i] is true where token i gets no loss; the dataset turns it into labels.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "recipes/data/messages.h"
#include "recipes/data/prompt_templates.h"
#include "recipes/data/tokenizers/tokenizer.h"

namespace tmx::data {

enum class ChatFormat { kLlama3, kLlama4, kNoSpecialTokens, kPhi3, kQwen2, kQwen2_5, kPhi4, kNone };

// The special tokens of Llama 3's and Llama 4's turns (kLlama3, kLlama4; python: none in Llama 4's).
struct HeaderTokens {
  const char* start;
  const char* end;
  const char* eot;
  const char* eom;
  const char* python;
};
HeaderTokens HeaderTokensOf(ChatFormat format);

struct TokenizedMessages {
  std::vector<int64_t> tokens;
  std::vector<bool> mask;  // true: no loss on this token
};

struct ModelTokenizerOptions {
  // The longest tokenized conversation; longer ones are truncated (the last token then becomes EOS, as torchtune's
  // truncate does). Unset: no limit.
  std::optional<int64_t> max_seq_len;
  // Applied to the messages before tokenization. Unset: none.
  std::optional<PromptTemplate> prompt_template;
  // Truncation keeps the first max_seq_len tokens ("right", torchtune's default) or the last ones ("left").
  bool truncate_left = false;
};

class ModelTokenizer {
 public:
  // `name` is the builder's name for messages ("llama3_tokenizer"). REQUIRES: base != nullptr.
  ModelTokenizer(std::string name, std::unique_ptr<Tokenizer> base, ChatFormat format, ModelTokenizerOptions options);

  // The conversation's tokens and mask. `add_end_tokens` false leaves the last assistant turn open (inference).
  // Errors: the template's (Mistral and a system prompt), an unknown role for Phi-3, kNone, and the base
  // tokenizer's TokenizeError (a pre-tokenizer pattern that hit PCRE2's match limit).
  StatusOr<TokenizedMessages> TokenizeMessages(const std::vector<Message>& messages, bool add_end_tokens = true) const;

  // Throws TokenizeError (see tokenizer.h).
  std::vector<int64_t> Encode(std::string_view text, bool add_bos, bool add_eos) const {
    return base_->Encode(text, add_bos, add_eos);
  }
  const Tokenizer& base() const { return *base_; }
  const std::string& name() const { return name_; }
  ChatFormat format() const { return format_; }
  const std::optional<int64_t>& max_seq_len() const { return options_.max_seq_len; }
  int64_t pad_id() const { return base_->pad_id(); }
  int64_t bos_id() const { return base_->bos_id(); }
  int64_t eos_id() const { return base_->eos_id(); }

  // The ids that end a generated answer, as torchtune's tokenizers' stop_tokens: EOS; Llama 3's also <|eot_id|>
  // and <|eom_id|>; Qwen's also the padding id (<|endoftext|>). Ids the tokenizer lacks are left out.
  std::vector<int64_t> StopTokens() const;

  // torchtune's truncate(): the first (or, `left`, last) max_seq_len items; when `last` is given and the kept
  // items do not end with it, the last kept item is replaced by it.
  template <typename T>
  static std::vector<T> Truncate(std::vector<T> items, int64_t max_seq_len, bool left, std::optional<T> last);

 private:
  // Llama 3's and Llama 4's turns (kLlama3, kLlama4).
  TokenizedMessages Llama3(const std::vector<Message>& messages, bool add_end_tokens) const;
  TokenizedMessages NoSpecialTokens(const std::vector<Message>& messages, bool add_end_tokens) const;
  StatusOr<TokenizedMessages> Phi3(const std::vector<Message>& messages) const;
  TokenizedMessages Qwen(const std::vector<Message>& messages, bool add_end_tokens) const;
  TokenizedMessages Phi4(const std::vector<Message>& messages) const;
  std::vector<int64_t> Text(const std::string& text, bool trim_leading_whitespace = false) const;
  // Truncates both to max_seq_len, ending them with (eos, eos_mask) when given.
  void TruncateBoth(TokenizedMessages* out, std::optional<int64_t> eos, std::optional<bool> eos_mask) const;

  std::string name_;
  std::unique_ptr<Tokenizer> base_;
  ChatFormat format_;
  ModelTokenizerOptions options_;
};

}  // namespace tmx::data
