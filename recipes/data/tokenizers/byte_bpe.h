// ByteBpeTokenizer: GPT-2 style byte-level BPE (vocab.json + merges.txt), as torchtune's Qwen2Tokenizer
// (torchtune.models.qwen2._tokenizer) and Hugging Face's BPE model with a ByteLevel pre-tokenizer encode. With
// byte_level false it is Hugging Face's character-level BPE of SentencePiece-converted tokenizer.json files
// (Llama 2, Mistral, Gemma): symbols are characters, unknown ones fall back to "<0xAB>" byte tokens or unk.
//
// Encoding: optional NFC normalization; the text is split on the special (added) tokens, whose text becomes their
// id (unless split_on_added_tokens is false); every other span is cut by the pre-tokenizer pattern, each piece's UTF-8
// bytes are mapped to GPT-2's printable byte alphabet and merged by merge rank (lowest first, all occurrences left to
// right). A merged symbol missing from the vocabulary becomes unk_id (dropped when there is none, as Hugging Face
// does).
//
// Files: vocab.json is one JSON object {token: id}; merges.txt has one "left right" pair per line, optionally
// after a "#version: ..." first line (MergesLayout says how its first and last lines are read). Errors name the file
// and line.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/status.h"
#include "recipes/data/tokenizers/tokenizer.h"
#include "recipes/data/tokenizers/unicode.h"
#include "recipes/data/tokenizers/word_cache.h"

namespace tmx::data {

// The pre-tokenizer pattern of Qwen2, Qwen2.5 and Qwen3 (one digit per piece).
extern const char* const kQwen2Pattern;
// GPT-2's own pattern (Hugging Face ByteLevel pre-tokenizer with use_regex: true).
extern const char* const kGpt2Pattern;
// torchtune's GPT2BaseTokenizer (Phi-4): GPT-2's pattern as Python's re module runs it, with \w, \d and \s spelled as
// re defines them for str (\w: letters, numbers and '_', no combining marks; \s: also U+001C-U+001F and U+0085).
extern const char* const kTorchtuneGpt2Pattern;

struct ByteBpeModel {
  std::unordered_map<std::string, int64_t> vocab;           // byte-alphabet token -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
};

struct ByteBpeOptions {
  ByteBpeModel model;
  // The file the model was read from (vocab.json or tokenizer.json), named in errors.
  std::string source;
  // Symbols are the bytes in GPT-2's alphabet (true) or the characters of the text (false).
  bool byte_level = true;
  // Character-level: a character missing from the vocabulary becomes its UTF-8 bytes' "<0xAB>" tokens when they
  // all exist (byte_fallback), else unk_id; consecutive unknowns give one unk_id when fuse_unk.
  bool byte_fallback = false;
  bool fuse_unk = false;
  // Pre-tokenizer: kRegex splits by `pattern` (each match a piece); kNone keeps each span whole;
  // kMergedWithPrevious ends a piece after each occurrence of `split_string`.
  enum class PreTokenizer { kRegex, kNone, kMergedWithPrevious };
  PreTokenizer pre_tokenizer = PreTokenizer::kRegex;
  // Pre-tokenizer pattern (PCRE2 / Python regex syntax).
  std::string pattern = kQwen2Pattern;
  std::string split_string;
  // Normalizer steps after NFC, applied to each span between added tokens, in order: Prepend (a non-empty
  // first) and Replace (from -> to).
  struct NormalizeStep {
    bool prepend = false;
    std::string from, to;
  };
  std::vector<NormalizeStep> normalize;
  // Decoder (character-level): "<0xAB>" tokens become bytes (byte_fallback); then these replacements; then
  // strip_leading copies of strip_content from the start (Hugging Face's Strip decoder).
  std::vector<std::pair<std::string, std::string>> decode_replace;
  std::string strip_content;
  int strip_leading = 0;
  // Apply Unicode NFC before splitting (Qwen2 and tokenizer.json files with an NFC normalizer do).
  bool nfc = true;
  // Hugging Face's ignore_merges: a piece that is a whole vocabulary entry is taken as is, unmerged.
  bool ignore_merges = false;
  // Hugging Face's BPE: a byte whose symbol is not in the vocabulary is dropped (or becomes unk_id) before merging,
  // so its neighbours can merge. torchtune's Qwen2Tokenizer (false) keeps it in place, where it blocks merges, and
  // drops it afterwards. The two differ only for vocabularies that lack some bytes.
  bool drop_unknown_bytes_first = false;
  // Added tokens: their ids decode to their text, and count in vocab_size.
  std::map<std::string, int64_t> special_tokens;
  // Their text in the input becomes their id (true), or is ordinary text (false: torchtune's GPT2BaseTokenizer,
  // whose encode knows no added tokens, so "<|im_start|>" in a message is encoded byte by byte).
  bool split_on_added_tokens = true;
  // Added tokens that are not special (kept by Decode even when skip_special). Subset of special_tokens' keys.
  std::unordered_set<std::string> non_special_added;
  int64_t unk_id = kNoId;
  int64_t bos_id = kNoId;
  int64_t eos_id = kNoId;
  int64_t pad_id = kNoId;
};

// How a reader takes merges.txt's first and last lines.
enum class MergesLayout {
  // Hugging Face's and torchtune's Qwen2Tokenizer: a first line starting "#version:" is skipped; every other
  // non-blank line is a merge.
  kOptionalVersionLine,
  // torchtune's GPT2BaseTokenizer (Phi-4) reads text.split("\n")[1:-1]: the first line is never a merge (so a file
  // without a "#version:" line loses its first merge), nor is a last line that no '\n' ends.
  kFirstAndUnterminatedLastSkipped,
};

// How LoadByteBpeFiles reads the files, and the config keys that name them (in the fix of an error, which says
// where the other file goes).
struct ByteBpeFileOptions {
  MergesLayout layout = MergesLayout::kOptionalVersionLine;
  std::string vocab_key = "path";
  std::string merges_key = "merges_file";
};

// Reads vocab.json and merges.txt. NotFound/IoError for a file; InvalidArgument "<file>:<line>: ..." for bad
// content (not a JSON object of whole-number ids, a merge line without exactly two symbols).
StatusOr<ByteBpeModel> LoadByteBpeFiles(const std::string& vocab_path, const std::string& merges_path,
                                        const ByteBpeFileOptions& files = {});

class ByteBpeTokenizer : public Tokenizer {
 public:
  // InvalidArgument, naming `source`, when an id of the vocabulary or of an added token is outside 0..INT32_MAX,
  // when the pattern does not compile, or when a byte-level vocabulary without
  // byte fallback lacks the token of a printable ASCII byte or the space (0x20-0x7E; not GPT-2's byte alphabet:
  // that text would be dropped, leaving a sample only its template tokens).
  // Encode throws TokenizeError naming `source` and the pattern when the pattern hits PCRE2's match limit.
  static StatusOr<std::unique_ptr<ByteBpeTokenizer>> Create(ByteBpeOptions options);

