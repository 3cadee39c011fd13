// What the fuzzer feeds: configs (parsing, overrides, interpolation), override arguments, journals, configs
// to write support back into, safetensors files (their header length and header, the torch-free part of
// the checkpoint reader: recipes/checkpoint/safetensors_header.h), local dataset files (the record parsers of
// recipes/data/records.h: JSON, JSON Lines, CSV, text) and tokenizer files (a Hugging Face tokenizer.json, or a
// byte-level BPE vocab.json and merges.txt: recipes/data/tokenizers/hf_tokenizer.h, byte_bpe.h) and a page of
// the Hugging Face Hub's tree listing with its Link header (`tune download`: fuzz/hub_listing_target.h).
//
// Not a target of its own: a recipe's saved state (recipes/train_state.cc) is a safetensors file read by LibTorch
// code; its untrusted part, the header length and header, is what the "safetensors" target runs (the same
// CheckSafetensorsHeaderLength and ParseSafetensorsHeader), and the fuzzer stays torch-free so that it builds and
// runs fast, under the sanitizers too. A Hugging Face checkpoint's config.json is likewise read by torch code.
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
  std::string name;  // "config", "override", "journal", "writeback", "safetensors", "dataset", "tokenizer_json",
                     // "hub_listing", "sentencepiece_model"
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
// reports/journal.jsonl and each of its lines for "journal", a few hand-made files for "safetensors", the sample
// data files of recipes/data/samples/datasets/ for "dataset", the tokenizer.json files of
// recipes/data/samples/tokenizers/ and recipes/data/testdata/ and the tiny byte-level BPE's vocab.json and
// merges.txt (one input, split at a "#merges.txt" line) for "tokenizer_json", m.model and the two byte-fallback
// models of recipes/data/testdata/ for "sentencepiece_model", hand-made listings and Link headers for
// "hub_listing", plus a few hand-written hostile seeds.
StatusOr<std::vector<std::string>> SeedCorpus(const std::string& target, const std::string& source_dir);

}  // namespace tmx::fuzz
