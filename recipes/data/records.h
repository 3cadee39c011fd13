// Records: the rows of a local data file as JSON values, each with the file:line it starts at, for messages that
// point at the offending row. Torch-free.
//
// Formats (Hugging Face `datasets` builders of the same names):
//   json   a top-level JSON array of objects, or JSON Lines (one object per line; blank lines skipped)
//   jsonl  JSON Lines
//   csv    RFC 4180 with a header row; every value is a string; quoted fields may hold commas, "" and newlines
//   text   one record {"text": line} per non-empty line (Hugging Face also yields empty lines; they would be
//          empty samples, so they are skipped); a line ends at '\n', "\r\n" or a lone '\r' (Python's universal
//          newlines)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx::data {

struct Record {
  nlohmann::json value;
  std::string path;
  int64_t line = 0;
  // "<path>:<line>: ", the prefix of every message about this record.
  std::string where() const { return path + ":" + std::to_string(line) + ": "; }
};

// InvalidArgument "<path>:<line>:<column>: ..." (base/json_io.h's ParseJsonText: the field and the problem, such as
// a number out of a double's range, and a fix) for bad JSON; "<path>: the top-level value is ..." for JSON that is
// neither an array nor JSON Lines.
StatusOr<std::vector<Record>> ParseJsonArray(const std::string& path, const std::string& text);
StatusOr<std::vector<Record>> ParseJsonLines(const std::string& path, const std::string& text);
// A .json file: an array when its first non-space character is '[', else JSON Lines.
StatusOr<std::vector<Record>> ParseJson(const std::string& path, const std::string& text);
// InvalidArgument "<path>:<line>: ..." for an unterminated quote or a row with more fields than the header.
StatusOr<std::vector<Record>> ParseCsv(const std::string& path, const std::string& text);
std::vector<Record> ParseTextLines(const std::string& path, const std::string& text);

// Reads `path` and parses it as `format` ("json", "jsonl", "csv" or "text"). NotFound/IoError for the file.
StatusOr<std::vector<Record>> ReadRecords(const std::string& path, const std::string& format);

// "a string", "an array", "null" ...: the type of `value` as a message names it.
std::string DescribeJson(const nlohmann::json& value);

}  // namespace tmx::data
