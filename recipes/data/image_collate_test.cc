#include "recipes/data/image_collate.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tmx::data {
namespace {

ImageTiles Tiles(int64_t rows, int64_t cols, float value, int64_t tile = 2) {
  return {rows, cols, tile, std::vector<float>(static_cast<size_t>(rows * cols * 3 * tile * tile), value)};
}

TEST(ImageCollateTest, SpansAreTorchtunesVisionCrossAttentionMaskIntervals) {
  // torchtune's example: "<img1><img2>These are two dogs. <img3>This is a cat."
  const std::vector<int64_t> tokens = {1, 1, 9673, 527, 1403, 12875, 13, 1, 1115, 374, 264, 8415};
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 7}, {1, 7}, {7, 12}};
  EXPECT_EQ(ImageAttentionSpans(tokens, 1), want);
  EXPECT_TRUE(ImageAttentionSpans({5, 6}, 1).empty());
}

TEST(ImageCollateTest, ImagesTilesAndMasksArePaddedAsTorchtunesCollate) {
  // Sample 0: two images (1 x 2 and 1 x 3 tiles) before its text; sample 1: one 2 x 2 image, then text.
  std::vector<SampleImages> samples = {{{9, 9, 5, 6, 7}, {Tiles(1, 2, 1.f), Tiles(1, 3, 2.f)}},
                                       {{9, 4, 4}, {Tiles(2, 2, 3.f)}}};
  ImageBatch b = CollateImages(samples, /*image_token_id=*/9, /*tokens_per_tile=*/5, /*seq_len=*/6);
  ASSERT_EQ(b.images.sizes(), torch::IntArrayRef({2, 2, 4, 3, 2, 2}));
  EXPECT_EQ(b.images[0][0][1].mean().item<float>(), 1.f);
  EXPECT_EQ(b.images[0][0][2].abs().sum().item<float>(), 0.f);  // padded tile
  EXPECT_EQ(b.images[1][1].abs().sum().item<float>(), 0.f);     // padding image
  EXPECT_TRUE(torch::equal(b.aspect_ratio, torch::tensor({{{1, 2}, {1, 3}}, {{2, 2}, {1, 1}}})));
  ASSERT_EQ(b.encoder_mask.sizes(), torch::IntArrayRef({2, 6, 2 * 4 * 5}));
  torch::Tensor m = b.encoder_mask.to(torch::kLong);
  // Sample 0: positions 0..4 see image 0's 2 tiles and image 1's 3 tiles; the padded position 5 sees nothing.
  EXPECT_EQ(m[0][0].narrow(0, 0, 20).sum().item<int64_t>(), 10);
  EXPECT_EQ(m[0][4].narrow(0, 20, 20).sum().item<int64_t>(), 15);
  EXPECT_EQ(m[0][5].sum().item<int64_t>(), 0);
  // Sample 1: positions 0..2 see its one image's 4 tiles, nothing of the padding image.
  EXPECT_EQ(m[1][2].narrow(0, 0, 20).sum().item<int64_t>(), 20);
  EXPECT_EQ(m[1].narrow(1, 20, 20).sum().item<int64_t>(), 0);
  EXPECT_FALSE(CollateImages({{{5, 6}, {}}}, 9, 5, 2).images.defined());
}

}  // namespace
}  // namespace tmx::data
