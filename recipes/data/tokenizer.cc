#include "recipes/data/tokenizer.h"

namespace tmx::data {

std::vector<int64_t> ByteTokenizer::Encode(const std::string& text, bool add_bos, bool add_eos) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() + 2);
  if (add_bos) ids.push_back(kBos);
  for (char c : text) ids.push_back(static_cast<int64_t>(static_cast<unsigned char>(c)));
  if (add_eos) ids.push_back(kEos);
  return ids;
}

std::string ByteTokenizer::Decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string text;
  text.reserve(ids.size());
  for (int64_t id : ids) {
    if (id >= 0 && id < 256) {
      text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    } else if (id == kBos || id == kEos || id == kPad) {
      if (skip_special) continue;
      text += id == kBos ? "<|bos|>" : id == kEos ? "<|eos|>" : "<|pad|>";
    } else {
      text += "<|unk:" + std::to_string(id) + "|>";
    }
  }
  return text;
}

}  // namespace tmx::data
