// Text made safe for the formats the matrix writes: a YAML double-quoted scalar (the support block), XML
// (JUnit) and HTML (the support page). One UTF-8 decoder serves them all, so every format treats invalid
// input the same way: as bytes that are replaced (YAML) or dropped (XML, HTML), never passed through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/text.h"

namespace tmx::matrix {

using ::tmx::DecodeUtf8;  // base/text.h

// Replaces each run of whitespace that contains a line break by one space, dropping it at either end.
std::string CollapseLineBreaks(const std::string& s);

// A YAML double-quoted scalar for `raw`: line breaks collapsed, invalid UTF-8 replaced by U+FFFD, quotes,
// backslashes and non-printable characters escaped.
std::string YamlQuote(const std::string& raw);

// `text` for XML 1.0 character data and attribute values: & < > " ' as entities; characters XML cannot
// hold (invalid UTF-8, control characters other than tab and line breaks, U+FFFE, U+FFFF) dropped.
std::string XmlEscape(const std::string& text);

// `text` for HTML text and attribute values: XmlEscape's rules (HTML takes the same entities).
inline std::string HtmlEscape(const std::string& text) { return XmlEscape(text); }

}  // namespace tmx::matrix