  std::vector<int64_t> Encode(std::string_view text, const EncodeOptions& options) const override;
  using Tokenizer::Encode;
  std::string Decode(const std::vector<int64_t>& ids, bool skip_special) const override;
  std::string Piece(int64_t id) const override;
  int64_t vocab_size() const override { return vocab_size_; }

  // Ids of `text` without special-token matching, normalization, BOS or EOS: what one pre-tokenized span gives.
  void EncodeOrdinary(std::string_view text, std::vector<int64_t>* ids) const;

 private:
  ByteBpeTokenizer() = default;
  std::vector<int64_t> EncodeWord(const std::string& word) const;
  std::vector<std::string> InitialSymbols(const std::string& word) const;

  ByteBpeOptions options_;
  std::unique_ptr<UnicodeRegex> regex_;
  std::unordered_map<std::string, int64_t> merge_rank_;  // "left right" -> rank
  std::unordered_map<int64_t, std::string> token_of_;    // id -> byte-alphabet token or added token text
  std::unordered_set<int64_t> added_ids_;
  std::vector<std::pair<std::string, int64_t>> specials_longest_first_;
  int64_t vocab_size_ = 0;
  WordCache cache_;
};

// Hugging Face's Replace of a String (normalizer and decoder): each non-overlapping occurrence of `from`, found
// left to right in `text` (never in text already replaced), becomes `to`; `from` empty leaves `text` as is. Builds
// the result in one pass, linear in the size of `text` (replacing in place moved the rest of the text at every
// occurrence: quadratic, 19 s for Gemma's ' ' -> '▁' on 1.6 MB).
std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to);

// `steps` applied to `text` in order (what Encode does to each span between added tokens after NFC); each step
// builds a new string in one pass, so normalizing is linear in the size of `text`.
std::string ApplyNormalizeSteps(std::string_view text, const std::vector<ByteBpeOptions::NormalizeStep>& steps);

// GPT-2's byte -> printable character table (bytes_to_unicode), as UTF-8 strings indexed by byte.
const std::vector<std::string>& ByteToUnicode();

}  // namespace tmx::data
