// Config nodes -> options: a config's `tokenizer:` and `dataset:` nodes (torchtune's schema) read into
// TokenizerOptions and DatasetOptions, checked key by key. Torch-free. This is the validation the registry runs
// for these components: it reads no tokenizer or data file (a missing file is a run-time input, see samples.h).
//
// Errors name the key's file:line and the fix: a key the component does not take (with a did-you-mean and the
// list of its keys), a value of the wrong type, an unknown component, filter_fn (a Python callable).
#pragma once

#include <string>

#include "base/status.h"
#include "harness/config.h"
#include "recipes/data/datasets.h"
#include "recipes/data/tokenizer_builders.h"

namespace tmx::data {

struct TokenizerConfig {
  std::string component;  // the node's _component_
  TokenizerOptions options;
};

struct DatasetConfig {
  std::string component;
  DatasetOptions options;
};

// The node at `key` (default "tokenizer") of `config`.
StatusOr<TokenizerConfig> TokenizerFromConfig(const Config& config, const std::string& key = "tokenizer");

// The node at `key` (default "dataset"). A list of datasets (torchtune's ConcatDataset form) is not supported.
StatusOr<DatasetConfig> DatasetFromConfig(const Config& config, const std::string& key = "dataset");

// The keys each component takes (torchtune's argument names, plus the load_dataset arguments tune-matrix reads:
// data_files, data_dir, split).
std::vector<std::string> TokenizerKeys(const TokenizerComponent& component);
std::vector<std::string> DatasetKeys(const DatasetComponent& component);

}  // namespace tmx::data
