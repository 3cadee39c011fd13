#include "recipes/data/tokenizers/unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <cstdlib>

namespace tmx::data {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence at text[pos], or 0 with *bad set to how many bytes form the maximal invalid
// subpart (at least 1), following the Unicode "maximal subpart" rule Python uses.
size_t ValidSequenceAt(std::string_view text, size_t pos, size_t* bad) {
  unsigned char c = static_cast<unsigned char>(text[pos]);
  size_t n = Utf8SequenceLength(c);
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c < 0x80) return 1;
  if (c < 0xC2 || c > 0xF4) {
    *bad = 1;
    return 0;
  }
  if (c == 0xE0) lo = 0xA0;
  if (c == 0xED) hi = 0x9F;
  if (c == 0xF0) lo = 0x90;
  if (c == 0xF4) hi = 0x8F;
  size_t i = 1;
  for (; i < n && pos + i < text.size(); ++i) {
    unsigned char b = static_cast<unsigned char>(text[pos + i]);
    bool ok = i == 1 ? (b >= lo && b <= hi) : IsContinuation(b);
    if (!ok) break;
  }
  if (i == n) return n;
  *bad = i;
  return 0;
}

}  // namespace

size_t Utf8SequenceLength(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

std::string ToValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t bad = 0;
    size_t n = ValidSequenceAt(text, pos, &bad);
    if (n > 0) {
      out.append(text.substr(pos, n));
      pos += n;
    } else {
      out += kReplacement;
      pos += bad;
    }
  }
  return out;
}

std::string NormalizeNfc(std::string_view text) {
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return std::string(text);  // invalid UTF-8: the caller broke the REQUIRES; keep the text
  std::string out(reinterpret_cast<char*>(result), static_cast<size_t>(n));
  std::free(result);
  return out;
}

char32_t NextCodePoint(std::string_view text, size_t* pos) {
  unsigned char c = static_cast<unsigned char>(text[*pos]);
  size_t n = Utf8SequenceLength(c);
  char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t i = 1; i < n && *pos + i < text.size(); ++i) {
    cp = (cp << 6) | (static_cast<unsigned char>(text[*pos + i]) & 0x3F);
  }
  *pos += n;
  return cp;
}

std::string PrintableBytes(std::string_view bytes) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (size_t pos = 0; pos < bytes.size();) {
    size_t bad = 0;
    size_t n = ValidSequenceAt(bytes, pos, &bad);
    unsigned char c = static_cast<unsigned char>(bytes[pos]);
    if (n > 0 && !(n == 1 && (c < 0x20 || c == 0x7F))) {
      out.append(bytes.substr(pos, n));
      pos += n;
      continue;
    }
    for (size_t i = 0; i < (n > 0 ? n : bad); ++i) {
      unsigned char b = static_cast<unsigned char>(bytes[pos + i]);
      out += std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
    }
    pos += n > 0 ? n : bad;
  }
  return out;
}

bool IsPythonSpace(char32_t c) {
  // Python: bidirectional type WS, B or S, or category Zs.
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85) return true;
  if (c < 0x80) return false;
  utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

StatusOr<std::unique_ptr<UnicodeRegex>> UnicodeRegex::Compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                   &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return Status::InvalidArgument("regex pattern " + pattern + ": does not compile at offset " +
                                   std::to_string(offset) + " (" + reinterpret_cast<char*>(message) +
                                   "); fix: use a pattern in PCRE2/Python regex syntax");
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  return std::unique_ptr<UnicodeRegex>(new UnicodeRegex(pattern, code));
}

UnicodeRegex::~UnicodeRegex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

StatusOr<std::vector<std::string_view>> UnicodeRegex::FindAll(std::string_view text) const {
  std::vector<std::string_view> matches;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  PCRE2_SIZE start = 0;
  while (start < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {  // a resource limit (match, depth or heap limit) or another matching error
      pcre2_match_data_free(data);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      return Status::InvalidArgument("regex pattern " + pattern_ + ": matching stopped at byte " +
                                     std::to_string(start) + " of a " + std::to_string(text.size()) +
                                     "-byte text (PCRE2: " + reinterpret_cast<char*>(message) +
                                     "); fix: use a pattern that does not backtrack catastrophically (the model's "
                                     "own), or split the text into shorter samples");
    }
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    PCRE2_SIZE begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.push_back(text.substr(begin, end - begin));
      start = end;
    } else {
      start = begin + Utf8SequenceLength(static_cast<unsigned char>(text[begin]));
    }
  }
  pcre2_match_data_free(data);
  return matches;
}

}  // namespace tmx::data
