#include "recipes/data/tokenizers/byte_bpe.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/input_file.h"
#include "base/json_io.h"

namespace tmx::data {

const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// torchtune writes r"'s|'t|'re|'ve|'m|'ll|'d| ?[\w]+| ?\d+| ?[^\s\w\d]+|\s+(?!\S)|\s+" for Python's re. There (Python
// 3.11, Unicode 14, as PCRE2 10.42) \w is [\p{L}\p{N}_], \d is \p{Nd} and \s is [\t-\r\x1C-\x1F\x85\p{Z}], each
// checked over every code point; PCRE2's own \w and \s differ (combining marks, U+001C-U+001F, U+0085).
const char* const kTorchtuneGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?[\p{L}\p{N}_]+| ?\p{Nd}+| ?[^\t-\r\x{1C}-\x{1F}\x{85}\p{Z}\p{L}\p{N}_]+)"
    R"(|[\t-\r\x{1C}-\x{1F}\x{85}\p{Z}]+(?![^\t-\r\x{1C}-\x{1F}\x{85}\p{Z}])|[\t-\r\x{1C}-\x{1F}\x{85}\p{Z}]+)";

namespace {

constexpr int64_t kNoRank = std::numeric_limits<int64_t>::max();
// Stands for an unknown symbol; cannot be part of any merge (not valid UTF-8).
const char* const kUnknownSymbol =
    "\xFF"
    "unk";

// Hugging Face's byte-fallback token of one byte: "<0xAB>".
std::string ByteFallbackToken(unsigned char b) {
  static const char* kHex = "0123456789ABCDEF";
  return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
}

// The byte of a "<0xAB>" token, or -1.
int ByteOfFallbackToken(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int value = 0;
  for (char c : token.substr(3, 2)) {
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

std::string EncodeUtf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

const std::unordered_map<std::string, unsigned char>& UnicodeToByte() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, unsigned char>();
    const std::vector<std::string>& forward = ByteToUnicode();
    for (int b = 0; b < 256; ++b) (*t)[forward[static_cast<size_t>(b)]] = static_cast<unsigned char>(b);
    return t;
  }();
  return *table;
}

// The bytes a byte-alphabet token stands for ("Ġworld" -> " world"); characters outside the alphabet are kept.
std::string TokenToBytes(const std::string& token) {
  const auto& table = UnicodeToByte();
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    size_t n = Utf8SequenceLength(static_cast<unsigned char>(token[pos]));
    std::string ch = token.substr(pos, n);
    auto it = table.find(ch);
    if (it != table.end()) {
      bytes += static_cast<char>(it->second);
    } else {
      bytes += ch;
    }
    pos += n;
  }
  return bytes;
}

}  // namespace

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t begin = 0;
  for (size_t at = text.find(from); at != std::string_view::npos; at = text.find(from, begin)) {
    out.append(text.substr(begin, at - begin)).append(to);
    begin = at + from.size();
  }
  return out.append(text.substr(begin));
}

std::string ApplyNormalizeSteps(std::string_view text, const std::vector<ByteBpeOptions::NormalizeStep>& steps) {
  std::string out(text);
  for (const ByteBpeOptions::NormalizeStep& step : steps) {
    if (step.prepend) {
      if (!out.empty()) out = step.to + out;
    } else {
      out = ReplaceAll(out, step.from, step.to);
    }
  }
  return out;
}

const std::vector<std::string>& ByteToUnicode() {
  static const auto* table = [] {
    auto* t = new std::vector<std::string>(256);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      (*t)[static_cast<size_t>(b)] = EncodeUtf8(printable(b) ? static_cast<char32_t>(b) : 256 + next++);
    }
    return t;
  }();
  return *table;
}

