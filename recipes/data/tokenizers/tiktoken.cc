#include "recipes/data/tokenizers/tiktoken.h"

#include <algorithm>
#include <limits>

#include "base/file_util.h"
#include "base/input_file.h"

namespace tmx::data {

const char* const kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Llama 4's (torchtune's O200K_PATTERN): cased words with their contractions, 1-3 digits, punctuation runs.
const char* const kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

constexpr size_t kMaxEncodeChars = 400000;       // torchtune's MAX_ENCODE_CHARS
constexpr size_t kMaxNoWhitespaceChars = 25000;  // torchtune's MAX_NO_WHITESPACE_CHARS
constexpr int64_t kNoRank = std::numeric_limits<int64_t>::max();
// The largest rank read: ids are int32-sized everywhere a vocabulary is (published tokenizers stay below 2^20).
constexpr int64_t kMaxRank = std::numeric_limits<int32_t>::max();

// torchtune's chunking: pieces of at most kMaxEncodeChars code points, each split further so that no run of
// whitespace or of non-whitespace is longer than kMaxNoWhitespaceChars.
std::vector<std::string_view> SplitForEncoding(std::string_view text) {
  std::vector<std::string_view> out;
  size_t chunk_chars = 0;
  size_t slice_start = 0;
  size_t run = 0;
  bool run_is_space = false;
  for (size_t pos = 0; pos < text.size();) {
    if (chunk_chars == kMaxEncodeChars) {  // a new 400k chunk starts: its first slice starts here
      out.push_back(text.substr(slice_start, pos - slice_start));
      slice_start = pos;
      chunk_chars = 0;
    }
    size_t here = pos;
    bool space = IsPythonSpace(NextCodePoint(text, &pos));
    if (chunk_chars == 0 || space != run_is_space) {
      run = 1;
      run_is_space = space;
    } else if (++run > kMaxNoWhitespaceChars) {
      out.push_back(text.substr(slice_start, here - slice_start));
      slice_start = here;
      run = 1;
    }
    ++chunk_chars;
  }
  out.push_back(text.substr(slice_start));
  return out;
}

}  // namespace

bool DecodeBase64(std::string_view text, std::string* out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out->clear();
  if (text.size() % 4 != 0) return false;
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text[i + k];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = value(c)) < 0) {
        return false;
      }
    }
    uint32_t bits = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out->push_back(static_cast<char>(bits >> 16));
    if (pad < 2) out->push_back(static_cast<char>((bits >> 8) & 0xFF));
    if (pad < 1) out->push_back(static_cast<char>(bits & 0xFF));
  }
  return true;
}

StatusOr<std::unique_ptr<TiktokenTokenizer>> TiktokenTokenizer::Load(const TiktokenOptions& options) {
  StatusOr<std::string> text = ReadFile(options.path, TokenizerInput());
  if (!text.ok()) return text.status();
  std::unique_ptr<TiktokenTokenizer> tok(new TiktokenTokenizer());
  tok->options_ = options;
  tok->bos_id_ = options.bos_id;
  tok->eos_id_ = options.eos_id;
  tok->pad_id_ = options.pad_id;
  tok->special_tokens_ = options.special_tokens;
  const std::string fix =
      "; fix: give the tiktoken ranks file (one \"<base64 token> <rank>\" per line, e.g. "
      "Llama 3's original/tokenizer.model)";
  Status parsed = ForEachLine(*text, [&](int64_t line_no, std::string_view line, size_t) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return Status::OK();
    std::string where = options.path + ":" + std::to_string(line_no) + ": ";
    size_t space = line.find(' ');
    std::string bytes;
    if (space == std::string_view::npos || !DecodeBase64(line.substr(0, space), &bytes)) {
      return Status::InvalidArgument(where + "expected \"<base64 token> <rank>\", got \"" +
                                     std::string(line.substr(0, 60)) + "\"" + fix);
    }
    std::string rank_text(line.substr(space + 1));
    char* rank_end = nullptr;
    long long rank = std::strtoll(rank_text.c_str(), &rank_end, 10);
    if (rank_text.empty() || *rank_end != '\0' || rank < 0) {
      return Status::InvalidArgument(where + "rank \"" + rank_text + "\" is not a whole number >= 0" + fix);
    }
    // strtoll saturates past int64 (and the rank after the largest is the vocabulary's size, kNoRank the largest).
    if (rank > kMaxRank) {
      return Status::InvalidArgument(where + "rank \"" + rank_text.substr(0, 40) + "\" is above " +
                                     std::to_string(kMaxRank) +
                                     ", the largest a ranks file may hold (the model's vocabulary would be the "
                                     "largest rank + 1 ids)" + fix);
    }
    if (!tok->ranks_.emplace(bytes, rank).second || !tok->bytes_of_.emplace(rank, bytes).second) {
      return Status::InvalidArgument(where + "token or rank " + std::to_string(rank) +
                                     " is listed twice; fix: the file is corrupt, download it again");
    }
    tok->vocab_size_ = std::max<int64_t>(tok->vocab_size_, rank + 1);
    return Status::OK();
  });
  if (!parsed.ok()) return parsed;
  if (tok->ranks_.empty()) {
    return Status::InvalidArgument(options.path + ": holds no tokens" + fix);
  }
  for (int b = 0; b < 256; ++b) {
    if (tok->ranks_.count(std::string(1, static_cast<char>(b))) == 0) {
      return Status::InvalidArgument(options.path + ": byte " + std::to_string(b) +
                                     " has no rank, so some text could not be encoded" + fix);
    }
  }
  for (const auto& [token, id] : options.special_tokens) {
    if (tok->bytes_of_.count(id) && !tok->special_ids_.count(id)) {
      return Status::InvalidArgument(options.path + ": special token " + token + " has id " + std::to_string(id) +
                                     ", which a base token already has; fix: number special tokens after the "
                                     "base vocabulary (from " +
                                     std::to_string(tok->vocab_size_) + ")");
    }
    tok->bytes_of_[id] = token;
    tok->special_ids_.insert(id);
    tok->vocab_size_ = std::max<int64_t>(tok->vocab_size_, id + 1);
  }
  StatusOr<std::unique_ptr<UnicodeRegex>> regex = UnicodeRegex::Compile(options.pattern);
  if (!regex.ok()) return regex.status();
  tok->regex_ = std::move(regex).value();
  return tok;
}

