// ByteTokenizer: the built-in tokenizer. Every byte is its own token, so any string (UTF-8 or not)
// round-trips exactly and no vocabulary file is needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tmx::data {

// Ids 0..255 are the bytes themselves; 256..258 are the special tokens below.
class ByteTokenizer {
 public:
  static constexpr int64_t kBos = 256;
  static constexpr int64_t kEos = 257;
  static constexpr int64_t kPad = 258;
  static constexpr int64_t kVocabSize = 259;

  int64_t vocab_size() const { return kVocabSize; }
  int64_t bos_id() const { return kBos; }
  int64_t eos_id() const { return kEos; }
  int64_t pad_id() const { return kPad; }

  // One id per byte of `text`, optionally preceded by BOS and followed by EOS.
  std::vector<int64_t> Encode(const std::string& text, bool add_bos, bool add_eos) const;

  // The bytes of `ids`. Special tokens are dropped when `skip_special`, otherwise written as
  // "<|bos|>", "<|eos|>" and "<|pad|>". Ids outside the vocabulary (which only a bug produces) are
  // always written as "<|unk:ID|>" so they are never lost silently.
  std::string Decode(const std::vector<int64_t>& ids, bool skip_special = true) const;
};

}  // namespace tmx::data
