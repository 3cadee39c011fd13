#include "recipes/models/rope.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

namespace tmx::models {
namespace {

struct Angles {
  torch::Tensor cos, sin;
};

Angles AnglesFor(int64_t t, int64_t head_dim, double base) {
  torch::Tensor angles = torch::outer(torch::arange(t, torch::kFloat), RopeInverseFrequencies(head_dim, base, {}));
  return {angles.cos(), angles.sin()};
}

// Channel order that turns an interleaved head (pairs 2i, 2i+1) into a half-split one (pairs i, i + d/2):
// half[i] = interleaved[2i], half[i + d/2] = interleaved[2i + 1]. This is the permutation torchtune's
// convert_weights applies to Hugging Face q/k weights.
torch::Tensor InterleavedToHalf(int64_t head_dim) {
  return torch::cat({torch::arange(0, head_dim, 2), torch::arange(1, head_dim, 2)});
}

TEST(RopeTest, HalfLayoutRotatesChannelIWithChannelIPlusHalf) {
  const int64_t t = 6, d = 8;
  const Angles a = AnglesFor(t, d, 10000);
  // A unit vector on channel 0 rotates into channel d/2 = 4 with frequency 1 (inv_freq[0] = 1).
  torch::Tensor e0 = torch::zeros({1, t, 1, d});
  e0.index_put_({0, torch::indexing::Slice(), 0, 0}, 1.0);
  torch::Tensor r = ApplyRotaryEmbedding(e0, a.cos, a.sin, RopeLayout::kHalf);
  for (int64_t pos : {0, 1, 5}) {
    SCOPED_TRACE(pos);
    EXPECT_NEAR(r[0][pos][0][0].item<double>(), std::cos(pos), 1e-6);
    EXPECT_NEAR(r[0][pos][0][4].item<double>(), std::sin(pos), 1e-6);
    EXPECT_NEAR(r[0][pos][0].abs().sum().item<double>(), std::abs(std::cos(pos)) + std::abs(std::sin(pos)), 1e-6);
  }
  // Channel 1 pairs with channel 5 at frequency 10000^(-2/8) = 0.1.
  torch::Tensor e1 = torch::zeros({1, t, 1, d});
  e1.index_put_({0, torch::indexing::Slice(), 0, 1}, 1.0);
  torch::Tensor r1 = ApplyRotaryEmbedding(e1, a.cos, a.sin, RopeLayout::kHalf);
  EXPECT_NEAR(r1[0][5][0][1].item<double>(), std::cos(0.5), 1e-6);
  EXPECT_NEAR(r1[0][5][0][5].item<double>(), std::sin(0.5), 1e-6);
}

TEST(RopeTest, LayoutsAgreeUpToTheTorchtunePermutation) {
  torch::manual_seed(0);
  const int64_t t = 7, d = 16;
  const Angles a = AnglesFor(t, d, 500000);
  torch::Tensor x = torch::randn({2, t, 3, d});
  const torch::Tensor perm = InterleavedToHalf(d);
  torch::Tensor via_interleaved = ApplyRotaryEmbedding(x, a.cos, a.sin, RopeLayout::kInterleaved);
  torch::Tensor via_half = ApplyRotaryEmbedding(x.index_select(-1, perm), a.cos, a.sin, RopeLayout::kHalf);
  EXPECT_TRUE(torch::allclose(via_interleaved.index_select(-1, perm), via_half, 0, 0))
      << (via_interleaved.index_select(-1, perm) - via_half).abs().max();
  // The layouts do differ on the same input.
  EXPECT_FALSE(torch::allclose(ApplyRotaryEmbedding(x, a.cos, a.sin, RopeLayout::kHalf), via_interleaved));
}

TEST(RopeTest, HalfLayoutDependsOnRelativePosition) {
  torch::manual_seed(1);
  const int64_t t = 30, d = 16;
  const Angles a = AnglesFor(t, d, 10000);
  torch::Tensor q = torch::randn({1, 1, 1, d}).expand({1, t, 1, d});
  torch::Tensor k = torch::randn({1, 1, 1, d}).expand({1, t, 1, d});
  torch::Tensor rq = ApplyRotaryEmbedding(q, a.cos, a.sin, RopeLayout::kHalf);
  torch::Tensor rk = ApplyRotaryEmbedding(k, a.cos, a.sin, RopeLayout::kHalf);
  auto dot = [&](int64_t m, int64_t n) { return (rq[0][m][0] * rk[0][n][0]).sum().item<double>(); };
  EXPECT_NEAR(dot(7, 3), dot(27, 23), 1e-4);
  EXPECT_TRUE(torch::allclose(rq.norm(2, -1), q.norm(2, -1), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(rq[0][0], q[0][0]));
}

TEST(RopeTest, FusedRotationHasTheUnfusedBitsForwardAndBackward) {
  torch::manual_seed(3);
  const int64_t b = 2, t = 5, heads = 3, head_dim = 128;  // 64 pairs: the vectorised loop, not only its tail
  const Angles a = AnglesFor(t, head_dim, 500000);
  // Packed rows: each row its own positions.
  const torch::Tensor positions = torch::stack({torch::arange(t), torch::tensor({0, 1, 0, 1, 2})}).to(torch::kFloat);
  const torch::Tensor row_angles = positions.unsqueeze(-1) * RopeInverseFrequencies(head_dim, 500000, {});
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (const RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
      for (const bool per_row : {false, true}) {
        SCOPED_TRACE(std::string(c10::toString(dtype)) + (layout == RopeLayout::kHalf ? " half" : " interleaved") +
                     (per_row ? " per row" : " shared positions"));
        const torch::Tensor cos = per_row ? row_angles.cos() : a.cos;
        const torch::Tensor sin = per_row ? row_angles.sin() : a.sin;
        // Non-contiguous, as q is after a transpose: [B, heads, T, D] viewed as [B, T, heads, D].
        const torch::Tensor base = (torch::randn({b, heads, t, head_dim}) * 3).to(dtype);
        const torch::Tensor x = base.transpose(1, 2).detach().requires_grad_(true);
        const torch::Tensor x_ref = base.transpose(1, 2).detach().requires_grad_(true);
        const torch::Tensor upstream = torch::randn({b, t, heads, head_dim}).to(dtype);
        torch::Tensor y = ApplyRotaryEmbedding(x, cos, sin, layout);
        torch::Tensor y_ref = ApplyRotaryEmbeddingUnfused(x_ref, cos, sin, layout);
        EXPECT_EQ(y.scalar_type(), dtype);
        EXPECT_TRUE(torch::equal(y, y_ref)) << (y - y_ref).abs().max().item<double>();
        y.backward(upstream);
        y_ref.backward(upstream);
        ASSERT_TRUE(x.grad().defined());
        EXPECT_EQ(x.grad().scalar_type(), dtype);
        EXPECT_TRUE(torch::equal(x.grad(), x_ref.grad())) << (x.grad() - x_ref.grad()).abs().max().item<double>();
      }
    }
  }
}

TEST(RopeTest, KeepsTheInputDtype) {
  const Angles a = AnglesFor(4, 8, 10000);
  torch::Tensor x = torch::randn({1, 4, 2, 8}).to(torch::kBFloat16);
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
    EXPECT_EQ(ApplyRotaryEmbedding(x, a.cos, a.sin, layout).scalar_type(), torch::kBFloat16);
  }
  EXPECT_THROW(ApplyRotaryEmbedding(x, a.cos.narrow(0, 0, 3), a.sin, RopeLayout::kHalf), c10::Error);
}

}  // namespace
}  // namespace tmx::models
