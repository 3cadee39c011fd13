// Shipped samples: small tokenizer files of each format and small datasets of each kind, in
// recipes/data/samples/ (torchtune's test assets, BSD-3-Clause, see samples/LICENSE-torchtune, plus a few records
// written for tune-matrix). A matrix cell whose real tokenizer file or dataset is absent runs on the sample of the
// same kind instead, and says so. Torch-free.
//
// Wiring contract: when BuildTokenizer / LoadDataset return NotFound for a missing file, the caller may retry with
// SampleTokenizerOptions / SampleDatasetOptions and must record that a sample stood in (SampleNote says what).
#pragma once

#include <string>

#include "base/status.h"
#include "recipes/data/tokenizer_builders.h"

namespace tmx::data {

// $TUNE_MATRIX_SAMPLES_DIR when set, else the source tree's recipes/data/samples.
std::string SamplesDir();

// The shipped sample file(s) of a tokenizer file kind, relative to SamplesDir()/tokenizers:
//   kTiktoken        tiktoken_small.model (2000 ranks)
//   kSentencePiece   m.model (2000 pieces)
//   kByteBpe, kGpt2Bpe  tiny_bpe_vocab.json + tiny_bpe_merges.txt
//   kHfTokenizerJson tokenizer.json + generation_config.json
// `options` with its file options replaced by the sample's (max_seq_len, prompt_template, truncation_type kept;
// special_tokens_path cleared); unchanged for a component that reads a shipped file (TokenizerComponent::shipped_path).
// NotFound for an unknown component.
StatusOr<TokenizerOptions> SampleTokenizerOptions(const std::string& component, TokenizerOptions options);

// One line for the support record: "tokenizer llama3_tokenizer ran on the shipped sample tiktoken_small.model
// (path /x/tokenizer.model is absent)".
std::string SampleNote(const std::string& what, const std::string& component, const std::string& sample,
                       const std::string& missing);

}  // namespace tmx::data
