#include "recipes/models/rope.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>

#include "recipes/models/cpu_vector.h"

namespace tmx::models {
namespace {

using cpu::Narrow;
using cpu::Widen;

constexpr double kPi = 3.14159265358979323846;

// The CPU loop: x [B, T, heads, head_dim] rotated by (cos, sin) [rows, T, head_dim/2] (rows 1 or B), or by
// (cos, -sin) when `inverse` (the rotation's transpose: its backward). float32 arithmetic as the ATen form below
// does it, term for term (x0 c - x1 s and x1 c + x0 s, each product rounded before the sum: this file is compiled
// without floating-point contraction), rounded to bf16 to nearest even as ATen's casts do, so both give the same
// bits; the result contiguous.
struct RotateArgs {
  const void* in;
  void* out;
  const float* cos;
  const float* sin;
  int64_t t, heads, half;
  int64_t stride_b, stride_t, stride_h;  // x's, in elements; its last dimension is contiguous
  bool per_row, interleaved, inverse;
};

template <typename T, bool kInterleaved, bool kInverse>
TMX_VECTOR_INLINE void RotateRange(const RotateArgs& a, int64_t begin, int64_t end) {
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  const int64_t half = a.half;
  for (int64_t bt = begin; bt < end; ++bt) {
    const int64_t row = bt / a.t, pos = bt % a.t;
    const float* c = a.cos + ((a.per_row ? row : 0) * a.t + pos) * half;
    const float* s = a.sin + ((a.per_row ? row : 0) * a.t + pos) * half;
    for (int64_t h = 0; h < a.heads; ++h) {
      const T* x = in + row * a.stride_b + pos * a.stride_t + h * a.stride_h;
      T* o = out + (bt * a.heads + h) * 2 * half;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t i0 = kInterleaved ? 2 * i : i, i1 = kInterleaved ? 2 * i + 1 : i + half;
        const float x0 = Widen(x[i0]), x1 = Widen(x[i1]);
        const float x0c = x0 * c[i], x1s = x1 * s[i], x1c = x1 * c[i], x0s = x0 * s[i];
        o[i0] = Narrow<T>(kInverse ? x0c + x1s : x0c - x1s);
        o[i1] = Narrow<T>(kInverse ? x1c - x0s : x1c + x0s);
      }
    }
  }
}

template <typename T>
TMX_VECTOR_INLINE void RotateRangeOf(const RotateArgs& a, int64_t begin, int64_t end) {
  if (a.interleaved) {
    a.inverse ? RotateRange<T, true, true>(a, begin, end) : RotateRange<T, true, false>(a, begin, end);
  } else {
    a.inverse ? RotateRange<T, false, true>(a, begin, end) : RotateRange<T, false, false>(a, begin, end);
  }
}

TMX_VECTOR_CLONES void RotateRangeBf16(const RotateArgs& a, int64_t begin, int64_t end) {
  RotateRangeOf<uint16_t>(a, begin, end);
}
TMX_VECTOR_CLONES void RotateRangeFloat(const RotateArgs& a, int64_t begin, int64_t end) {
  RotateRangeOf<float>(a, begin, end);
}

// x float32 or bf16 on the CPU, its last dimension contiguous; cos and sin contiguous float32.
torch::Tensor RotateOnCpu(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, bool interleaved,
                          bool inverse) {
  torch::Tensor out = at::empty(x.sizes(), x.options().memory_format(c10::MemoryFormat::Contiguous));
  const RotateArgs args{x.const_data_ptr(),
                        out.mutable_data_ptr(),
                        cos.const_data_ptr<float>(),
                        sin.const_data_ptr<float>(),
                        x.size(1),
                        x.size(2),
                        x.size(3) / 2,
                        x.stride(0),
                        x.stride(1),
                        x.stride(2),
                        cos.size(0) > 1,
                        interleaved,
                        inverse};
  const bool bf16 = x.scalar_type() == torch::kBFloat16;
  const int64_t per_position = std::max<int64_t>(1, x.size(2) * x.size(3));
  at::parallel_for(0, x.size(0) * x.size(1), std::max<int64_t>(1, 32768 / per_position),
                   [&](int64_t begin, int64_t end) {
                     bf16 ? RotateRangeBf16(args, begin, end) : RotateRangeFloat(args, begin, end);
                   });
  return out;
}

// The same rotation in ATen operations (any device and dtype): what the CPU loop above reproduces.
torch::Tensor RotateComposite(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                              bool interleaved, bool inverse) {
  const int64_t rows = cos.size(0), t = cos.size(1), half = cos.size(2);
  torch::Tensor c = cos.view({rows, t, 1, half});
  torch::Tensor s = sin.view({rows, t, 1, half});
  if (inverse) s = -s;
  torch::Tensor xf = x.to(torch::kFloat);
  if (!interleaved) {
    torch::Tensor x0 = xf.narrow(-1, 0, half);
    torch::Tensor x1 = xf.narrow(-1, half, half);
    return torch::cat({x0 * c - x1 * s, x1 * c + x0 * s}, -1).to(x.scalar_type());
  }
  torch::Tensor pairs = xf.unflatten(-1, {half, 2});
  torch::Tensor x0 = pairs.select(-1, 0);
  torch::Tensor x1 = pairs.select(-1, 1);
  return torch::stack({x0 * c - x1 * s, x1 * c + x0 * s}, -1).flatten(-2).to(x.scalar_type());
}

torch::Tensor Rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, bool interleaved,
                     bool inverse) {
  const auto type = x.scalar_type();
  if (!x.is_cpu() || !cos.is_cpu() || cos.scalar_type() != torch::kFloat || sin.scalar_type() != torch::kFloat ||
      (type != torch::kFloat && type != torch::kBFloat16)) {
    return RotateComposite(x, cos, sin, interleaved, inverse);
  }
  return RotateOnCpu(x.stride(3) == 1 ? x : x.contiguous(), cos.contiguous(), sin.contiguous(), interleaved, inverse);
}

