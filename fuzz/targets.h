// What the fuzzer feeds: configs (parsing, overrides, interpolation), override arguments, journals, configs
// to write support back into, and safetensors files (their header length and header, the torch-free part of
// the checkpoint reader: recipes/checkpoint/safetensors_header.h).
//
// Each target runs one input through the code that reads untrusted text. An error Status is an ordinary
// outcome; a crash, a hang or a broken invariant (reported with abort()) is a finding.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx::fuzz {

struct FuzzTarget {
  std::string name;  // "config", "override", "journal", "writeback", "safetensors"
  // Runs one input; returns whether it was accepted (parsed without error), so that the fuzzer keeps it
  // to mutate further.
  std::function<bool(const std::string&)> run;
  std::vector<std::string> dictionary;  // tokens for the mutator
  size_t max_size = 0;                  // inputs are cut to this many bytes
};

// Every target, in a fixed order.
std::vector<FuzzTarget> AllTargets();

// The seed inputs of `target` from the checkout at `source_dir`: every config under configs/ for "config",
// "writeback" and "override" (an override input is one argument per line), the journal
// reports/journal.jsonl and each of its lines for "journal", a few hand-made files for "safetensors", plus a
// few hand-written hostile seeds.
StatusOr<std::vector<std::string>> SeedCorpus(const std::string& target, const std::string& source_dir);

}  // namespace tmx::fuzz
