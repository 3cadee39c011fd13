#include "recipes/data/tokenizers/sentencepiece_unigram.h"

#include <algorithm>
#include <cfloat>
#include <cstring>

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

constexpr float kUnkPenalty = 10.0f;           // sentencepiece's unigram_model.cc
constexpr float kScoreResetThreshold = 1e5f;   // 0.2.x: path scores are re-based past this magnitude

size_t Utf8CharLen(char lead) { return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(lead & 0xFF) >> 4]; }

}  // namespace

StatusOr<SentencePieceModelInfo> ParseSentencePieceModel(std::string_view bytes, const std::string& source) {
  using Info = SentencePieceModelInfo;
  Info info;
  auto bad = [&](size_t at, const std::string& what) {
    return Status::InvalidArgument(source + ": not a SentencePiece model (" + what + " at byte " +
                                   std::to_string(at) + ")");
  };
  std::string problem;
  size_t at = ForEachField(bytes, [&](uint32_t number, uint32_t wire_type, WireReader& r, bool* ok) {
    if (wire_type != 2 || (number != 1 && number != 2)) return false;
    std::string_view message;
    if (!(*ok = r.Bytes(&message))) return true;
    if (number == 1) {
      Info::Piece piece;
      size_t inner = ForEachField(message, [&](uint32_t n, uint32_t w, WireReader& pr, bool* pok) {
        if (n == 1 && w == 2) {
          std::string_view text;
          if ((*pok = pr.Bytes(&text))) piece.text = std::string(text);
          return true;
        }
        if (n == 2 && w == 5) {
          uint32_t raw = 0;
          if ((*pok = pr.Fixed32(&raw))) std::memcpy(&piece.score, &raw, 4);
          return true;
        }
        if (n == 3 && w == 0) {
          uint64_t type = 0;
          *pok = pr.Varint(&type) && type >= 1 && type <= 6;
          piece.type = static_cast<Info::PieceType>(type);
          return true;
        }
        return false;
      });
      if (inner != std::string_view::npos) {
        problem = "piece " + std::to_string(info.pieces.size()) + " is malformed";
        *ok = false;
      }
      info.pieces.push_back(std::move(piece));
    } else {
      size_t inner = ForEachField(message, [&](uint32_t n, uint32_t w, WireReader& tr, bool* tok) {
        if (w != 0 || (n != 3 && n != 35)) return false;
        uint64_t value = 0;
        *tok = tr.Varint(&value);
        if (n == 3) {
          *tok = *tok && value >= 1 && value <= 4;
          info.model_type = static_cast<Info::ModelType>(value);
        } else {
          info.byte_fallback = value != 0;
        }
        return true;
      });
      if (inner != std::string_view::npos) {
        problem = "trainer_spec is malformed";
        *ok = false;
      }
    }
    return true;
  });
  if (at != std::string_view::npos) return bad(at, problem.empty() ? "a malformed field" : problem);
  if (info.pieces.empty()) return bad(bytes.size(), "no pieces");
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
