// SentencePieceTokenizer: a SentencePiece model (.model protobuf) run by Debian's libsentencepiece, as
// torchtune's SentencePieceBaseTokenizer (torchtune.modules.transforms.tokenizers._sentencepiece) uses it for
// Llama 2, Mistral, Gemma and Phi-3.
//
// Encoding is the model's own (normalization, whitespace marker, byte fallback), with ids equal to the
// sentencepiece 0.2.x that torchtune's Python package installs: libsentencepiece (Debian's 0.1.97) normalizes and
// segments BPE models, and unigram models are segmented by UnigramSegmenter (sentencepiece_model.h), whose
// tie-breaking is 0.2.x's. Special-token text in the input is encoded as ordinary text. trim_leading_whitespace follows torchtune: when the model encodes whitespace, the
// text is encoded behind a "\n" prefix whose tokens are then dropped, so no "▁" is put in front of the text.
// Extra special tokens (Phi-3's <|user|> ...) can be given with ids above the model's vocabulary; they are known
// to Decode, Piece and special_tokens() but never produced by Encode.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "recipes/data/tokenizers/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tmx::data {

class UnigramSegmenter;

struct SentencePieceOptions {
  // The SentencePiece model file (tokenizer.model). Required.
  std::string path;
  // Special tokens beyond the model's pieces (Phi-3), by text.
  std::map<std::string, int64_t> extra_special_tokens;
  // Override the control ids bos_id(), eos_id() and pad_id() report; kNoId keeps the model's (llama2/mistral/
  // gemma set pad to 0, Phi-3 sets eos and pad to <|endoftext|>). Encode adds the model's own BOS and EOS
  // whatever these say, as torchtune's SentencePieceBaseTokenizer does: Phi-3's text ends with </s>, while its
  // chat format and stop token use eos_id() (<|endoftext|>).
  int64_t bos_id = kNoId;
  int64_t eos_id = kNoId;
  int64_t pad_id = kNoId;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  // NotFound when the file is missing; InvalidArgument "<path>: not a SentencePiece model (<reason>); fix: ..."
  // when libsentencepiece cannot load it.
  static StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(const SentencePieceOptions& options);
  ~SentencePieceTokenizer() override;

  std::vector<int64_t> Encode(std::string_view text, const EncodeOptions& options) const override;
  using Tokenizer::Encode;
  std::string Decode(const std::vector<int64_t>& ids, bool skip_special) const override;
  std::string Piece(int64_t id) const override;
  // The model's piece count (torchtune's vocab_size; extra special tokens are not counted, as in torchtune).
  int64_t vocab_size() const override;

  // Whether the model has pieces for whitespace (torchtune's encodes_whitespace).
  bool encodes_whitespace() const { return encodes_whitespace_; }

 private:
  SentencePieceTokenizer();
  std::vector<int64_t> EncodePlain(std::string_view text) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  // Unigram models only (null for BPE): the segmentation, and the byte each byte-fallback piece stands for
  // (-1 for other ids) to rebuild the normalized text from the library's pieces.
  std::unique_ptr<UnigramSegmenter> unigram_;
  std::vector<int> byte_of_id_;
  std::vector<int> id_of_byte_;  // byte fallback pieces by byte value, empty without byte fallback
  std::map<int64_t, std::string> extra_by_id_;
  bool encodes_whitespace_ = false;
  int64_t model_bos_id_ = kNoId;  // the model's own control ids, which Encode adds
  int64_t model_eos_id_ = kNoId;
  size_t newline_prefix_len_ = 0;
};

}  // namespace tmx::data
