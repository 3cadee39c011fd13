#include "recipes/data/records.h"

#include <algorithm>

#include "base/file_util.h"
#include "base/input_file.h"
#include "base/json_io.h"
#include "recipes/data/tokenizers/unicode.h"

namespace tmx::data {
namespace {

using nlohmann::json;

std::string DescribeImpl(const json& value) {
  if (value.is_null()) return "null";
  if (value.is_array() || value.is_object()) return std::string("an ") + value.type_name();
  return std::string("a ") + value.type_name();
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// "<path>:<line>: " (the prefix of every message about one record).
std::string Where(const std::string& path, int64_t line) { return path + ":" + std::to_string(line) + ": "; }

// The 1-based line of byte `offset` in `text`, counting from `from_offset` at `from_line` so that
// increasing offsets are counted in linear time overall.
int64_t LineAt(const std::string& text, size_t offset, size_t* from_offset, int64_t* from_line) {
  offset = std::min(offset, text.size());
  *from_line += std::count(text.begin() + static_cast<std::ptrdiff_t>(*from_offset),
                           text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
  *from_offset = offset;
  return *from_line;
}

// Byte offsets where the elements of the top-level array in `text` start. REQUIRES: `text` is valid
// JSON whose top-level value is an array.
std::vector<size_t> TopLevelElementOffsets(const std::string& text) {
  std::vector<size_t> starts;
  size_t i = text.find('[');
  if (i == std::string::npos) return starts;
  auto skip_space = [&](size_t j) {
    while (j < text.size() && IsJsonSpace(text[j])) ++j;
    return j;
  };
  i = skip_space(i + 1);
  if (i >= text.size() || text[i] == ']') return starts;
  starts.push_back(i);
  int depth = 1;
  bool in_string = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) break;
    } else if (c == ',' && depth == 1) {
      i = skip_space(i + 1);
      starts.push_back(i);
      --i;  // the loop's ++i lands on the element's first character
    }
  }
  return starts;
}

}  // namespace

std::string DescribeJson(const json& value) { return DescribeImpl(value); }

StatusOr<std::vector<Record>> ParseJsonArray(const std::string& path, const std::string& text) {
  StatusOr<json> parsed = ParseJsonText(path, text);
  if (!parsed.ok()) return parsed.status();
  json& doc = *parsed;
  if (!doc.is_array()) {
    return Status::InvalidArgument(path + ": the top-level value is " + DescribeJson(doc) +
                                   ", expected an array of records; fix: wrap the records in [...], or write one "
                                   "record per line to a .jsonl file");
  }
  std::vector<size_t> offsets = TopLevelElementOffsets(text);
  if (offsets.size() != doc.size()) {
    return Status::Internal(path + ": found " + std::to_string(offsets.size()) + " array elements, the JSON parser " +
                            std::to_string(doc.size()));
  }
  std::vector<Record> records;
  records.reserve(doc.size());
  size_t from = 0;
  int64_t line = 1;
  for (size_t i = 0; i < doc.size(); ++i) {
    records.push_back(Record{std::move(doc[i]), path, LineAt(text, offsets[i], &from, &line)});
  }
  return records;
}

StatusOr<std::vector<Record>> ParseJsonLines(const std::string& path, const std::string& text) {
  std::vector<Record> records;
  Status status = ForEachLine(text, [&](int64_t line, std::string_view content, size_t) {
    if (std::all_of(content.begin(), content.end(), [](char c) { return IsJsonSpace(c); })) return Status::OK();
    StatusOr<json> value = ParseJsonText(path, content, line);
    if (!value.ok()) return value.status();
    records.push_back(Record{std::move(value).value(), path, line});
    return Status::OK();
  });
  if (!status.ok()) return status;
  return records;
}

StatusOr<std::vector<Record>> ParseJson(const std::string& path, const std::string& text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') return ParseJsonArray(path, text);
  return ParseJsonLines(path, text);
}

StatusOr<std::vector<Record>> ParseCsv(const std::string& path, const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> row_lines;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, field_started = false;
  int64_t line = 1, row_line = 1, quote_line = 1;
  auto end_field = [&] {
    row.push_back(field);
    field.clear();
    field_started = false;
  };
  auto end_row = [&] {
    end_field();
    if (!(row.size() == 1 && row[0].empty())) {  // skip blank lines
      rows.push_back(row);
      row_lines.push_back(row_line);
    }
    row.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
    } else if (c == '"' && !field_started) {
      quoted = field_started = true;
      quote_line = line;
    } else if (c == ',') {
      end_field();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_row();
      row_line = ++line;
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted) {
    return Status::InvalidArgument(path + ":" + std::to_string(quote_line) +
                                   ": a quoted field is never closed; fix: end it with a double quote (write \"\" "
                                   "for a quote inside it)");
  }
  if (field_started || !row.empty()) end_row();
  std::vector<Record> records;
  if (rows.empty()) return records;
  const std::vector<std::string>& header = rows[0];
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() > header.size()) {
      return Status::InvalidArgument(path + ":" + std::to_string(row_lines[r]) + ": row has " +
                                     std::to_string(rows[r].size()) + " fields, the header " +
                                     std::to_string(header.size()) + "; fix: quote fields that contain commas");
    }
    json value = json::object();
    for (size_t k = 0; k < header.size(); ++k) value[header[k]] = k < rows[r].size() ? rows[r][k] : "";
    records.push_back(Record{std::move(value), path, row_lines[r]});
  }
  return records;
}

std::vector<Record> ParseTextLines(const std::string& path, const std::string& text) {
  // Lines end at '\n', "\r\n" or a lone '\r', as Python's universal newlines read them (Hugging Face's text
  // builder opens the file in text mode), and as ParseCsv counts lines.
  std::vector<Record> records;
  int64_t line = 1;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find_first_of("\r\n", begin);
    if (end == std::string::npos) end = text.size();
    if (end > begin) records.push_back(Record{json{{"text", text.substr(begin, end - begin)}}, path, line});
    if (end < text.size() && text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n') ++end;
    begin = end + 1;
    ++line;
  }
  return records;
}

StatusOr<std::vector<Record>> ReadRecords(const std::string& path, const std::string& format) {
  StatusOr<std::string> text = ReadFile(path, DatasetInput());
  if (!text.ok()) return text.status();
  if (format == "json") return ParseJson(path, *text);
  if (format == "jsonl") return ParseJsonLines(path, *text);
  if (format == "csv") return ParseCsv(path, *text);
  if (format == "text") return ParseTextLines(path, *text);
  return Status::InvalidArgument(path + ": format \"" + format +
                                 "\" is not supported; fix: use json, jsonl, csv or text");
}

}  // namespace tmx::data
