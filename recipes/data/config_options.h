// Config nodes -> options: a config's `tokenizer:` and `dataset:` nodes (torchtune's schema) read into
// TokenizerOptions and DatasetOptions, checked key by key. Torch-free. This is the validation the registry runs
// for these components: it reads no tokenizer or data file (a missing file is a run-time input, see samples.h).
//
// One table per component kind (tokenizers, datasets) holds every option once: its field spec (key, type, doc,
// bounds or allowed values), which components take it, and the options member its value is stored in. The
// registry's parameters (TokenizerParams), the accepted keys (TokenizerKeys), the defaults (the member's own
// default in TokenizerOptions/DatasetOptions, or the component's) and the reader (TokenizerFromConfig) all come
// from that table, so an option is one row in config_options.cc plus its member.
//
// Errors name the key's file:line and the fix: a key the component does not take (with a did-you-mean and the
// list of its keys), a value of the wrong type or out of bounds, an unknown component, filter_fn (a Python
// callable).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
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

// The schema of each component's node, for the registry: one field per option the component takes, with its
// default, bounds and doc.
std::vector<FieldSpec> TokenizerParams(const TokenizerComponent& component);
std::vector<FieldSpec> DatasetParams(const DatasetComponent& component);

// The keys each component takes: _component_ and its params' names (torchtune's argument names, plus the
// load_dataset arguments tune-matrix reads: data_files, data_dir, split).
std::vector<std::string> TokenizerKeys(const TokenizerComponent& component);
std::vector<std::string> DatasetKeys(const DatasetComponent& component);

}  // namespace tmx::data
