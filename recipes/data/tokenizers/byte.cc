#include "recipes/data/tokenizers/byte.h"

#include <cstdio>

namespace tmx::data {

ByteTokenizer::ByteTokenizer() {
  bos_id_ = kBos;
  eos_id_ = kEos;
  pad_id_ = kPad;
  special_tokens_ = {{"<|bos|>", kBos}, {"<|eos|>", kEos}, {"<|pad|>", kPad}};
}

std::vector<int64_t> ByteTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() + 2);
  if (options.add_bos) ids.push_back(kBos);
  for (char c : text) ids.push_back(static_cast<int64_t>(static_cast<unsigned char>(c)));
  if (options.add_eos) ids.push_back(kEos);
  return ids;
}

std::string ByteTokenizer::Decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string text;
  text.reserve(ids.size());
  for (int64_t id : ids) {
    if (id >= 0 && id < 256) {
      text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    } else if (id == kBos || id == kEos || id == kPad) {
      if (!skip_special) text += Piece(id);
    } else {
      text += "<|unk:" + std::to_string(id) + "|>";
    }
  }
  return text;
}

std::string ByteTokenizer::Piece(int64_t id) const {
  if (id == kBos) return "<|bos|>";
  if (id == kEos) return "<|eos|>";
  if (id == kPad) return "<|pad|>";
  if (id >= 0x20 && id < 0x7F) return std::string(1, static_cast<char>(id));
  if (id >= 0 && id < 256) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned>(id));
    return buf;
  }
  return "<|unk:" + std::to_string(id) + "|>";
}

}  // namespace tmx::data
