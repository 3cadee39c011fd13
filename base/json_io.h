// JSON in and out of the project's files and messages, safely:
//   - ParseJsonText: every way the JSON library can reject a text (bad syntax, a number out of a double's range
//     such as 1e999, ...) becomes an InvalidArgument naming the file, line, column and field, with a fix; it
//     never throws, so a hostile file cannot turn into a raw library message or an abort.
//   - DumpJson / JsonForMessage: never throw; bytes in strings that are not UTF-8 (an error message quoting a
//     file name, a path) are written as U+FFFD instead of making the library throw type_error.316.
//   - NumberToJson / NumberFromJson: JSON has no NaN or infinity, and a non-finite loss is exactly what a failed
//     run reports, so those values travel as the strings "nan", "inf" and "-inf" (run summaries, journals).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tmx {

// Parses `text`, read from `path` (used only in messages); `first_line` is the line of that file the text starts
// on (a JSON Lines record), so that positions are the file's. Never throws. On failure, InvalidArgument
//   "<path>:<line>:<column>: [in <field>: ]<problem>; fix: <fix>"
// where <field> is where in the document the parser stopped (e.g. `messages[0].content`), and <problem> is
// "number 1e999 is out of range (...)" for a number no double holds, else "invalid JSON (<the parser's detail>)".
StatusOr<nlohmann::json> ParseJsonText(const std::string& path, std::string_view text, int64_t first_line = 1);

// `value` as JSON text: compact when `indent` < 0, else pretty-printed with `indent` spaces. Never throws;
// invalid UTF-8 in strings is replaced by U+FFFD. Every file this project writes and every message that shows
// a JSON value goes through here.
std::string DumpJson(const nlohmann::json& value, int indent = -1);
std::string DumpJson(const nlohmann::ordered_json& value, int indent = -1);

// DumpJson(value), cut to at most `max_bytes` bytes (at a character boundary, then "...") so that a message
// quoting a value from a user's file stays one readable line.
std::string JsonForMessage(const nlohmann::json& value, size_t max_bytes = 120);

// `d` as a JSON number, or "nan", "inf", "-inf".
nlohmann::json NumberToJson(double d);

// A JSON number, or one of the three strings, as a double; nullopt for anything else.
std::optional<double> NumberFromJson(const nlohmann::json& j);

}  // namespace tmx
