#include "recipes/models/init.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tmx::models {
namespace {

constexpr int64_t kLarge = kFastInitElements + 12345;  // odd tail: chunks and halves that do not divide evenly

TEST(InitTest, LargeUniformHasItsRangeAndMomentsAndFollowsTheSeed) {
  for (torch::Dtype dtype : {torch::kFloat, torch::kBFloat16}) {
    torch::manual_seed(7);
    at::Tensor a = torch::empty({kLarge}, dtype);
    UniformInit(a, -0.5, 0.25);
    at::Tensor f = a.to(torch::kFloat);
    EXPECT_GE(f.min().item<float>(), -0.5f);
    EXPECT_LE(f.max().item<float>(), 0.25f);
    EXPECT_NEAR(f.mean().item<double>(), -0.125, 2e-3);
    EXPECT_NEAR(f.var().item<double>(), 0.75 * 0.75 / 12, 1e-3);
    torch::manual_seed(7);
    at::Tensor again = torch::empty({kLarge}, dtype);
    UniformInit(again, -0.5, 0.25);
    EXPECT_TRUE(torch::equal(a, again));
    torch::manual_seed(8);
    UniformInit(again, -0.5, 0.25);
    EXPECT_FALSE(torch::equal(a, again));
  }
}

TEST(InitTest, LargeNormalHasItsMomentsAndTails) {
  torch::manual_seed(3);
  at::Tensor a = torch::empty({kLarge});
  NormalInit(a, 0.5, 2.0);
  EXPECT_NEAR(a.mean().item<double>(), 0.5, 1e-2);
  EXPECT_NEAR(a.std().item<double>(), 2.0, 1e-2);
  // Within one standard deviation: 68.3% of a normal.
  EXPECT_NEAR((a - 0.5).abs().le(2.0).to(torch::kFloat).mean().item<double>(), 0.6827, 3e-3);
  EXPECT_GT(a.max().item<float>(), 0.5f + 4 * 2.0f);  // tails exist (about 33 draws beyond 4 sigma)
}

TEST(InitTest, ValuesDoNotDependOnTheThreadCount) {
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  torch::manual_seed(5);
  at::Tensor one = torch::empty({kLarge});
  NormalInit(one, 0, 1);
  torch::set_num_threads(2);
  torch::manual_seed(5);
  at::Tensor two = torch::empty({kLarge});
  NormalInit(two, 0, 1);
  torch::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one, two));
}

TEST(InitTest, SmallTensorsAreTorchsOwnDraws) {
  torch::manual_seed(9);
  at::Tensor mine = torch::empty({100, 30});
  UniformInit(mine, -1, 1);
  at::Tensor normal = torch::empty({50});
  NormalInit(normal, 0, 1);
  torch::manual_seed(9);
  at::Tensor theirs = torch::empty({100, 30}).uniform_(-1, 1);
  EXPECT_TRUE(torch::equal(mine, theirs));
  EXPECT_TRUE(torch::equal(normal, torch::empty({50}).normal_(0, 1)));
}

TEST(InitTest, MetaTensorsAreLeftAlone) {
  at::Tensor meta = torch::empty({kLarge}, torch::TensorOptions().device(torch::kMeta));
  UniformInit(meta, 0, 1);
  NormalInit(meta, 0, 1);
  EXPECT_TRUE(meta.is_meta());
}

}  // namespace
}  // namespace tmx::models
