// TiktokenTokenizer: tiktoken's byte-pair encoding over a ranks file, as torchtune's TikTokenBaseTokenizer
// (torchtune.modules.transforms.tokenizers._tiktoken) drives it for Llama 3.
//
// File format (tiktoken's load_tiktoken_bpe): one token per line, "<base64 of the token's bytes> <rank>", the
// rank being the token's id. Blank lines are skipped. Every single byte must have a rank (byte-level BPE needs
// them to spell any text).
//
// Encoding is tiktoken's encode(text, allowed_special=set(), disallowed_special=()): special-token text in the
// input is encoded as ordinary text, never as the special id. As torchtune does, text is cut into chunks of at
// most 400,000 characters and runs of more than 25,000 whitespace or non-whitespace characters are split before
// the pattern is applied.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "recipes/data/tokenizers/tokenizer.h"
#include "recipes/data/tokenizers/unicode.h"
#include "recipes/data/tokenizers/word_cache.h"

namespace tmx::data {

struct TiktokenOptions {
  // The ranks file (e.g. Llama 3's original/tokenizer.model). Required.
  std::string path;
  // The pre-tokenizer pattern (PCRE2 / Python regex syntax). Required; Llama 3 uses kCl100kPattern.
  std::string pattern;
  // Special tokens and their ids (above the base vocabulary, e.g. 128000 for <|begin_of_text|>).
  std::map<std::string, int64_t> special_tokens;
  // Ids of the control tokens, kNoId when absent.
  int64_t bos_id = kNoId;
  int64_t eos_id = kNoId;
  int64_t pad_id = kNoId;
};

// The pattern Llama 3 (and cl100k_base) split text with before byte-pair merging.
extern const char* const kCl100kPattern;
extern const char* const kO200kPattern;  // Llama 4's

class TiktokenTokenizer : public Tokenizer {
 public:
  // NotFound/IoError for the file; InvalidArgument "<path>:<line>: <problem>; fix: ..." for a bad line, a
  // duplicate rank, a missing single byte, or a pattern that does not compile.
  // Encode throws TokenizeError naming the file and the pattern when the pattern hits PCRE2's match limit.
  static StatusOr<std::unique_ptr<TiktokenTokenizer>> Load(const TiktokenOptions& options);

  std::vector<int64_t> Encode(std::string_view text, const EncodeOptions& options) const override;
  using Tokenizer::Encode;
  std::string Decode(const std::vector<int64_t>& ids, bool skip_special) const override;
  std::string Piece(int64_t id) const override;
  int64_t vocab_size() const override { return vocab_size_; }

  // Size of the ranks file's vocabulary (torchtune's base_vocab_size).
  int64_t base_vocab_size() const { return static_cast<int64_t>(ranks_.size()); }

  // The bytes of `id` (base or special), or nullptr when `id` is in neither vocabulary.
  const std::string* TokenBytes(int64_t id) const;

 private:
  TiktokenTokenizer() = default;
  void EncodePiece(std::string_view piece, std::vector<int64_t>* ids) const;

  TiktokenOptions options_;
  std::unique_ptr<UnicodeRegex> regex_;
  std::unordered_map<std::string, int64_t> ranks_;
  std::unordered_map<int64_t, std::string> bytes_of_;  // base and special ids
  std::unordered_set<int64_t> special_ids_;
  int64_t vocab_size_ = 0;
  WordCache cache_;  // pieces already merged
};

// Standard base64 (RFC 4648, with padding). False when `text` is not valid base64.
bool DecodeBase64(std::string_view text, std::string* out);

}  // namespace tmx::data
