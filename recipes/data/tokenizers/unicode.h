// Unicode helpers the tokenizers share: UTF-8 walking, NFC normalization (utf8proc) and a PCRE2 regex in UTF
// mode with Unicode properties (\p{L}, \p{N}, Unicode \s), as the tiktoken and Hugging Face pre-tokenizer
// patterns need. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tmx::data {

// `text` with every invalid UTF-8 sequence replaced by U+FFFD (one per maximal invalid subpart, as Python's
// bytes.decode(errors="replace") does). Valid text is returned unchanged.
std::string ToValidUtf8(std::string_view text);

// Canonical composition (Unicode NFC), as Python's unicodedata.normalize("NFC", text).
// REQUIRES: `text` is valid UTF-8.
std::string NormalizeNfc(std::string_view text);

// Byte length of the UTF-8 sequence that starts with `lead` (1 for a stray continuation byte).
size_t Utf8SequenceLength(unsigned char lead);

// Decodes the code point at text[*pos] and advances *pos past it. REQUIRES: valid UTF-8, *pos < size.
char32_t NextCodePoint(std::string_view text, size_t* pos);

// How a token's bytes are shown to a person: the text itself when it is valid UTF-8 without control characters,
// otherwise each byte as "<0xAB>" (control characters and bytes of broken sequences) and the rest as text.
std::string PrintableBytes(std::string_view bytes);

// Calls fn(line_number, line, offset) for each '\n'-separated line of `text` (1-based numbers; the line without its
// '\n'; the offset of its first byte) and returns the first non-ok Status fn returns.
template <typename Fn>
Status ForEachLine(std::string_view text, Fn&& fn) {
  size_t begin = 0;
  for (int64_t line = 1; begin < text.size(); ++line) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    Status status = fn(line, text.substr(begin, end - begin), begin);
    if (!status.ok()) return status;
    begin = end + 1;
  }
  return Status::OK();
}

// Python's str.isspace() for one code point.
bool IsPythonSpace(char32_t c);

// A compiled PCRE2 pattern (UTF + UCP, JIT-compiled when the library supports it). Thread-safe after Compile:
// each FindAll uses its own match data. Not copyable (owns the compiled code).
class UnicodeRegex {
 public:
  // InvalidArgument naming the pattern, the offset and PCRE2's reason when `pattern` does not compile.
  static StatusOr<std::unique_ptr<UnicodeRegex>> Compile(const std::string& pattern);
  ~UnicodeRegex();
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  // The successive non-overlapping leftmost matches in `text`, as Python's re.findall / tiktoken's find_iter
  // return them. Empty matches are skipped. REQUIRES: `text` is valid UTF-8 (see ToValidUtf8).
  // InvalidArgument naming the pattern, the byte offset and PCRE2's reason when matching stops on an error, such
  // as PCRE2's match limit (a pattern that backtracks catastrophically on this text): the rest of the text would
  // otherwise be silently lost.
  StatusOr<std::vector<std::string_view>> FindAll(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  UnicodeRegex(std::string pattern, void* code) : pattern_(std::move(pattern)), code_(code) {}
  std::string pattern_;
  void* code_;  // pcre2_code_8*, kept opaque so that users do not include pcre2.h
};

}  // namespace tmx::data
