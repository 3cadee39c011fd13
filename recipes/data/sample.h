// Sample: one tokenized training example, the unit datasets produce and the data loader batches. Torch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "recipes/data/image_transform.h"

namespace tmx::data {

// Label value that the loss ignores (the default ignore_index of cross entropy).
inline constexpr int64_t kIgnoreIndex = -100;

// `labels` is aligned with `tokens` (same length, not shifted): a causal model predicts labels[t + 1] from
// tokens[0..t], so labels[t] is kIgnoreIndex where token t gets no loss. (torchtune stores labels shifted by one;
// the recipe shifts here, so the same positions are trained.)
struct Sample {
  std::vector<int64_t> tokens;
  std::vector<int64_t> labels;
  // Packed samples only (empty otherwise), one entry per token:
  //   input_pos     the token's position within its own document (torchtune's input_pos, for RoPE), padding
  //                 continuing from the last document;
  //   document_ids  0, 1, 2 ... for the documents in the pack, and one more id for the padding, so attention can
  //                 be kept within each document (a block-causal mask: attend only where document ids are equal).
  std::vector<int64_t> input_pos;
  std::vector<int64_t> document_ids;
  // Packed samples only: each document's length, the padding last when there is any (torchtune's seq_lens).
  std::vector<int64_t> seq_lens;
  // Multimodal samples only: the images of its <|image|> tokens, in order (image_collate.h batches them).
  std::vector<ImageTiles> images;

  bool packed() const { return !input_pos.empty(); }
};

// A preference pair (chosen and rejected responses to the same prompt), for DPO-style recipes.
struct PreferenceSample {
  Sample chosen;
  Sample rejected;
};

}  // namespace tmx::data
