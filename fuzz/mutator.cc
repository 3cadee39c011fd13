#include "fuzz/mutator.h"

#include <algorithm>
#include <utility>

namespace tmx::fuzz {

Mutator::Mutator(uint64_t seed, std::vector<std::string> dictionary)
    : engine_(seed), dictionary_(std::move(dictionary)) {}

std::string Mutator::Mutate(const std::string& input, const std::vector<std::string>& corpus, size_t max_size) {
  std::string s = input;
  size_t edits = 1 + Below(4);
  for (size_t i = 0; i < edits; ++i) MutateOnce(&s, corpus);
  if (s.size() > max_size) s.resize(max_size);
  return s;
}

void Mutator::MutateOnce(std::string* s, const std::vector<std::string>& corpus) {
  auto at = [&] { return s->empty() ? 0 : Below(s->size() + 1); };
  auto span = [&](size_t from) { return s->size() <= from ? 0 : 1 + Below(std::min<size_t>(64, s->size() - from)); };
  switch (Below(10)) {
    case 0:  // flip a bit
      if (!s->empty()) (*s)[Below(s->size())] ^= static_cast<char>(1u << Below(8));
      break;
    case 1:  // set a byte, printable or not
      if (!s->empty()) (*s)[Below(s->size())] = static_cast<char>(Below(256));
      break;
    case 2:
    case 3:  // insert a token
      if (!dictionary_.empty()) s->insert(at(), dictionary_[Below(dictionary_.size())]);
      break;
    case 4: {  // delete a range
      size_t from = at();
      s->erase(std::min(from, s->size()), span(from));
      break;
    }
    case 5: {  // duplicate a range in place
      size_t from = at();
      std::string piece = s->substr(std::min(from, s->size()), span(from));
      s->insert(std::min(from, s->size()), piece);
      break;
    }
    case 6: {  // repeat a range many times (nesting, fan-out, long lines)
      size_t from = at();
      std::string piece = s->substr(std::min(from, s->size()), 1 + Below(8));
      std::string repeated;
      for (size_t n = 2 + Below(200); n > 0; --n) repeated += piece;
      s->insert(std::min(from, s->size()), repeated);
      break;
    }
    case 7: {  // swap two lines
      std::vector<std::string> lines;
      for (size_t pos = 0; pos <= s->size();) {
        size_t end = s->find('\n', pos);
        if (end == std::string::npos) end = s->size();
        lines.push_back(s->substr(pos, end - pos));
        pos = end + 1;
      }
      if (lines.size() > 1) std::swap(lines[Below(lines.size())], lines[Below(lines.size())]);
      std::string out;
      for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
      *s = out;
      break;
    }
    case 8: {  // splice in a piece of another input
      if (corpus.empty()) break;
      const std::string& other = corpus[Below(corpus.size())];
      if (other.empty()) break;
      size_t from = Below(other.size());
      s->insert(at(), other.substr(from, 1 + Below(std::min<size_t>(256, other.size() - from))));
      break;
    }
    default: {  // replace a number-like run of digits with an edge value
      static const char* kEdges[] = {
          "0",      "-1",         "1e999", "-1e999",    "18446744073709551616", "9223372036854775807", "-0.0", "nan",
          "1e-400", "2147483648", "255",   "4294967296"};
      size_t pos = s->find_first_of("0123456789", at());
      if (pos == std::string::npos) break;
      size_t end = s->find_first_not_of("0123456789.eE+-", pos);
      s->replace(pos, (end == std::string::npos ? s->size() : end) - pos, kEdges[Below(std::size(kEdges))]);
      break;
    }
  }
}

std::vector<std::string> YamlDictionary() {
  return {"&a ",
          "*a",
          "&b ",
          "*b",
          "[",
          "]",
          "{",
          "}",
          ": ",
          "- ",
          "\n  ",
          "\n",
          "${",
          "${a}",
          "}",
          "${model.lora_rank}",
          "${output_dir}",
          "~",
          "null",
          "None",
          "True",
          "'",
          "\"",
          "#",
          "---\n",
          "...\n",
          "!!str ",
          "!!map ",
          "? ",
          "|\n  ",
          ">\n  ",
          "_component_: ",
          "<<: *a",
          "\t",
          ",",
          "\xef\xbb\xbf",
          "\r\n",
          "1e999",
          "-1",
          "a.b.c",
          "=",
          "%YAML 1.2\n"};
}

std::vector<std::string> JsonDictionary() {
  return {"{",
          "}",
          "[",
          "]",
          ",",
          ":",
          "\"",
          "\\",
          "\\u0000",
          "\\ud800",
          "null",
          "true",
          "false",
          "1e999",
          "-1",
          "0.5",
          "\"nan\"",
          "\"inf\"",
          "\n",
          "\"cuda:0\"",
          "\"cpu\"",
          "\"auto\"",
          "\"2099-01-01T00:00:00Z\"",
          "\"2026-02-30T00:00:00Z\"",
          "18446744073709551615",
          "-9223372036854775809",
          "\"schema_version\":1",
          "\xff",
          "\xc3\x28"};
}

}  // namespace tmx::fuzz
