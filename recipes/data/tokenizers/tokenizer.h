// Tokenizer: the one interface every text tokenizer of tune-matrix implements (tiktoken BPE, SentencePiece,
// GPT-2 byte-level BPE, Hugging Face tokenizer.json). Torch-free.
//
// Contract (what the chat formats, datasets and `tune tokenize` rely on):
//   - Encode() turns UTF-8 text into ids. Text that a vocabulary cannot represent maps to the tokenizer's
//     unknown id or its bytes, as the reference Python implementation does. It throws TokenizeError only when the
//     tokenizer's own files make a text untokenizable (a pre-tokenizer pattern that hits PCRE2's match limit),
//     never for a text alone; ModelTokenizer::TokenizeMessages, the dataset loaders and `tune tokenize` turn it
//     into its Status. Whether special-token
//     text ("<|im_start|>") inside `text` becomes the special id is the family's rule, documented on each class
//     (tiktoken and SentencePiece: never; byte-level BPE: always, as torchtune's Qwen2Tokenizer does).
//   - Ids are exactly those of the reference Python implementation (tiktoken, sentencepiece, tokenizers);
//     the tests compare them with committed fixtures made by scripts/make_tokenizer_fixtures.py.
//   - bos/eos/pad ids are kNoId when the tokenizer has none.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tmx::data {

inline constexpr int64_t kNoId = -1;

// Why Encode could not tokenize a text (see the contract above): status() names the tokenizer's file, the problem
// and the fix. Caught where encoding meets a Status (ModelTokenizer::TokenizeMessages, the dataset loaders,
// `tune tokenize`), so it never reaches a user as a crash, nor a text as zero tokens.
class TokenizeError : public std::runtime_error {
 public:
  explicit TokenizeError(Status status) : std::runtime_error(status.message()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

struct EncodeOptions {
  // Prepend bos_id() / append eos_id() (nothing is added when the id is kNoId).
  bool add_bos = false;
  bool add_eos = false;
  // SentencePiece only: drop the whitespace marker a model would put in front of `text` (torchtune's
  // trim_leading_whitespace, used when a message continues a turn). Ignored by the other tokenizers.
  bool trim_leading_whitespace = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<int64_t> Encode(std::string_view text, const EncodeOptions& options) const = 0;
  std::vector<int64_t> Encode(std::string_view text, bool add_bos, bool add_eos) const {
    EncodeOptions options;
    options.add_bos = add_bos;
    options.add_eos = add_eos;
    return Encode(text, options);
  }

  // The text of `ids`. Special tokens are left out when `skip_special`. Ids outside the vocabulary are written
  // as "<|unk:ID|>" so a bug never loses them silently.
  virtual std::string Decode(const std::vector<int64_t>& ids, bool skip_special) const = 0;

  // How one id is shown to a person: the vocabulary's piece ("▁the", "Ġworld", "<|eot_id|>") or, for
  // byte-level vocabularies, the bytes it stands for when they are printable UTF-8.
  virtual std::string Piece(int64_t id) const = 0;

  // One more than the largest id this tokenizer can produce (base vocabulary and special tokens; SentencePiece:
  // the model's pieces, as torchtune counts them).
  virtual int64_t vocab_size() const = 0;
  int64_t bos_id() const { return bos_id_; }
  int64_t eos_id() const { return eos_id_; }
  int64_t pad_id() const { return pad_id_; }

  // The special tokens by text, e.g. {"<|eot_id|>": 128009}.
  const std::map<std::string, int64_t>& special_tokens() const { return special_tokens_; }

  // The id of special token `text`, or kNoId.
  int64_t SpecialId(const std::string& text) const {
    auto it = special_tokens().find(text);
    return it == special_tokens().end() ? kNoId : it->second;
  }

 protected:
  // Set by each implementation while it loads.
  int64_t bos_id_ = kNoId;
  int64_t eos_id_ = kNoId;
  int64_t pad_id_ = kNoId;
  std::map<std::string, int64_t> special_tokens_;
};

}  // namespace tmx::data
