#include "recipes/data/tokenizers/sentencepiece_model.h"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

namespace tmx::data {
namespace {

// A protobuf wire-format reader over one message's bytes: tags, varints, fixed32 and length-delimited fields,
// each read checked against the end of the buffer.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}

  bool done() const { return pos_ >= bytes_.size(); }
  size_t pos() const { return pos_; }

  bool Varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) return false;
      uint8_t byte = static_cast<uint8_t>(bytes_[pos_++]);
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return true;
    }
    return false;
  }
  bool Fixed32(uint32_t* value) {
    if (bytes_.size() - pos_ < 4) return false;
    std::memcpy(value, bytes_.data() + pos_, 4);  // little-endian on every machine this builds for
    pos_ += 4;
    return true;
  }
  bool Bytes(std::string_view* value) {
    uint64_t size = 0;
    if (!Varint(&size) || size > bytes_.size() - pos_) return false;
    *value = bytes_.substr(pos_, size);
    pos_ += size;
    return true;
  }
  // Skips a field of `wire_type` (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32); false for others.
  bool Skip(uint32_t wire_type) {
    uint64_t ignored = 0;
    std::string_view bytes;
    uint32_t fixed = 0;
    switch (wire_type) {
      case 0:
        return Varint(&ignored);
      case 1:
        return Fixed32(&fixed) && Fixed32(&fixed);
      case 2:
        return Bytes(&bytes);
      case 5:
        return Fixed32(&fixed);
      default:
        return false;
    }
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// Calls field(number, wire_type, reader) for each field of the message; field returns false when it did not
// consume the field (then it is skipped). Returns the offset of the first malformed field, or npos.
template <typename Field>
size_t ForEachField(std::string_view bytes, Field field) {
  WireReader reader(bytes);
  while (!reader.done()) {
    size_t at = reader.pos();
    uint64_t tag = 0;
    if (!reader.Varint(&tag)) return at;
    auto number = static_cast<uint32_t>(tag >> 3);
    auto wire_type = static_cast<uint32_t>(tag & 7);
    bool ok = true;
    if (!field(number, wire_type, reader, &ok) && !reader.Skip(wire_type)) return at;
    if (!ok) return at;
  }
  return std::string_view::npos;
}

// darts-clone's double-array unit (sentencepiece's third_party/darts_clone/darts.h).
struct DartsUnit {
  uint32_t u;
  bool has_leaf() const { return ((u >> 8) & 1) == 1; }
  uint32_t value() const { return u & ((1U << 31) - 1); }
  uint32_t label() const { return u & ((1U << 31) | 0xFF); }
  uint32_t offset() const { return (u >> 10) << ((u & (1U << 9)) >> 6); }
};

constexpr size_t kMaxCharsMapMatches = 32;  // sentencepiece's Normalizer::kMaxTrieResultsSize

constexpr float kUnkPenalty = 10.0f;           // sentencepiece's unigram_model.cc
constexpr float kScoreResetThreshold = 1e5f;   // 0.2.x: path scores are re-based past this magnitude

size_t Utf8CharLen(char lead) { return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(lead & 0xFF) >> 4]; }

}  // namespace