void TiktokenTokenizer::EncodePiece(std::string_view piece, std::vector<int64_t>* ids) const {
  auto whole = ranks_.find(std::string(piece));
  if (whole != ranks_.end()) {
    ids->push_back(whole->second);
    return;
  }
  if (cache_.Lookup(piece, ids)) return;
  const size_t first = ids->size();
  auto rank_of = [&](size_t begin, size_t end) {
    auto it = ranks_.find(std::string(piece.substr(begin, end - begin)));
    return it == ranks_.end() ? kNoRank : it->second;
  };
  // tiktoken's _byte_pair_merge: parts[i] = (start of part i, rank of merging part i with part i + 1).
  std::vector<std::pair<size_t, int64_t>> parts;
  parts.reserve(piece.size() + 1);
  for (size_t i = 0; i + 1 < piece.size(); ++i) parts.emplace_back(i, rank_of(i, i + 2));
  parts.emplace_back(piece.size() - 1, kNoRank);
  parts.emplace_back(piece.size(), kNoRank);
  auto merged_rank = [&](size_t i) {
    return i + 3 < parts.size() ? rank_of(parts[i].first, parts[i + 3].first) : kNoRank;
  };
  while (true) {
    size_t best = 0;
    int64_t best_rank = kNoRank;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i].second < best_rank) {
        best_rank = parts[i].second;
        best = i;
      }
    }
    if (best_rank == kNoRank) break;
    if (best > 0) parts[best - 1].second = merged_rank(best - 1);
    parts[best].second = merged_rank(best);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) ids->push_back(rank_of(parts[i].first, parts[i + 1].first));
  cache_.Insert(piece, std::vector<int64_t>(ids->begin() + static_cast<std::ptrdiff_t>(first), ids->end()));
}

std::vector<int64_t> TiktokenTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int64_t> ids;
  if (text.empty()) return ids;  // torchtune returns [] for "" even when BOS/EOS are asked for
  if (options.add_bos) ids.push_back(bos_id_);
  std::string valid = ToValidUtf8(text);
  for (std::string_view chunk : SplitForEncoding(valid)) {
    StatusOr<std::vector<std::string_view>> pieces = regex_->FindAll(chunk);
    if (!pieces.ok()) throw TokenizeError(pieces.status().WithContext(options_.path + ": pre-tokenizer"));
    for (std::string_view piece : *pieces) EncodePiece(piece, &ids);
  }
  if (options.add_eos) ids.push_back(eos_id_);
  return ids;
}

const std::string* TiktokenTokenizer::TokenBytes(int64_t id) const {
  auto it = bytes_of_.find(id);
  return it == bytes_of_.end() ? nullptr : &it->second;
}

std::string TiktokenTokenizer::Decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int64_t id : ids) {
    const std::string* token = TokenBytes(id);
    if (token == nullptr) {
      bytes += "<|unk:" + std::to_string(id) + "|>";
    } else if (!(skip_special && special_ids_.count(id))) {
      bytes += *token;
    }
  }
  return ToValidUtf8(bytes);
}

std::string TiktokenTokenizer::Piece(int64_t id) const {
  const std::string* token = TokenBytes(id);
  if (token == nullptr) return "<|unk:" + std::to_string(id) + "|>";
  return special_ids_.count(id) ? *token : PrintableBytes(*token);
}

}  // namespace tmx::data
