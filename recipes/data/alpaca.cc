#include "recipes/data/alpaca.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "harness/file_util.h"
#include "recipes/data/message_transforms.h"
#include "recipes/data/records.h"

namespace tmx::data {
namespace {

using nlohmann::json;

bool EndsWith(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(),
                    [](char lower, char c) { return std::tolower(static_cast<unsigned char>(c)) == lower; });
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
    return Status::InvalidArgument(where + "field \"" + field + "\" is " + DescribeJson(*it) +
                                   ", expected a string");
  }
  *out = it->get<std::string>();
  return Status::OK();
}

StatusOr<AlpacaRecord> ToRecord(const json& value, const std::string& where) {
  if (!value.is_object()) {
    return Status::InvalidArgument(where + "record is " + DescribeJson(value) + ", expected an object with " + kFieldsHint);
  }
  AlpacaRecord record;
  TM_RETURN_IF_ERROR(ReadField(value, "instruction", true, where, &record.instruction));
  TM_RETURN_IF_ERROR(ReadField(value, "input", false, where, &record.input));
  TM_RETURN_IF_ERROR(ReadField(value, "output", true, where, &record.output));
  return record;
}

StatusOr<std::vector<AlpacaRecord>> ToRecords(StatusOr<std::vector<Record>> parsed) {
  if (!parsed.ok()) return parsed.status();
  std::vector<AlpacaRecord> records;
  records.reserve(parsed->size());
  for (const Record& r : *parsed) {
    StatusOr<AlpacaRecord> record = ToRecord(r.value, r.where());
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
  return AlpacaPrompt(instruction, input);
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
      ToRecords(lines ? ParseJsonLines(options.path, *text) : ParseJsonArray(options.path, *text));
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