Status CheckPrecompiledCharsMap(std::string_view blob) {
  if (blob.empty()) return Status::OK();
  uint32_t trie_bytes = 0;
  if (blob.size() <= 4) return Status::InvalidArgument("shorter than its 4-byte trie size");
  std::memcpy(&trie_bytes, blob.data(), 4);
  if (trie_bytes >= blob.size() - 4) return Status::InvalidArgument("its trie size runs past its end");
  if (trie_bytes < 1024 || trie_bytes % 1024 != 0) {
    return Status::InvalidArgument("its trie size " + std::to_string(trie_bytes) + " is not a multiple of 1024");
  }
  std::vector<DartsUnit> units(trie_bytes / 4);
  std::memcpy(units.data(), blob.data() + 4, trie_bytes);
  const std::string_view strings = blob.substr(4 + trie_bytes);
  if (strings.back() != '\0') return Status::InvalidArgument("its replacement strings do not end with a NUL");
  const size_t size = units.size();
  // darts-clone's validate(max_value = the strings' size).
  if (units[0].label() != 0 || units[0].has_leaf() || units[0].offset() == 0 || ((0 ^ units[0].offset()) | 0xFF) >= size) {
    return Status::InvalidArgument("its trie's root is malformed");
  }
  for (size_t i = 1; i < size; ++i) {
    if (units[i].label() <= 0xFF) {
      if (((i ^ units[i].offset()) | 0xFF) >= size) {
        return Status::InvalidArgument("trie unit " + std::to_string(i) + " points outside the trie");
      }
      if (units[i].has_leaf() && units[i ^ units[i].offset()].label() <= 0xFF) {
        return Status::InvalidArgument("trie unit " + std::to_string(i) + " has a leaf that is not one");
      }
    } else if (units[i].value() >= strings.size()) {
      return Status::InvalidArgument("trie unit " + std::to_string(i) + " names a string outside the map");
    }
  }
  // The most rules one text can match: the longest path from the root counting units with a leaf. darts-clone
  // shares common suffixes, so the trie is a graph without cycles rather than a tree; a cycle is refused.
  // Depth-first with an explicit stack; most[u] is the count below unit u once it is done.
  enum : uint8_t { kNew, kOpen, kDone };
  std::vector<uint8_t> state(size, kNew);
  std::vector<uint32_t> most(size, 0);
  struct Frame {
    size_t node;
    uint32_t next_label;
  };
  std::vector<Frame> stack = {{0, 0}};
  state[0] = kOpen;
  while (!stack.empty()) {
    Frame& frame = stack.back();
    const size_t base = frame.node ^ units[frame.node].offset();
    bool descended = false;
    while (frame.next_label < 256) {
      const uint32_t c = frame.next_label++;
      const size_t child = base ^ c;
      if (child == frame.node || units[child].label() != c) continue;
      if (state[child] == kOpen) return Status::InvalidArgument("its trie loops back to unit " + std::to_string(child));
      if (state[child] == kNew) {
        state[child] = kOpen;
        stack.push_back({child, 0});  // may move the frames: `frame` is not touched again
        descended = true;
        break;
      }
      const uint32_t through = most[child] + (units[child].has_leaf() ? 1 : 0);
      most[frame.node] = std::max(most[frame.node], through);
    }
    if (descended) continue;
    const size_t done = frame.node;
    state[done] = kDone;
    stack.pop_back();
    if (most[done] + (units[done].has_leaf() ? 1 : 0) > kMaxCharsMapMatches) {
      return Status::InvalidArgument("a text can match more than " + std::to_string(kMaxCharsMapMatches) + " rules");
    }
    if (!stack.empty()) {
      // The parent resumes at the label after this child's: account for the child now.
      most[stack.back().node] = std::max(most[stack.back().node], most[done] + (units[done].has_leaf() ? 1 : 0));
    }
  }
  return Status::OK();
}

Status CheckPieces(const SentencePieceModelInfo& info) {
  using Type = SentencePieceModelInfo::PieceType;
  std::set<std::string_view> normal, reserved;  // the library's two maps: its trie's pieces, and the others
  std::vector<bool> byte_found(256, false);
  bool unknown = false;
  for (size_t id = 0; id < info.pieces.size(); ++id) {
    const auto& piece = info.pieces[id];
    const std::string which = "piece " + std::to_string(id);
    if (piece.text.empty()) return Status::InvalidArgument(which + " is empty");
    if (piece.text.find('\0') != std::string::npos) return Status::InvalidArgument(which + " holds a NUL byte");
    if (piece.text.size() >= 8000) return Status::InvalidArgument(which + " is 8000 bytes or longer");
    if (!std::isfinite(piece.score)) return Status::InvalidArgument(which + " has a score that is not finite");
    const bool in_trie = piece.type == Type::kNormal || piece.type == Type::kUserDefined || piece.type == Type::kUnused;
    if (!(in_trie ? normal : reserved).insert(piece.text).second) {
      return Status::InvalidArgument(which + " (\"" + piece.text + "\") is defined twice");
    }
    if (piece.type == Type::kUnknown) {
      if (unknown) return Status::InvalidArgument(which + " is a second unknown piece");
      unknown = true;
    }
    if (piece.type == Type::kByte) {
      if (!info.byte_fallback) return Status::InvalidArgument(which + " is a byte piece but byte_fallback is off");
      const std::string& t = piece.text;
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<uint8_t>(t[3])) &&
          std::isxdigit(static_cast<uint8_t>(t[4]))) {
        byte = std::stoi(t.substr(3, 2), nullptr, 16);
      }
      if (byte < 0) return Status::InvalidArgument(which + " is a byte piece not of the form <0xNN>");
      byte_found[static_cast<size_t>(byte)] = true;
    }
  }
  if (!unknown && !info.byte_fallback) return Status::InvalidArgument("it has no unknown piece");
  if (info.byte_fallback && std::find(byte_found.begin(), byte_found.end(), false) != byte_found.end()) {
    return Status::InvalidArgument("byte_fallback is on but not all 256 byte pieces are there");
  }
  return Status::OK();
}

