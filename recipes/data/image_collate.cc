#include "recipes/data/image_collate.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>

namespace tmx::data {

std::vector<std::pair<int64_t, int64_t>> ImageAttentionSpans(const std::vector<int64_t>& tokens,
                                                             int64_t image_token_id) {
  std::vector<int64_t> at;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == image_token_id) at.push_back(static_cast<int64_t>(i));
  }
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (size_t k = 0; k < at.size(); ++k) {
    spans.emplace_back(at[k], k + 1 < at.size() ? at[k + 1] : static_cast<int64_t>(tokens.size()));
  }
  // Consecutive image tokens share the text after the last of them.
  for (size_t k = spans.size(); k-- > 1;) {
    if (spans[k - 1].first == spans[k - 1].second - 1) spans[k - 1].second = spans[k].second;
  }
  return spans;
}

ImageBatch CollateImages(const std::vector<SampleImages>& samples, int64_t image_token_id, int64_t tokens_per_tile,
                         int64_t seq_len) {
  int64_t most_images = 0, most_tiles = 0, tile = 0;
  for (const SampleImages& s : samples) {
    most_images = std::max<int64_t>(most_images, static_cast<int64_t>(s.images.size()));
    for (const ImageTiles& image : s.images) {
      most_tiles = std::max(most_tiles, image.num_tiles());
      tile = image.tile_size;
    }
  }
  ImageBatch out;
  if (most_images == 0) return out;
  const int64_t b = static_cast<int64_t>(samples.size());
  out.images = torch::zeros({b, most_images, most_tiles, 3, tile, tile});
  out.aspect_ratio = torch::ones({b, most_images, 2}, torch::kLong);
  out.encoder_mask = torch::zeros({b, seq_len, most_images * most_tiles * tokens_per_tile}, torch::kBool);
  for (int64_t i = 0; i < b; ++i) {
    const SampleImages& s = samples[i];
    const auto spans = ImageAttentionSpans(s.tokens, image_token_id);
    TORCH_CHECK(spans.size() == s.images.size(), "CollateImages: sample ", i, " has ", spans.size(),
                " image tokens for ", s.images.size(), " images");
    for (size_t k = 0; k < s.images.size(); ++k) {
      const ImageTiles& image = s.images[k];
      TORCH_CHECK(image.tile_size == tile, "CollateImages: images of ", image.tile_size, " and ", tile, " pixels");
      std::memcpy(out.images[i][k].data_ptr<float>(), image.pixels.data(), image.pixels.size() * sizeof(float));
      out.aspect_ratio[i][k][0] = image.rows;
      out.aspect_ratio[i][k][1] = image.cols;
      const int64_t first = static_cast<int64_t>(k) * most_tiles * tokens_per_tile;
      out.encoder_mask[i]
          .narrow(0, spans[k].first, spans[k].second - spans[k].first)
          .narrow(1, first, image.num_tiles() * tokens_per_tile)
          .fill_(true);
    }
  }
  return out;
}

}  // namespace tmx::data
