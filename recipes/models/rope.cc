#include "recipes/models/rope.h"

#include <torch/torch.h>

namespace tmx::models {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

torch::Tensor RopeInverseFrequencies(int64_t head_dim, double base, const std::optional<RopeScaling>& scaling) {
  TORCH_CHECK(head_dim > 0 && head_dim % 2 == 0, "RopeInverseFrequencies: head_dim must be even and positive, got ",
              head_dim);
  TORCH_CHECK(base > 0, "RopeInverseFrequencies: base must be positive, got ", base);
  // float32 throughout, in the reference's order of operations, so the frequencies match it to the last bit
  // or two.
  torch::Tensor exponent = torch::arange(0, head_dim, 2, torch::kFloat) / static_cast<double>(head_dim);
  torch::Tensor freqs = torch::reciprocal(torch::pow(base, exponent));
  if (!scaling) return freqs;
  const double old_len = static_cast<double>(scaling->old_context_len);
  const double low_freq_wavelen = old_len / scaling->low_freq_factor;    // longer wavelengths: fully scaled
  const double high_freq_wavelen = old_len / scaling->high_freq_factor;  // shorter wavelengths: kept
  torch::Tensor wavelen = torch::reciprocal(freqs) * (2 * kPi);
  torch::Tensor smooth = (torch::reciprocal(wavelen) * old_len - scaling->low_freq_factor) /
                         (scaling->high_freq_factor - scaling->low_freq_factor);
  torch::Tensor interpolated = (1 - smooth) * freqs / scaling->factor + smooth * freqs;
  return torch::where(wavelen < high_freq_wavelen, freqs,
                      torch::where(wavelen > low_freq_wavelen, freqs / scaling->factor, interpolated));
}

torch::Tensor ApplyRotaryEmbedding(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                   RopeLayout layout) {
  TORCH_CHECK(x.dim() == 4, "ApplyRotaryEmbedding: expected x [B, T, heads, head_dim], got ", x.sizes());
  const int64_t t = x.size(1);
  const int64_t half = x.size(3) / 2;
  const bool per_row = cos.dim() == 3;  // packed rows: each row has its own positions
  const int64_t rows = per_row ? x.size(0) : 1;
  TORCH_CHECK((per_row ? cos.sizes() == torch::IntArrayRef({rows, t, half}) : cos.sizes() == torch::IntArrayRef({t, half})) &&
                  sin.sizes() == cos.sizes(),
              "ApplyRotaryEmbedding: expected cos/sin [", t, ", ", half, "] or [", x.size(0), ", ", t, ", ", half,
              "], got ", cos.sizes(), " and ", sin.sizes());
  torch::Tensor c = cos.view({rows, t, 1, half});
  torch::Tensor s = sin.view({rows, t, 1, half});
  torch::Tensor xf = x.to(torch::kFloat);
  if (layout == RopeLayout::kHalf) {
    torch::Tensor x0 = xf.narrow(-1, 0, half);
    torch::Tensor x1 = xf.narrow(-1, half, half);
    return torch::cat({x0 * c - x1 * s, x1 * c + x0 * s}, -1).to(x.scalar_type());
  }
  torch::Tensor pairs = xf.unflatten(-1, {half, 2});
  torch::Tensor x0 = pairs.select(-1, 0);
  torch::Tensor x1 = pairs.select(-1, 1);
  return torch::stack({x0 * c - x1 * s, x1 * c + x0 * s}, -1).flatten(-2).to(x.scalar_type());
}

}  // namespace tmx::models