StatusOr<ByteBpeModel> LoadByteBpeFiles(const std::string& vocab_path, const std::string& merges_path,
                                        const ByteBpeFileOptions& files) {
  StatusOr<std::string> vocab_text = ReadFile(vocab_path, TokenizerInput());
  if (!vocab_text.ok()) return vocab_text.status();
  StatusOr<std::string> merges_text = ReadFile(merges_path, TokenizerInput());
  if (!merges_text.ok()) return merges_text.status();
  ByteBpeModel model;
  StatusOr<nlohmann::json> vocab_json = ParseJsonText(vocab_path, *vocab_text);
  if (!vocab_json.ok()) return vocab_json.status();
  const nlohmann::json& vocab = *vocab_json;
  if (!vocab.is_object()) {
    return Status::InvalidArgument(vocab_path +
                                   ": expected a JSON object {\"token\": id, ...}; fix: give the "
                                   "tokenizer's vocab.json (merges go in " +
                                   files.merges_key + ")");
  }
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return Status::InvalidArgument(vocab_path + ": token \"" + token + "\" has id " + JsonForMessage(id) +
                                     ", expected a whole number >= 0; fix: give the tokenizer's vocab.json");
    }
    model.vocab.emplace(token, id.get<int64_t>());
  }
  const bool gpt2 = files.layout == MergesLayout::kFirstAndUnterminatedLastSkipped;
  Status parsed = ForEachLine(*merges_text, [&](int64_t line_no, std::string_view raw, size_t offset) {
    if (gpt2 && (line_no == 1 || offset + raw.size() == merges_text->size())) return Status::OK();
    // Python's str.strip() of ASCII whitespace, as torchtune's reader does.
    size_t first = raw.find_first_not_of(" \t\r\n\v\f");
    if (first == std::string_view::npos) return Status::OK();
    std::string line(raw.substr(first, raw.find_last_not_of(" \t\r\n\v\f") - first + 1));
    if (line_no == 1 && line.rfind("#version:", 0) == 0) return Status::OK();
    size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      return Status::InvalidArgument(merges_path + ":" + std::to_string(line_no) +
                                     ": expected two symbols \"left "
                                     "right\", got \"" +
                                     line.substr(0, 60) + "\"; fix: give the tokenizer's merges.txt (vocab goes in " +
                                     files.vocab_key + ")");
    }
    model.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    return Status::OK();
  });
  if (!parsed.ok()) return parsed;
  return model;
}

