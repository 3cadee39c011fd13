#include "matrix/escape.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace tmx::matrix {
namespace {

// Bidirectional controls and marks: they reorder the text around them as shown (a reason that reads one way and
// says another), so no published format keeps them.
bool ReordersText(uint32_t cp) {
  return cp == 0x61C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string CollapseLineBreaks(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '\r' && s[i] != '\n') {
      out += s[i++];
      continue;
    }
    while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
    if (!out.empty() && i < s.size()) out += ' ';
  }
  return out;
}

std::string YamlQuote(const std::string& raw) {
  std::string s = CollapseLineBreaks(raw);
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (cp == '"') {
      out += "\\\"";
    } else if (cp == '\\') {
      out += "\\\\";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
      std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF || cp == 0xFFFE || cp == 0xFFFF) {
      std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(s, i, len);
    }
    i += len;
  }
  return out + "\"";
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    size_t len = DecodeUtf8(text, i, &cp);
    if (len == 0) {
      ++i;
      continue;
    }
    bool holdable = (cp >= 0x20 || cp == '\t' || cp == '\n' || cp == '\r') && cp != 0xFFFE && cp != 0xFFFF &&
                    !ReordersText(cp);
    if (holdable) {
      switch (cp) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        default:
          out.append(text, i, len);
      }
    }
    i += len;
  }
  return out;
}

std::string ScriptJson(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  char buf[8];
  for (size_t i = 0; i < json.size();) {
    uint32_t cp;
    const size_t len = std::max<size_t>(1, DecodeUtf8(json, i, &cp));
    if (cp == '<' || cp == '>' || cp == '&' || cp == 0x2028 || cp == 0x2029 || ReordersText(cp)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(json, i, len);
    }
    i += len;
  }
  return out;
}

std::string MarkdownCell(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\r' || text[i] == '\n') {  // a run of line breaks is one space, none at either end
      while (i < text.size() && (text[i] == '\r' || text[i] == '\n')) ++i;
      if (!out.empty() && i < text.size()) out += ' ';
      continue;
    }
    uint32_t cp;
    const size_t len = DecodeUtf8(text, i, &cp);
    if (len == 0 || (cp < 0x20 && cp != '\t') || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || ReordersText(cp)) {
      i += len == 0 ? 1 : len;  // invalid UTF-8, a control character or a bidi control: dropped
      continue;
    }
    if (cp < 0x80 && std::string_view("\\`*_[]<>|~&").find(static_cast<char>(cp)) != std::string_view::npos) {
      out += '\\';
    }
    out.append(text, i, len);
    i += len;
  }
  return out;
}

std::string MarkdownCode(const std::string& name) {
  const bool plain = !name.empty() && name.find_first_of("`|") == std::string::npos && TerminalText(name) == name;
  return plain ? "`" + name + "`" : MarkdownCell(name);
}

}  // namespace tmx::matrix
