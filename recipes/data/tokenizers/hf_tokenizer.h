// Hugging Face tokenizer.json, as torchtune's HuggingFaceBaseTokenizer
// (torchtune.modules.transforms.tokenizers._hf_tokenizer) reads it with the `tokenizers` library.
//
// Supported: the byte-level BPE files Llama 3, Qwen and most recent models ship, and the character-level BPE with
// byte fallback of SentencePiece-converted files (Llama 2, Mistral, Gemma):
//   model:          {"type": "BPE"} with vocab, merges (either "a b" strings or ["a", "b"] pairs), unk_token,
//                   ignore_merges, byte_fallback, fuse_unk; not dropout, continuing_subword_prefix or
//                   end_of_word_suffix.
//   normalizer:     null, NFC, Prepend, Replace of a String, or a Sequence of those.
//   pre_tokenizer:  ByteLevel (use_regex: true uses GPT-2's pattern; add_prefix_space false), Split with a Regex
//                   pattern and behavior "Isolated", a Sequence of Split + ByteLevel(use_regex: false); without a
//                   ByteLevel step the model is character-level: null, or Split of a String MergedWithPrevious.
//   decoder:        (character-level) Replace of a String, ByteFallback, Fuse, Strip(start).
//   post_processor: null, ByteLevel, or TemplateProcessing whose "single" is special tokens around $A/$0.
//   added_tokens:   matched in the input and mapped to their ids (special or not).
// Anything else is an InvalidArgument naming the key, the value and what is supported, never a silent
// difference in ids.
//
// BOS/EOS: from tokenizer_config.json's bos_token/eos_token (a string or {"content": ...}) when they are tokens
// of the vocabulary, otherwise from generation_config.json's bos_token_id/eos_token_id (the first id of a list).
// Encode(add_bos) adds BOS unless the post-processor's encoding of "" holds it already, as torchtune 0.6.1's
// HuggingFaceBaseTokenizer does (hf_adds_bos), also when the text contains the BOS token's text (later torchtune
// commits skip BOS then); EOS likewise.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "recipes/data/tokenizers/byte_bpe.h"
#include "recipes/data/tokenizers/tokenizer.h"

namespace tmx::data {

struct HfTokenizerOptions {
  // tokenizer.json. Required.
  std::string path;
  // tokenizer_config.json and generation_config.json; at least one is required (as in torchtune).
  std::string tokenizer_config_path;
  std::string generation_config_path;
};

class HfTokenizer : public Tokenizer {
 public:
  static StatusOr<std::unique_ptr<HfTokenizer>> Load(const HfTokenizerOptions& options);

  std::vector<int64_t> Encode(std::string_view text, const EncodeOptions& options) const override;
  using Tokenizer::Encode;
  std::string Decode(const std::vector<int64_t>& ids, bool skip_special) const override {
    return bpe_->Decode(ids, skip_special);
  }
  std::string Piece(int64_t id) const override { return bpe_->Piece(id); }
  int64_t vocab_size() const override { return bpe_->vocab_size(); }

  // What `tokenizers`' Tokenizer.encode(text).ids returns: the post-processor's tokens included.
  std::vector<int64_t> EncodeRaw(std::string_view text) const;

 private:
  HfTokenizer() = default;
  static StatusOr<std::unique_ptr<HfTokenizer>> LoadUnchecked(const HfTokenizerOptions& options);
  std::unique_ptr<ByteBpeTokenizer> bpe_;
  std::vector<int64_t> prefix_;  // post-processor's special tokens before and after the text
  std::vector<int64_t> suffix_;
  bool adds_bos_ = false;  // the post-processor's tokens include BOS (EOS): Encode adds none
  bool adds_eos_ = false;
};

// The added tokens of a tokenizer.json ({"content": id} of "added_tokens"), as torchtune's
// parse_hf_tokenizer_json reads the special_tokens_path of its tokenizer builders.
StatusOr<std::map<std::string, int64_t>> ReadHfAddedTokens(const std::string& path);

}  // namespace tmx::data