namespace {

// A byte-level vocabulary must have a token for every printable ASCII byte and the space (0x20-0x7E); other
// bytes may be missing (torchtune's tiny test vocabularies have only those and '\n'), and then are dropped as
// Hugging Face drops them. Without even those, nothing of a text but its added tokens would be encoded.
Status CheckByteAlphabet(const ByteBpeOptions& options) {
  if (!options.byte_level || options.byte_fallback) return Status::OK();
  const std::vector<std::string>& alphabet = ByteToUnicode();
  for (int b = ' '; b <= '~'; ++b) {
    const std::string& symbol = alphabet[static_cast<size_t>(b)];
    if (options.model.vocab.count(symbol)) continue;
    static const char* kHex = "0123456789ABCDEF";
    return Status::InvalidArgument(
        std::string("the byte-level BPE vocabulary has no token for byte 0x") + kHex[b >> 4] + kHex[b & 15] +
        " (its symbol \"" + symbol +
        "\"), so text would lose that byte and a sample made of such text would keep only its template tokens; fix: "
        "give the model's byte-level vocabulary (GPT-2's byte alphabet: a token for each byte's symbol), or for a "
        "SentencePiece-style vocabulary the model's tokenizer.json with its own pre-tokenizer, or the family's "
        "SentencePiece tokenizer");
  }
  return Status::OK();
}

// Ids of the vocabulary and of added tokens index the model's embedding, and one more than the largest is the
// vocabulary's size: each must be from 0 to INT32_MAX. A negative id came out of Encode as is, and 2^63 - 1
// overflowed the size (found by tm_fuzz's tokenizer_json target).
Status CheckIds(const ByteBpeOptions& options) {
  constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();
  auto check = [&](const char* what, const std::string& token, int64_t id) {
    if (id >= 0 && id <= kMaxId) return Status::OK();
    return Status::InvalidArgument(std::string(what) + " \"" + PrintableBytes(token.substr(0, 60)) + "\" has id " +
                                   std::to_string(id) + ", expected a whole number from 0 to " +
                                   std::to_string(kMaxId) + "; fix: give the tokenizer's own files");
  };
  for (const auto& [token, id] : options.model.vocab) TM_RETURN_IF_ERROR(check("token", token, id));
  for (const auto& [token, id] : options.special_tokens) TM_RETURN_IF_ERROR(check("added token", token, id));
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<ByteBpeTokenizer>> ByteBpeTokenizer::Create(ByteBpeOptions options) {
  auto named = [&](const Status& s) { return options.source.empty() ? s : s.WithContext(options.source); };
  TM_RETURN_IF_ERROR(named(CheckByteAlphabet(options)));
  TM_RETURN_IF_ERROR(named(CheckIds(options)));
  std::unique_ptr<ByteBpeTokenizer> tok(new ByteBpeTokenizer());
  if (options.pre_tokenizer == ByteBpeOptions::PreTokenizer::kRegex) {
    StatusOr<std::unique_ptr<UnicodeRegex>> regex = UnicodeRegex::Compile(options.pattern);
    if (!regex.ok()) return named(regex.status());
    tok->regex_ = std::move(regex).value();
  }
  for (size_t rank = 0; rank < options.model.merges.size(); ++rank) {
    const auto& [left, right] = options.model.merges[rank];
    tok->merge_rank_.emplace(left + " " + right, static_cast<int64_t>(rank));  // first listing wins
  }
  for (const auto& [token, id] : options.model.vocab) {
    tok->token_of_[id] = token;
    tok->vocab_size_ = std::max(tok->vocab_size_, id + 1);
  }
  for (const auto& [text, id] : options.special_tokens) {
    tok->token_of_[id] = text;
    tok->added_ids_.insert(id);
    tok->vocab_size_ = std::max(tok->vocab_size_, id + 1);
    if (!text.empty() && options.split_on_added_tokens) tok->specials_longest_first_.emplace_back(text, id);
  }
  std::stable_sort(tok->specials_longest_first_.begin(), tok->specials_longest_first_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  tok->bos_id_ = options.bos_id;
  tok->eos_id_ = options.eos_id;
  tok->pad_id_ = options.pad_id;
  tok->special_tokens_ = options.special_tokens;
  tok->options_ = std::move(options);
  return tok;
}

std::vector<std::string> ByteBpeTokenizer::InitialSymbols(const std::string& word) const {
  const auto& vocab = options_.model.vocab;
  std::vector<std::string> symbols;
  symbols.reserve(word.size());
  auto unknown = [&] {
    if (options_.unk_id == kNoId) return;  // dropped, as Hugging Face does without an unk token
    if (options_.fuse_unk && !symbols.empty() && symbols.back() == kUnknownSymbol) return;
    symbols.push_back(kUnknownSymbol);
  };
  if (options_.byte_level) {
    const std::vector<std::string>& alphabet = ByteToUnicode();
    for (char c : word) {
      const std::string& symbol = alphabet[static_cast<unsigned char>(c)];
      if (!options_.drop_unknown_bytes_first || vocab.count(symbol)) {
        symbols.push_back(symbol);
      } else {
        unknown();
      }
    }
    return symbols;
  }
  for (size_t pos = 0; pos < word.size();) {
    size_t n = std::min(Utf8SequenceLength(static_cast<unsigned char>(word[pos])), word.size() - pos);
    std::string ch = word.substr(pos, n);
    pos += n;
    if (vocab.count(ch)) {
      symbols.push_back(ch);
      continue;
    }
    std::vector<std::string> bytes;
    for (unsigned char b : ch) bytes.push_back(ByteFallbackToken(b));
    if (options_.byte_fallback &&
        std::all_of(bytes.begin(), bytes.end(), [&](const std::string& t) { return vocab.count(t) > 0; })) {
      symbols.insert(symbols.end(), bytes.begin(), bytes.end());
    } else {
      unknown();
    }
  }
  return symbols;
}

std::vector<int64_t> ByteBpeTokenizer::EncodeWord(const std::string& word) const {
  std::vector<int64_t> cached;
  if (cache_.Lookup(word, &cached)) return cached;
  std::vector<std::string> symbols = InitialSymbols(word);
  std::vector<int64_t> ids;
  std::string whole;
  if (options_.ignore_merges) {
    for (const std::string& s : symbols) whole += s;
  }
  auto direct = options_.ignore_merges ? options_.model.vocab.find(whole) : options_.model.vocab.end();
  if (direct != options_.model.vocab.end()) {
    ids.push_back(direct->second);
  } else {
    while (symbols.size() > 1) {
      int64_t best = kNoRank;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        auto it = merge_rank_.find(symbols[i] + " " + symbols[i + 1]);
        if (it != merge_rank_.end()) best = std::min(best, it->second);
      }
      if (best == kNoRank) break;
      const auto& [left, right] = options_.model.merges[static_cast<size_t>(best)];
      std::vector<std::string> merged;
      merged.reserve(symbols.size());
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          merged.push_back(left + right);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      symbols.swap(merged);
    }
    for (const std::string& s : symbols) {
      auto it = options_.model.vocab.find(s);
      if (it != options_.model.vocab.end()) {
        ids.push_back(it->second);
      } else if (options_.unk_id != kNoId) {  // kUnknownSymbol, or a merged symbol missing from the vocabulary
        ids.push_back(options_.unk_id);
      }
    }
  }
  cache_.Insert(word, ids);
  return ids;
}

void ByteBpeTokenizer::EncodeOrdinary(std::string_view span, std::vector<int64_t>* ids) const {
  std::string text = ApplyNormalizeSteps(span, options_.normalize);
  auto add = [&](std::string_view piece) {
    std::vector<int64_t> word = EncodeWord(std::string(piece));
    ids->insert(ids->end(), word.begin(), word.end());
  };
  switch (options_.pre_tokenizer) {
    case ByteBpeOptions::PreTokenizer::kRegex: {
      StatusOr<std::vector<std::string_view>> pieces = regex_->FindAll(text);
      if (!pieces.ok()) throw TokenizeError(pieces.status().WithContext(options_.source + ": pre-tokenizer"));
      for (std::string_view piece : *pieces) add(piece);
      break;
    }
    case ByteBpeOptions::PreTokenizer::kNone:
      if (!text.empty()) add(text);
      break;
    case ByteBpeOptions::PreTokenizer::kMergedWithPrevious: {
      const std::string& sep = options_.split_string;
      size_t begin = 0;
      for (size_t at = sep.empty() ? std::string::npos : text.find(sep); at != std::string::npos;
           at = text.find(sep, begin)) {
        add(std::string_view(text).substr(begin, at + sep.size() - begin));
        begin = at + sep.size();
      }
      if (begin < text.size()) add(std::string_view(text).substr(begin));
      break;
    }
  }
}

std::vector<int64_t> ByteBpeTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int64_t> ids;
  if (options.add_bos && bos_id_ != kNoId) ids.push_back(bos_id_);
  std::string valid = ToValidUtf8(text);
  if (options_.nfc) valid = NormalizeNfc(valid);
  std::string_view rest(valid);
  // Next occurrence of each added token at or after the cursor (npos: none left).
  std::vector<size_t> next(specials_longest_first_.size());
  for (size_t k = 0; k < next.size(); ++k) next[k] = rest.find(specials_longest_first_[k].first);
  size_t cursor = 0;
  while (true) {
    size_t best = std::string_view::npos, best_k = 0;
    for (size_t k = 0; k < next.size(); ++k) {
      if (next[k] != std::string_view::npos && next[k] < cursor)
        next[k] = rest.find(specials_longest_first_[k].first, cursor);
      if (next[k] < best) {  // ties keep the longer token (earlier in the list)
        best = next[k];
        best_k = k;
      }
    }
    if (best == std::string_view::npos) {
      EncodeOrdinary(rest.substr(cursor), &ids);
      break;
    }
    EncodeOrdinary(rest.substr(cursor, best - cursor), &ids);
    ids.push_back(specials_longest_first_[best_k].second);
    cursor = best + specials_longest_first_[best_k].first.size();
  }
  if (options.add_eos && eos_id_ != kNoId) ids.push_back(eos_id_);
  return ids;
}

std::string ByteBpeTokenizer::Decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string out;
  std::string bytes;  // pending vocabulary text, decoded as one UTF-8 run like torchtune's sub_texts
  auto flush = [&] {
    for (const auto& [from, to] : options_.decode_replace) bytes = ReplaceAll(bytes, from, to);
    out += ToValidUtf8(bytes);
    bytes.clear();
  };
  for (int64_t id : ids) {
    auto it = token_of_.find(id);
    if (it == token_of_.end()) {
      flush();
      out += "<|unk:" + std::to_string(id) + "|>";
    } else if (added_ids_.count(id)) {
      flush();
      bool special = options_.non_special_added.count(it->second) == 0;
      if (!(skip_special && special)) out += it->second;
    } else if (options_.byte_level) {
      bytes += TokenToBytes(it->second);
    } else {
      int byte = options_.byte_fallback ? ByteOfFallbackToken(it->second) : -1;
      bytes += byte >= 0 ? std::string(1, static_cast<char>(byte)) : it->second;
    }
  }
  flush();
  const std::string& strip = options_.strip_content;
  for (int k = 0; k < options_.strip_leading && !strip.empty() && out.rfind(strip, 0) == 0; ++k) {
    out.erase(0, strip.size());
  }
  return out;
}

std::string ByteBpeTokenizer::Piece(int64_t id) const {
  auto it = token_of_.find(id);
  if (it == token_of_.end()) return "<|unk:" + std::to_string(id) + "|>";
  if (added_ids_.count(id) || !options_.byte_level) return it->second;
  return PrintableBytes(TokenToBytes(it->second));
}

}  // namespace tmx::data
