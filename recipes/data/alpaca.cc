#include "recipes/data/alpaca.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "harness/file_util.h"

namespace tmx::data {
namespace {

using nlohmann::json;

bool EndsWith(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(),
                    [](char lower, char c) { return std::tolower(static_cast<unsigned char>(c)) == lower; });
}

// "a string", "an array", "null" ...: the type of `value` as a message names it.
std::string Describe(const json& value) {
  if (value.is_null()) return "null";
  if (value.is_array() || value.is_object()) return std::string("an ") + value.type_name();
  return std::string("a ") + value.type_name();
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// "<path>:<line>: " (the prefix of every message about one record).
std::string Where(const std::string& path, int64_t line) { return path + ":" + std::to_string(line) + ": "; }

// nlohmann's parse_error text is "[json.exception.parse_error.101] parse error at line 1, column 5:
// <detail>"; keep only <detail>, since the caller states the position in the file itself.
std::string ParseErrorDetail(const json::parse_error& e) {
  std::string what = e.what();
  size_t column = what.find("column ");
  size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
  if (colon == std::string::npos) return what;
  return what.substr(colon + 2);
}

// The 1-based line of byte `offset` in `text`, counting from `from_offset` at `from_line` so that
// increasing offsets are counted in linear time overall.
int64_t LineAt(const std::string& text, size_t offset, size_t* from_offset, int64_t* from_line) {
  offset = std::min(offset, text.size());
  *from_line += std::count(text.begin() + static_cast<std::ptrdiff_t>(*from_offset),
                           text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
  *from_offset = offset;
  return *from_line;
}

Status InvalidJson(const std::string& path, const std::string& text, size_t base, int64_t base_line,
                   const json::parse_error& e) {
  // e.byte counts from 1 and points at the character where parsing failed.
  size_t offset = base + (e.byte > 0 ? e.byte - 1 : 0);
  size_t from = base;
  int64_t line = base_line;
  LineAt(text, offset, &from, &line);
  return Status::InvalidArgument(Where(path, line) + "invalid JSON (" + ParseErrorDetail(e) +
                                 "); fix: repair the file or regenerate it");
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

const char* kFieldsHint = "string fields \"instruction\" and \"output\" (and optionally \"input\")";

Status ReadField(const json& record, const char* field, bool required, const std::string& where,
                 std::string* out) {
  auto it = record.find(field);
  if (it == record.end() || (!required && it->is_null())) {
    if (!required) return Status::OK();
    return Status::InvalidArgument(where + "record has no \"" + field + "\" field; fix: give every record " +
                                   kFieldsHint);
  }
  if (!it->is_string()) {
    return Status::InvalidArgument(where + "field \"" + field + "\" is " + Describe(*it) +
                                   ", expected a string");
  }
  *out = it->get<std::string>();
  return Status::OK();
}

StatusOr<AlpacaRecord> ToRecord(const json& value, const std::string& where) {
  if (!value.is_object()) {
    return Status::InvalidArgument(where + "record is " + Describe(value) + ", expected an object with " + kFieldsHint);
  }
  AlpacaRecord record;
  TM_RETURN_IF_ERROR(ReadField(value, "instruction", true, where, &record.instruction));
  TM_RETURN_IF_ERROR(ReadField(value, "input", false, where, &record.input));
  TM_RETURN_IF_ERROR(ReadField(value, "output", true, where, &record.output));
  return record;
}

StatusOr<std::vector<AlpacaRecord>> ParseJsonArray(const std::string& path, const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return InvalidJson(path, text, 0, 1, e);
  }
  if (!doc.is_array()) {
    return Status::InvalidArgument(path + ": the top-level value is " + Describe(doc) + ", expected an array of records; fix: wrap the records in [...], or write "
                                   "one record per line to a .jsonl file");
  }
  std::vector<size_t> offsets = TopLevelElementOffsets(text);
  if (offsets.size() != doc.size()) {
    return Status::Internal(path + ": found " + std::to_string(offsets.size()) + " array elements, the JSON parser " +
                            std::to_string(doc.size()));
  }
  std::vector<AlpacaRecord> records;
  records.reserve(doc.size());
  size_t from = 0;
  int64_t line = 1;
  for (size_t i = 0; i < doc.size(); ++i) {
    std::string where = Where(path, LineAt(text, offsets[i], &from, &line));
    StatusOr<AlpacaRecord> record = ToRecord(doc[i], where);
    if (!record.ok()) return record.status();
    records.push_back(std::move(record).value());
  }
  return records;
}

StatusOr<std::vector<AlpacaRecord>> ParseJsonLines(const std::string& path, const std::string& text) {
  std::vector<AlpacaRecord> records;
  size_t begin = 0;
  for (int64_t line = 1; begin < text.size(); ++line) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string content = text.substr(begin, end - begin);
    size_t line_begin = begin;
    begin = end + 1;
    if (std::all_of(content.begin(), content.end(), [](char c) { return IsJsonSpace(c); })) continue;
    json value;
    try {
      value = json::parse(content);
    } catch (const json::parse_error& e) {
      return InvalidJson(path, text, line_begin, line, e);
    }
    StatusOr<AlpacaRecord> record = ToRecord(value, Where(path, line));
    if (!record.ok()) return record.status();
    records.push_back(std::move(record).value());
  }
  return records;
}

Sample MakeSample(const AlpacaRecord& record, const AlpacaOptions& options, const ByteTokenizer& tokenizer,
                  bool* truncated) {
  std::vector<int64_t> prompt =
      tokenizer.Encode(FormatAlpacaPrompt(record.instruction, record.input), /*add_bos=*/true, /*add_eos=*/false);
  std::vector<int64_t> response = tokenizer.Encode(record.output, /*add_bos=*/false, /*add_eos=*/true);
  Sample sample;
  sample.tokens = prompt;
  sample.tokens.insert(sample.tokens.end(), response.begin(), response.end());
  sample.labels = sample.tokens;
  if (!options.train_on_input) std::fill_n(sample.labels.begin(), prompt.size(), kIgnoreIndex);
  size_t max_len = static_cast<size_t>(std::max<int64_t>(options.max_seq_len, 1));
  *truncated = sample.tokens.size() > max_len;
  if (*truncated) {
    sample.tokens.resize(max_len);
    sample.labels.resize(max_len);
  }
  return sample;
}

}  // namespace

std::string FormatAlpacaPrompt(const std::string& instruction, const std::string& input) {
  if (input.empty()) {
    return "Below is an instruction that describes a task. Write a response that appropriately completes the "
           "request.\n\n### Instruction:\n" +
           instruction + "\n\n### Response:\n";
  }
  return "Below is an instruction that describes a task, paired with an input that provides further context. "
         "Write a response that appropriately completes the request.\n\n### Instruction:\n" +
         instruction + "\n\n### Input:\n" + input + "\n\n### Response:\n";
}

Sample MakeAlpacaSample(const AlpacaRecord& record, const AlpacaOptions& options,
                        const ByteTokenizer& tokenizer) {
  bool truncated = false;
  return MakeSample(record, options, tokenizer, &truncated);
}

StatusOr<AlpacaDataset> LoadAlpaca(const AlpacaOptions& options, const ByteTokenizer& tokenizer) {
  if (options.path.empty()) {
    return Status::InvalidArgument("alpaca dataset: path is empty; fix: set it to a local .json or .jsonl file");
  }
  if (options.max_seq_len < 1) {
    return Status::InvalidArgument("alpaca dataset " + options.path + ": max_seq_len is " +
                                   std::to_string(options.max_seq_len) + "; fix: set it to at least 1");
  }
  bool lines = EndsWith(options.path, ".jsonl");
  if (!lines && !EndsWith(options.path, ".json")) {
    return Status::InvalidArgument(options.path +
                                   ": unknown file type; fix: use a .json file (an array of records) or a .jsonl "
                                   "file (one record per line)");
  }
  StatusOr<std::string> text = ReadFile(options.path);
  if (!text.ok()) return text.status();
  StatusOr<std::vector<AlpacaRecord>> records =
      lines ? ParseJsonLines(options.path, *text) : ParseJsonArray(options.path, *text);
  if (!records.ok()) return records.status();
  if (records->empty()) {
    return Status::InvalidArgument(options.path + ": contains no records; fix: add at least one record with " +
                                   kFieldsHint);
  }
  std::vector<Sample> samples;
  samples.reserve(records->size());
  int64_t num_truncated = 0;
  for (const AlpacaRecord& record : *records) {
    bool truncated = false;
    samples.push_back(MakeSample(record, options, tokenizer, &truncated));
    if (truncated) ++num_truncated;
  }
  return AlpacaDataset(std::move(records).value(), std::move(samples), num_truncated);
}

}  // namespace tmx::data
