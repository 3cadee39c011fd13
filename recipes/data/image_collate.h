// torchtune's padded_collate_tiled_images_and_mask and VisionCrossAttentionMask: the images of a batch of
// multimodal samples as the vision model takes them (models/vision_model.h).
//
// Which text attends to which image (ImageAttentionSpans): each image token (<|image|>) starts its image's span,
// which runs to the next image token, or to the end of the sample; consecutive image tokens (several images
// before one text) all run to where the last of them ends. A position in an image's span attends to every token
// of that image's real tiles.
//
// Collating: images are padded with zero tiles to the batch's most tiles and with zero images to its most images;
// a padding image's aspect ratio is (1, 1); the encoder mask [batch, seq_len, images x tiles x tokens_per_tile]
// is true where a position attends to an image token (padding rows and padded tiles false).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "recipes/data/image_transform.h"

namespace tmx::data {

// One sample's images, in the order of their image tokens in `tokens`.
struct SampleImages {
  std::vector<int64_t> tokens;
  std::vector<ImageTiles> images;
};

// [start, end) of each image token's span in `tokens` (see above).
std::vector<std::pair<int64_t, int64_t>> ImageAttentionSpans(const std::vector<int64_t>& tokens,
                                                             int64_t image_token_id);

struct ImageBatch {
  at::Tensor images;        // [B, I, T, 3, S, S] float
  at::Tensor aspect_ratio;  // [B, I, 2] int64 (rows, cols)
  at::Tensor encoder_mask;  // [B, seq_len, I * T * tokens_per_tile] bool
};

// REQUIRES: every sample's image tokens number its images; every image of one tile size; seq_len at least every
// sample's length. Undefined tensors when no sample has an image.
ImageBatch CollateImages(const std::vector<SampleImages>& samples, int64_t image_token_id, int64_t tokens_per_tile,
                         int64_t seq_len);

}  // namespace tmx::data
