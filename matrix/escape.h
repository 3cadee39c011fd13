// Text made safe for the formats the matrix writes: a YAML double-quoted scalar (the support block), XML
// (JUnit), HTML (the support page), a Markdown table cell (SUPPORT.md, the calibration and numeric tables) and
// terminal text (what check, compare and cell print of records). One function per format, through which every
// field of a record goes; one UTF-8 decoder serves them all, so every format treats invalid input the same way:
// as bytes that are replaced (YAML), dropped (XML, HTML, Markdown) or shown escaped (terminal), never passed
// through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/text.h"

namespace tmx::matrix {

using ::tmx::DecodeUtf8;    // base/text.h
using ::tmx::TerminalText;  // base/text.h: control characters, bidi controls and invalid UTF-8 shown escaped

// Replaces each run of whitespace that contains a line break by one space, dropping it at either end.
std::string CollapseLineBreaks(const std::string& s);

// A YAML double-quoted scalar for `raw`: line breaks collapsed, invalid UTF-8 replaced by U+FFFD, quotes,
// backslashes and non-printable characters escaped.
std::string YamlQuote(const std::string& raw);

// `text` for XML 1.0 character data and attribute values: & < > " ' as entities; characters XML cannot
// hold (invalid UTF-8, control characters other than tab and line breaks, U+FFFE, U+FFFF) and bidirectional
// controls (which reorder what is shown around them) dropped.
std::string XmlEscape(const std::string& text);

// `text` for HTML text and attribute values: XmlEscape's rules (HTML takes the same entities).
inline std::string HtmlEscape(const std::string& text) { return XmlEscape(text); }

// JSON text for a <script type="application/json"> element of a page: '<', '>' and '&' (so no "</script>" or
// "<!--" can end or change the element), the line and paragraph separators and the bidirectional controls
// written as \uXXXX escapes, which JSON reads back as the same characters. REQUIRES: valid UTF-8 (DumpJson's).
std::string ScriptJson(const std::string& json);

// `text` for a GitHub-flavoured Markdown table cell: one line (line breaks collapsed), the characters that would
// end the cell or start formatting, code, links or HTML (\ ` * _ [ ] < > | ~ &) backslash-escaped, and what a
// text file should not hold (control characters, bidirectional controls, invalid UTF-8) dropped.
std::string MarkdownCell(const std::string& text);

// A name (config, recipe) as inline code in a Markdown table cell, unless it holds what a code span in a table
// cannot (a backtick, '|', a line break, a control character): then MarkdownCell's escaped text.
std::string MarkdownCode(const std::string& name);

}  // namespace tmx::matrix
