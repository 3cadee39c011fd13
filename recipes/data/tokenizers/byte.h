// ByteTokenizer: every byte is its own token, so any string (UTF-8 or not) round-trips exactly and no
// vocabulary file is needed. The tokenizer of the tiny configs (tune_matrix.data.byte_tokenizer), whose
// models have a vocabulary of 512. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recipes/data/tokenizers/tokenizer.h"

namespace tmx::data {

// Ids 0..255 are the bytes themselves; 256..258 are BOS, EOS and PAD. Special-token text in the input is
// bytes like any other.
class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kBos = 256;
  static constexpr int64_t kEos = 257;
  static constexpr int64_t kPad = 258;
  static constexpr int64_t kVocabSize = 259;

  ByteTokenizer();
  using Tokenizer::Encode;
  std::vector<int64_t> Encode(std::string_view text, const EncodeOptions& options) const override;
  // Special tokens are dropped when `skip_special`, otherwise written as "<|bos|>", "<|eos|>" and "<|pad|>".
  std::string Decode(const std::vector<int64_t>& ids, bool skip_special) const override;
  std::string Piece(int64_t id) const override;
  int64_t vocab_size() const override { return kVocabSize; }
};

}  // namespace tmx::data