// RoPE as one autograd node: the forward rotates, the backward rotates the gradient back (a rotation's
// transpose is its inverse), so nothing but cos and sin is saved and neither pass makes float32 temporaries.
// Autograd of the composite takes 9 operations forward and more backward on float32 copies of q and k.
class RotaryEmbedding : public torch::autograd::Function<RotaryEmbedding> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin, int64_t layout) {
    RECORD_FUNCTION("tmx::rotary_embedding", std::vector<c10::IValue>({x}));  // named in the operation profile
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["interleaved"] = layout == static_cast<int64_t>(RopeLayout::kInterleaved);
    return Rotate(x, cos, sin, layout == static_cast<int64_t>(RopeLayout::kInterleaved), /*inverse=*/false);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    torch::Tensor grad_x;
    if (ctx->needs_input_grad(0)) {
      grad_x = Rotate(grads[0], saved[0], saved[1], ctx->saved_data["interleaved"].toBool(), /*inverse=*/true);
    }
    return {grad_x, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

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

namespace {

// The shapes both forms accept; cos and sin as [rows, T, head_dim/2].
std::pair<torch::Tensor, torch::Tensor> CheckedAngles(const torch::Tensor& x, const torch::Tensor& cos,
                                                      const torch::Tensor& sin) {
  TORCH_CHECK(x.dim() == 4, "ApplyRotaryEmbedding: expected x [B, T, heads, head_dim], got ", x.sizes());
  const int64_t t = x.size(1);
  const int64_t half = x.size(3) / 2;
  const bool per_row = cos.dim() == 3;  // packed rows: each row has its own positions
  const int64_t rows = per_row ? x.size(0) : 1;
  TORCH_CHECK(
      (per_row ? cos.sizes() == torch::IntArrayRef({rows, t, half}) : cos.sizes() == torch::IntArrayRef({t, half})) &&
          sin.sizes() == cos.sizes(),
      "ApplyRotaryEmbedding: expected cos/sin [", t, ", ", half, "] or [", x.size(0), ", ", t, ", ", half, "], got ",
      cos.sizes(), " and ", sin.sizes());
  return {cos.view({rows, t, half}), sin.view({rows, t, half})};
}

}  // namespace

torch::Tensor ApplyRotaryEmbedding(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                   RopeLayout layout) {
  const auto [c, s] = CheckedAngles(x, cos, sin);
  if (!cpu::OnePassKernels()) return RotateComposite(x, c, s, layout == RopeLayout::kInterleaved, /*inverse=*/false);
  return RotaryEmbedding::apply(x, c, s, static_cast<int64_t>(layout));
}

torch::Tensor ApplyRotaryEmbeddingUnfused(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                          RopeLayout layout) {
  const auto [c, s] = CheckedAngles(x, cos, sin);
  return RotateComposite(x, c, s, layout == RopeLayout::kInterleaved, /*inverse=*/false);
}

}  // namespace tmx::models
