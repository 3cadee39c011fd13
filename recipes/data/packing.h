// Sample packing (torchtune's PackedDataset, `packed: True`): consecutive samples are concatenated into packs of
// exactly max_seq_len tokens, padded at the end, keeping each document's boundaries (Sample::input_pos,
// document_ids, seq_lens) so attention and positions can stay within each document. Torch-free.
//
// Same packs, positions and seq_lens as torchtune. One addition for tune-matrix's aligned labels: the label of
// each document's first token (after the first) is kIgnoreIndex, so no loss is taken on predicting a document from
// the one before it (torchtune's shifted labels have the same hole at each document's last token).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "recipes/data/sample.h"

namespace tmx::data {

struct PackOptions {
  // Tokens per pack. Required (torchtune takes the tokenizer's max_seq_len; packing needs it set).
  int64_t max_seq_len = 0;
  // Token that pads the end of a pack (torchtune's padding_idx, 0 as torchtune's datasets leave it).
  int64_t padding_idx = 0;
  // Stop after this many packs. Unset: pack everything.
  std::optional<int64_t> max_packs;
  // Split a sample across two packs when it does not fit (text completion's default). When false, a sample longer
  // than max_seq_len is an error and a sample that does not fit starts the next pack.
  bool split_across_pack = false;
  // The bytes the packs may hold (SampleBudget): each pack is max_seq_len tokens, labels, positions and
  // document ids, checked before it is made. 0: the machine's memory.
  int64_t max_bytes = 0;
};

// InvalidArgument when max_seq_len < 1, when a sample is longer than max_seq_len and split_across_pack is false
// (naming the sample's index and length), or when the next pack would pass max_bytes (naming the bound).
StatusOr<std::vector<Sample>> PackSamples(const std::vector<Sample>& samples, const PackOptions& options);

}  // namespace tmx::data