namespace {

// A normalizer_spec or denormalizer_spec (`spec`): false when malformed. Its precompiled_charsmap (field 2) is
// checked; the first damaged one is kept in `charsmap`.
bool ParseNormalizerSpec(std::string_view message, const char* spec, const std::string& source, Status* charsmap) {
  size_t inner = ForEachField(message, [&](uint32_t n, uint32_t w, WireReader& r, bool* ok) {
    if (n != 2 || w != 2) return false;
    std::string_view blob;
    if ((*ok = r.Bytes(&blob))) {
      Status checked = CheckPrecompiledCharsMap(blob);
      if (!checked.ok() && charsmap->ok()) {
        *charsmap = Status::InvalidArgument(source + ": " + spec + ".precompiled_charsmap is damaged (" +
                                            checked.message() +
                                            "); fix: use the tokenizer.model the model was published with");
      }
    }
    return true;
  });
  return inner == std::string_view::npos;
}

// A SentencePiece (text = 1, score = 2, type = 3): false when malformed.
bool ParsePiece(std::string_view message, SentencePieceModelInfo::Piece* piece) {
  size_t inner = ForEachField(message, [&](uint32_t n, uint32_t w, WireReader& r, bool* ok) {
    if (n == 1 && w == 2) {
      std::string_view text;
      if ((*ok = r.Bytes(&text))) piece->text = std::string(text);
      return true;
    }
    if (n == 2 && w == 5) {
      uint32_t raw = 0;
      if ((*ok = r.Fixed32(&raw))) std::memcpy(&piece->score, &raw, 4);
      return true;
    }
    if (n == 3 && w == 0) {
      uint64_t type = 0;
      *ok = r.Varint(&type) && type >= 1 && type <= 6;
      piece->type = static_cast<SentencePieceModelInfo::PieceType>(type);
      return true;
    }
    return false;
  });
  return inner == std::string_view::npos;
}

// The trainer_spec's model_type (3) and byte_fallback (35): false when malformed.
bool ParseTrainerSpec(std::string_view message, SentencePieceModelInfo* info) {
  size_t inner = ForEachField(message, [&](uint32_t n, uint32_t w, WireReader& r, bool* ok) {
    if (w != 0 || (n != 3 && n != 35)) return false;
    uint64_t value = 0;
    *ok = r.Varint(&value);
    if (n == 3) {
      *ok = *ok && value >= 1 && value <= 4;
      info->model_type = static_cast<SentencePieceModelInfo::ModelType>(value);
    } else {
      info->byte_fallback = value != 0;
    }
    return true;
  });
  return inner == std::string_view::npos;
}

}  // namespace

StatusOr<SentencePieceModelInfo> ParseSentencePieceModel(std::string_view bytes, const std::string& source) {
  SentencePieceModelInfo info;
  std::string problem;
  Status charsmap = Status::OK();
  size_t at = ForEachField(bytes, [&](uint32_t number, uint32_t wire_type, WireReader& r, bool* ok) {
    if (wire_type != 2 || (number != 1 && number != 2 && number != 3 && number != 5)) return false;
    std::string_view message;
    if (!(*ok = r.Bytes(&message))) return true;
    if (number == 3 || number == 5) {  // normalizer_spec, denormalizer_spec
      const char* spec = number == 3 ? "normalizer_spec" : "denormalizer_spec";
      if (!ParseNormalizerSpec(message, spec, source, &charsmap)) {
        problem = std::string(spec) + " is malformed";
        *ok = false;
      }
    } else if (number == 1) {
      SentencePieceModelInfo::Piece piece;
      if (!ParsePiece(message, &piece)) {
        problem = "piece " + std::to_string(info.pieces.size()) + " is malformed";
        *ok = false;
      }
      info.pieces.push_back(std::move(piece));
    } else if (!ParseTrainerSpec(message, &info)) {
      problem = "trainer_spec is malformed";
      *ok = false;
    }
    return true;
  });
  auto bad = [&](size_t at, const std::string& what) {
    return Status::InvalidArgument(source + ": not a SentencePiece model (" + what + " at byte " +
                                   std::to_string(at) + ")");
  };
  if (at != std::string_view::npos) return bad(at, problem.empty() ? "a malformed field" : problem);
  if (!charsmap.ok()) return charsmap;
  if (info.pieces.empty()) return bad(bytes.size(), "no pieces");
  Status pieces = CheckPieces(info);
  if (!pieces.ok()) {
    return Status::InvalidArgument(source + ": not a usable SentencePiece model (" + pieces.message() +
                                   "); fix: use the tokenizer.model the model was published with");
  }
  return info;
}

