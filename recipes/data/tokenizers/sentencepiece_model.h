// What tune-matrix reads of a SentencePiece model itself, beside Debian's libsentencepiece 0.1.97:
//   - ParseSentencePieceModel: the pieces, the model type and byte fallback, and a check of the normalizer's
//     precompiled character map that sentencepiece 0.2.x makes and 0.1.97 does not: a damaged or hostile map
//     made 0.1.97 read outside its buffers (a segmentation fault on the first text), so it is refused first.
//   - UnigramSegmenter: unigram segmentation as sentencepiece 0.2.1+ computes it (the version torchtune's Python
//     package installs), for the unigram models 0.1.97 would segment differently.
//
// Why: both versions pick the best-scoring path through the lattice of pieces, but 0.1.97 adds each piece's score
// to the path's in double precision (a user-defined symbol's bonus is a double and makes the sum one) while 0.2.x
// adds in float; on texts with two paths of equal score ("www" = "w"+"ww" = "ww"+"w") the rounding decides, so
// about one text in four with repeated letters got other ids than torchtune. 0.2.x also scores user-defined
// symbols 0.1 * (bytes - 1) and re-bases path scores past 1e5. BPE models segment alike in both versions
// (checked on 50,000 texts), so only unigram models take this path.
//
// The library still normalizes (NFKC maps, whitespace); this module segments the normalized text. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tmx::data {

// The fields of a serialized sentencepiece ModelProto that segmentation needs (sentencepiece_model.proto:
// ModelProto.pieces = 1 {piece = 1, score = 2, type = 3}, ModelProto.trainer_spec = 2 {model_type = 3,
// byte_fallback = 35}), read with a bounds-checked protobuf wire reader; every other field is skipped.
struct SentencePieceModelInfo {
  enum class PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  enum class ModelType { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };
  struct Piece {
    std::string text;
    float score = 0;
    PieceType type = PieceType::kNormal;
  };
  std::vector<Piece> pieces;
  ModelType model_type = ModelType::kUnigram;
  bool byte_fallback = false;
};

// InvalidArgument "<source>: not a SentencePiece model (<what is wrong at which byte>)" for malformed bytes, and
// "<source>: normalizer_spec.precompiled_charsmap is damaged (<what>); ..." (or denormalizer_spec) for a
// character map that would make the library read outside it: its double-array trie is checked as sentencepiece
// 0.2.x's darts validate() does (every child inside the array, every value inside the replacement strings), the
// strings must end with a NUL, and no text may match more than 32 rules (0.1.97's fixed result buffer); and
// "<source>: not a usable SentencePiece model (<what>); ..." for pieces 0.2.x refuses and 0.1.97 crashed on
// (CheckPieces: an empty piece aborted its trie builder).
StatusOr<SentencePieceModelInfo> ParseSentencePieceModel(std::string_view bytes, const std::string& source);

// The precompiled_charsmap check above, alone: an empty map (no normalization) passes. Returns what is wrong.
Status CheckPrecompiledCharsMap(std::string_view blob);

// The pieces as sentencepiece 0.2.x's ModelInterface checks them: none empty, holding a NUL or of 8000 bytes
// or more; finite scores; no text twice among the trie's pieces (normal, user-defined, unused) nor among the
// others; at most one unknown piece, and one unless byte_fallback; byte pieces only with byte_fallback, each
// "<0xNN>", all 256 of them. Returns what is wrong.
Status CheckPieces(const SentencePieceModelInfo& info);

class UnigramSegmenter {
 public:
  explicit UnigramSegmenter(const SentencePieceModelInfo& model);

  // (piece, id) for `normalized`, exactly as sentencepiece 0.2.x's unigram Model::Encode (EncodeOptimized):
  // pieces are views into `normalized`; a character no piece covers is one piece with the unknown id.
  std::vector<std::pair<std::string_view, int>> Segment(std::string_view normalized) const;

  int unk_id() const { return unk_id_; }

 private:
  // The pieces as a byte trie: node 0 is the root, an edge is found by (node << 8 | byte), and a node where a
  // piece ends holds its entry. A walk stops at the first byte no piece continues with, as the library's does.
  struct Entry {
    int id = -1;  // -1: no piece ends here
    float score = 0;
    bool user_defined = false;
  };
  std::unordered_map<uint64_t, int32_t> edges_;
  std::vector<Entry> nodes_{Entry()};
  float min_score_ = 0;
  int unk_id_ = 0;
};

}  // namespace tmx::data
