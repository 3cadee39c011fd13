#include "recipes/distributed/flat_layout.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tmx::recipes {
namespace {

TEST(FlatLayoutTest, OffsetsPaddingAndShards) {
  std::vector<at::Tensor> params = {torch::ones({2, 3}), torch::full({4}, 2.0), torch::full({1, 1}, 3.0)};
  FlatLayout layout(params, 3);
  EXPECT_EQ(layout.size(), 3u);
  EXPECT_EQ(layout.numel(), 11);
  EXPECT_EQ(layout.shard_size(), 4);  // ceil(11 / 3)
  EXPECT_EQ(layout.padded(), 12);
  EXPECT_EQ(layout.shape(0), (std::vector<int64_t>{2, 3}));

  at::Tensor flat = layout.Pack(params, torch::TensorOptions(torch::kFloat));
  ASSERT_EQ(flat.numel(), 12);
  EXPECT_TRUE(torch::equal(flat, torch::tensor({1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 0}, torch::kFloat)));
  // Views share storage with the flat buffer and have each tensor's shape.
  at::Tensor second = layout.View(flat, 1);
  EXPECT_EQ(second.sizes(), params[1].sizes());
  second.fill_(5);
  EXPECT_EQ(flat[6].item<float>(), 5);
  EXPECT_EQ(layout.View(flat, 2).sizes(), params[2].sizes());
  EXPECT_EQ(layout.View(flat, 2).item<float>(), 3);
  // Rank 2's shard is the last shard_size elements, the padding included.
  EXPECT_TRUE(torch::equal(layout.Shard(flat, 2), torch::tensor({5, 5, 3, 0}, torch::kFloat)));
}

TEST(FlatLayoutTest, PackLeavesUndefinedTensorsAsZerosAndTakesTheOptions) {
  std::vector<at::Tensor> params = {torch::ones({3}), torch::ones({2})};
  FlatLayout layout(params, 2);
  at::Tensor flat = layout.Pack({at::Tensor(), torch::full({2}, 4.0)}, torch::TensorOptions(torch::kDouble));
  EXPECT_EQ(flat.scalar_type(), torch::kDouble);
  EXPECT_FALSE(flat.requires_grad());
  EXPECT_TRUE(torch::equal(flat, torch::tensor({0, 0, 0, 4, 4, 0}, torch::kDouble)));
}

TEST(FlatLayoutTest, OneRankHasNoPadding) {
  FlatLayout layout({torch::ones({5})}, 1);
  EXPECT_EQ(layout.padded(), 5);
  EXPECT_EQ(layout.shard_size(), 5);
  EXPECT_TRUE(FlatLayout({}, 4).empty());
}

}  // namespace
}  // namespace tmx::recipes