UnigramSegmenter::UnigramSegmenter(const SentencePieceModelInfo& model) {
  using Type = SentencePieceModelInfo::PieceType;
  min_score_ = FLT_MAX;
  for (size_t id = 0; id < model.pieces.size(); ++id) {
    const auto& piece = model.pieces[id];
    if (piece.type == Type::kNormal) min_score_ = std::min(min_score_, piece.score);
    if (piece.type == Type::kUnknown) unk_id_ = static_cast<int>(id);
    // The library's trie holds normal, user-defined and unused pieces; an unused match is skipped, so it is
    // left out here.
    if (piece.type != Type::kNormal && piece.type != Type::kUserDefined) continue;
    int32_t node = 0;
    for (char c : piece.text) {
      auto [edge, added] = edges_.emplace((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c),
                                          static_cast<int32_t>(nodes_.size()));
      if (added) nodes_.emplace_back();
      node = edge->second;
    }
    if (node != 0 && nodes_[static_cast<size_t>(node)].id < 0) {  // the first of two equal pieces wins
      nodes_[static_cast<size_t>(node)] = Entry{static_cast<int>(id), piece.score, piece.type == Type::kUserDefined};
    }
  }
}

std::vector<std::pair<std::string_view, int>> UnigramSegmenter::Segment(std::string_view normalized) const {
  std::vector<std::pair<std::string_view, int>> out;
  if (normalized.empty()) return out;
  struct BestPath {
    int id = -1;
    float score = 0;
    int64_t starts_at = -1;
  };
  const size_t size = normalized.size();
  const float unk_score = min_score_ - kUnkPenalty;
  std::vector<BestPath> best(size + 1);
  size_t frontier = 0;
  for (size_t start = 0; start < size;) {
    float till_here = best[start].score;
    if (till_here < -kScoreResetThreshold || till_here > kScoreResetThreshold) {
      for (size_t i = start; i <= frontier; ++i) {
        if (i == start || best[i].starts_at != -1) best[i].score -= till_here;
      }
      till_here = 0.0f;
    }
    const size_t char_len = std::min(Utf8CharLen(normalized[start]), size - start);
    bool covers_char = false;
    int32_t node = 0;
    for (size_t end = start + 1; end <= size; ++end) {
      auto edge = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(normalized[end - 1]));
      if (edge == edges_.end()) break;
      node = edge->second;
      const Entry& entry = nodes_[static_cast<size_t>(node)];
      if (entry.id < 0) continue;
      const size_t length = end - start;
      frontier = std::max(frontier, end);
      // A user-defined symbol's bonus makes it win over any split of its text (0.2.x: 0.1 per extra byte).
      const float score = entry.user_defined ? static_cast<float>(0.1 * static_cast<double>(length - 1)) : entry.score;
      const float candidate = score + till_here;
      BestPath& target = best[end];
      if (target.starts_at == -1 || candidate > target.score) target = {entry.id, candidate, static_cast<int64_t>(start)};
      if (length == char_len) covers_char = true;
    }
    if (!covers_char) {
      frontier = std::max(frontier, start + char_len);
      const float candidate = unk_score + till_here;
      BestPath& target = best[start + char_len];
      if (target.starts_at == -1 || candidate > target.score) target = {unk_id_, candidate, static_cast<int64_t>(start)};
    }
    start += char_len;
  }
  for (size_t end = size; end > 0;) {
    const BestPath& node = best[end];
    auto start = static_cast<size_t>(node.starts_at);
    out.emplace_back(normalized.substr(start, end - start), node.id);
    end = start;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace tmx::data
