#include "recipes/data/inspect.h"

#include <string_view>
#include <utility>

namespace tmx::data {
namespace {

constexpr std::pair<std::string_view, std::string_view> kEscapes[] = {
    {"\n", "\\n"}, {"\t", "\\t"}, {"\r", "\\r"}, {"<0x0A>", "\\n"}, {"<0x09>", "\\t"}, {"<0x0D>", "\\r"}};

}  // namespace

std::string DescribeTokens(const Tokenizer& tokenizer, const std::vector<int64_t>& ids, const std::vector<bool>& mask) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string shown = tokenizer.Piece(ids[i]);
    // Raw control characters (SentencePiece, special tokens) and byte-level pieces of the same characters.
    for (const auto& [from, to] : kEscapes) {
      for (size_t at = shown.find(from); at != std::string::npos; at = shown.find(from, at + to.size())) {
        shown.replace(at, from.size(), to);
      }
    }
    out += std::to_string(i) + "\t" + std::to_string(ids[i]) + "\t" + shown;
    if (i < mask.size() && mask[i]) out += "\tmasked";
    out += "\n";
  }
  return out;
}

}  // namespace tmx::data
