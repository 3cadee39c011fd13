// Instruction data in the Alpaca form: records with "instruction", "input" and "output" strings, read
// from a local .json file (an array of objects) or .jsonl file (one object per line), formatted with the
// Alpaca prompt template and tokenized into training samples.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/status.h"
#include "recipes/data/sample.h"
#include "recipes/data/tokenizer.h"

namespace tmx::data {

struct AlpacaOptions {
  // A local file: "*.json" holds one JSON array of record objects, "*.jsonl" holds one record object per
  // line (blank lines are skipped). Any other extension is rejected.
  std::string path;

  // The longest sample in tokens, BOS and EOS included. Longer samples are cut at the end (tokens and
  // labels together), so a long response loses its tail and its EOS. Must be at least 1.
  int64_t max_seq_len = 512;

  // When false, the loss sees only the response and EOS: the labels of BOS and the prompt are
  // kIgnoreIndex. When true, every position is labelled, so the model also learns to write prompts.
  bool train_on_input = false;
};

// One record as written in the file. "instruction" and "output" are required strings; "input" is a
// string, or absent or null (then empty). Other fields are ignored.
struct AlpacaRecord {
  std::string instruction;
  std::string input;
  std::string output;
};

// The Alpaca prompt: the preamble, "### Instruction:", "### Input:" (left out when `input` is empty) and
// the "### Response:\n" header the answer follows.
std::string FormatAlpacaPrompt(const std::string& instruction, const std::string& input);

// tokens = BOS + prompt + output + EOS, truncated to options.max_seq_len; see AlpacaOptions for labels.
Sample MakeAlpacaSample(const AlpacaRecord& record, const AlpacaOptions& options,
                        const ByteTokenizer& tokenizer);

// Records and their samples, in file order. Copyable value type.
class AlpacaDataset {
 public:
  AlpacaDataset(std::vector<AlpacaRecord> records, std::vector<Sample> samples, int64_t num_truncated)
      : records_(std::move(records)), samples_(std::move(samples)), num_truncated_(num_truncated) {}

  int64_t size() const { return static_cast<int64_t>(samples_.size()); }
  // REQUIRES: 0 <= i < size()
  const Sample& sample(int64_t i) const { return samples_[static_cast<size_t>(i)]; }
  const AlpacaRecord& record(int64_t i) const { return records_[static_cast<size_t>(i)]; }
  const std::vector<Sample>& samples() const { return samples_; }
  const std::vector<AlpacaRecord>& records() const { return records_; }
  // How many samples were longer than max_seq_len and were cut.
  int64_t num_truncated() const { return num_truncated_; }

 private:
  std::vector<AlpacaRecord> records_;
  std::vector<Sample> samples_;
  int64_t num_truncated_ = 0;
};

// Reads and tokenizes options.path. Errors: NotFound/IoError for the file; InvalidArgument for bad
// options, a file without records, or a bad record, named as "<path>:<line>: ..." (for a .json array the
// line where the bad element starts) together with the offending field.
StatusOr<AlpacaDataset> LoadAlpaca(const AlpacaOptions& options, const ByteTokenizer& tokenizer);

}  // namespace tmx::data
