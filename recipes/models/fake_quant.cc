#include "recipes/models/fake_quant.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <limits>

#include "recipes/models/cpu_vector.h"

namespace tmx::models {
namespace {

using cpu::Narrow;
using cpu::RoundAs;
using cpu::Widen;

double Epsilon(c10::ScalarType dtype) {
  switch (dtype) {
    case torch::kBFloat16: return std::numeric_limits<float>::epsilon() * (1 << 16);  // 2^-7
    case torch::kHalf: return 1.0 / 1024;                                              // 2^-10
    case torch::kFloat: return std::numeric_limits<float>::epsilon();
    case torch::kDouble: return std::numeric_limits<double>::epsilon();
    default: TORCH_CHECK(false, "fake quantisation needs a floating-point tensor, got ", dtype);
  }
}

// (q - zero_point) * scale back in `dtype`, q = clamp(round(v * (1 / scale)) + zero_point, lo, hi); `v` viewed so
// that `scale` and `zero_point` (float32, keepdim) broadcast over its last dimension.
at::Tensor QuantizeDequantize(const at::Tensor& v, const at::Tensor& scale, const at::Tensor& zero_point,
                              int64_t lo, int64_t hi) {
  at::Tensor q = torch::clamp(torch::round(v * scale.reciprocal()) + zero_point, lo, hi);
  return ((q.to(torch::kInt) - zero_point.to(torch::kInt)).to(v.scalar_type()) * scale).to(v.scalar_type());
}

// Forward: the fake-quantised values (computed by the caller without autograd); backward: the gradient unchanged.
class StraightThrough : public torch::autograd::Function<StraightThrough> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& input, const at::Tensor& quantized) {
    (void)input;
    return quantized;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grad_outputs) {
    return {grad_outputs[0], at::Tensor()};
  }
};

at::Tensor WithStraightThroughGradient(const at::Tensor& input, const at::Tensor& quantized) {
  if (!input.requires_grad() || !torch::GradMode::is_enabled()) return quantized;
  return StraightThrough::apply(input, quantized);
}

// The one-pass loops on cpu (bf16 as its 16 bits, or float32): per group of a weight, or per token of an
// activation, one pass finds the range in a core's cache and a second writes the fake-quantised values, where the
// operations above take some ten passes over the whole tensor (amin, amax, clamps, the scale's reciprocal, a
// float32 product, round, clamp, the int casts, the product with the scale and its rounding). Each step rounds
// where the operations round, so the bits are theirs (FakeQuantTest compares the two paths). A group or token
// holding an infinity or a NaN is reported, and the caller takes the operations instead.

// v rounded to the nearest integer, ties to even, for |v| < 2^22 (the callers clamp to at most a few hundred
// first): adding 1.5 * 2^23 leaves a float no fraction bits. The files of tm_cpu_kernels keep the two additions.
TMX_VECTOR_INLINE float RoundHalfEven(float v) {
  constexpr float kShifter = 12582912.0f;
  return (v + kShifter) - kShifter;
}

// A float's bits as a signed integer that orders as the values do (-0 just below +0, NaNs beyond the infinities),
// and back: min and max over a row become integer reductions, which the compiler vectorises (a float one it
// keeps scalar without -ffast-math).
TMX_VECTOR_INLINE int32_t OrderedKey(float v) {
  const int32_t bits = c10::bit_cast<int32_t>(v);
  return bits ^ ((bits >> 31) & 0x7fffffff);
}
TMX_VECTOR_INLINE float FromOrderedKey(int32_t key) { return c10::bit_cast<float>(key ^ ((key >> 31) & 0x7fffffff)); }

TMX_VECTOR_INLINE bool Finite(float v) { return (c10::bit_cast<uint32_t>(v) & 0x7f800000u) != 0x7f800000u; }

// min(x, 0) and max(x, 0) over n values. Returns whether both are finite (an infinity or a NaN among the values
// makes one of them so).
template <typename T>
TMX_VECTOR_INLINE bool RangeWithZero(const T* x, int64_t n, float* low, float* high) {
  int32_t lo = 0, hi = 0;  // +0's key
  for (int64_t i = 0; i < n; ++i) {
    const int32_t key = OrderedKey(Widen(x[i]));
    lo = std::min(lo, key);
    hi = std::max(hi, key);
  }
  *low = FromOrderedKey(lo), *high = FromOrderedKey(hi);
  return Finite(*low) && Finite(*high);
}

struct FakeQuantArgs {
  const void* in;
  void* out;
  int64_t row;    // values a group (weights) or a token (activations)
  float epsilon;  // the smallest scale: the input dtype's machine epsilon
  // The int4 grid's ends, read at run time: as constants in the loop GCC left the clamp a branch and the loop
  // scalar ("control flow in loop", -fopt-info-vec-missed).
  float lowest = kInt4Min, highest = kInt4Max;
};

// A row's grid: x' = round(clamp(x * inverse, lo, hi)) * scale, rounded to the input's dtype.
struct RowGrid {
  float scale, inverse, lo, hi;
};

// Rows [begin, end) of `a`, each ranged (min(x, 0), max(x, 0)), given its grid by grid(low, high) and written
// in one pass. Returns whether a row held a value that is not finite.
template <typename T, typename GridOf>
TMX_VECTOR_INLINE bool FakeQuantizeRowsRange(const FakeQuantArgs& a, int64_t begin, int64_t end, GridOf grid_of) {
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  bool bad = false;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = in + r * a.row;
    T* o = out + r * a.row;
    float low, high;
    bad |= !RangeWithZero(x, a.row, &low, &high);
    const RowGrid g = grid_of(low, high);
    for (int64_t i = 0; i < a.row; ++i) {
      const float q = RoundHalfEven(std::min(std::max(Widen(x[i]) * g.inverse, g.lo), g.hi));
      o[i] = Narrow<T>(q * g.scale);
    }
  }
  return bad;
}

// Groups of a weight: scale = max(max|w| / 7.5 in T, epsilon), w' = clamp(round(w * (1 / scale)), -8, 7) * scale
// rounded to T. Clamping before rounding gives the same integers, the bounds being integers.
template <typename T>
TMX_VECTOR_INLINE bool Int4GroupsRange(const FakeQuantArgs& a, int64_t begin, int64_t end) {
  return FakeQuantizeRowsRange<T>(a, begin, end, [&a](float low, float high) {
    const float range = std::max(-low, high);
    const float scale = std::max(RoundAs<T>(range / (static_cast<float>(kInt4Max - kInt4Min) / 2)), a.epsilon);
    return RowGrid{scale, 1.0f / scale, a.lowest, a.highest};
  });
}

// Tokens of an activation: scale = max((high - low) / 255 in T, epsilon), zero_point = clamp(-128 - round(low /
// scale), -128, 127) in T, q = clamp(round(x * (1 / scale)) + zero_point, -128, 127) and x' = (q - zero_point) *
// scale rounded to T; q - zero_point is computed as the rounding of x / scale clamped to [-128 - zero_point,
// 127 - zero_point], which is the same integer.
template <typename T>
TMX_VECTOR_INLINE bool Int8TokensRange(const FakeQuantArgs& a, int64_t begin, int64_t end) {
  return FakeQuantizeRowsRange<T>(a, begin, end, [&a](float low, float high) {
    const float span = RoundAs<T>(high - low);
    const float scale = std::max(RoundAs<T>(span / static_cast<float>(kInt8Max - kInt8Min)), a.epsilon);
    const float zero_point = std::min(
        std::max(RoundAs<T>(static_cast<float>(kInt8Min) - RoundHalfEven(RoundAs<T>(low / scale))),
                 static_cast<float>(kInt8Min)),
        static_cast<float>(kInt8Max));
    return RowGrid{scale, 1.0f / scale, static_cast<float>(kInt8Min) - zero_point,
                   static_cast<float>(kInt8Max) - zero_point};
  });
}

TMX_VECTOR_CLONES bool Int4GroupsBf16(const FakeQuantArgs& a, int64_t begin, int64_t end) {
  return Int4GroupsRange<uint16_t>(a, begin, end);
}
TMX_VECTOR_CLONES bool Int4GroupsFloat(const FakeQuantArgs& a, int64_t begin, int64_t end) {
  return Int4GroupsRange<float>(a, begin, end);
}
TMX_VECTOR_CLONES bool Int8TokensBf16(const FakeQuantArgs& a, int64_t begin, int64_t end) {
  return Int8TokensRange<uint16_t>(a, begin, end);
}
TMX_VECTOR_CLONES bool Int8TokensFloat(const FakeQuantArgs& a, int64_t begin, int64_t end) {
  return Int8TokensRange<float>(a, begin, end);
}

bool OnePassApplies(const at::Tensor& t) {
  return t.layout() == at::kStrided && FakeQuantizesInOnePass(t.device().is_cpu(), t.scalar_type());
}

using RowsKernel = bool (*)(const FakeQuantArgs&, int64_t, int64_t);

// The fake-quantised copy of `t` (no gradient) by `bf16` or `f32` over its rows of `row` > 0 values, or an
// undefined tensor where a row holds a value that is not finite.
at::Tensor FakeQuantizeRows(const at::Tensor& t, int64_t row, RowsKernel bf16, RowsKernel f32) {
  const at::Tensor in = t.detach().contiguous();
  at::Tensor out = at::empty_like(in);
  const FakeQuantArgs args{in.data_ptr(), out.data_ptr(), row, static_cast<float>(Epsilon(t.scalar_type()))};
  const RowsKernel kernel = t.scalar_type() == at::kBFloat16 ? bf16 : f32;
  std::atomic<bool> bad{false};
  at::parallel_for(0, in.numel() / row, std::max<int64_t>(1, (1 << 14) / row), [&](int64_t b, int64_t e) {
    if (kernel(args, b, e)) bad = true;
  });
  return bad ? at::Tensor() : out;
}

}  // namespace

bool FakeQuantizesInOnePass(bool on_cpu, c10::ScalarType dtype) {
  return on_cpu && (dtype == at::kBFloat16 || dtype == at::kFloat) && cpu::OnePassKernels();
}

Int4Weight QuantizeInt4PerGroup(const at::Tensor& w, int64_t group_size) {
  TORCH_CHECK(w.dim() == 2, "int4 weight quantisation needs a [out, in] weight, got ", w.sizes());
  TORCH_CHECK(group_size > 1 && w.size(1) % group_size == 0, "int4 weight quantisation: in_features ", w.size(1),
              " is not a multiple of the group size ", group_size);
  torch::NoGradGuard no_grad;
  const at::Tensor groups = w.detach().reshape({w.size(0), w.size(1) / group_size, group_size});
  // max(-min(w, 0), max(w, 0)) = max |w| over the group, 0 for an all-zero group (then the epsilon).
  const at::Tensor range = torch::maximum(groups.amin(-1, true).clamp_max(0).neg(), groups.amax(-1, true).clamp_min(0));
  const at::Tensor scale =
      (range / (static_cast<double>(kInt4Max - kInt4Min) / 2)).clamp_min(Epsilon(w.scalar_type())).to(torch::kFloat);
  const at::Tensor codes = torch::clamp(torch::round(groups * scale.reciprocal()), kInt4Min, kInt4Max);
  return {codes.to(torch::kChar).reshape(w.sizes()), scale.squeeze(-1)};
}

at::Tensor DequantizeInt4PerGroup(const at::Tensor& codes, const at::Tensor& scales, c10::ScalarType dtype) {
  TORCH_CHECK(codes.dim() == 2 && scales.dim() == 2 && codes.size(0) == scales.size(0) && scales.size(1) > 0 &&
                  codes.size(1) % scales.size(1) == 0,
              "int4 weight: codes ", codes.sizes(), " and scales ", scales.sizes(), " do not belong together");
  const int64_t groups = scales.size(1);
  const at::Tensor grouped = codes.reshape({codes.size(0), groups, codes.size(1) / groups});
  return (grouped.to(torch::kInt).to(dtype) * scales.unsqueeze(-1)).to(dtype).reshape(codes.sizes());
}

at::Tensor FakeQuantizeInt4PerGroup(const at::Tensor& w, int64_t group_size) {
  at::Tensor quantized;
  if (w.dim() == 2 && Int4GroupsFit(w.size(1), group_size) && OnePassApplies(w)) {  // else the operations' errors
    torch::NoGradGuard no_grad;
    quantized = FakeQuantizeRows(w, group_size, Int4GroupsBf16, Int4GroupsFloat);
  }
  if (!quantized.defined()) return FakeQuantizeInt4PerGroupByOperations(w, group_size);
  return WithStraightThroughGradient(w, quantized);
}

at::Tensor FakeQuantizeInt4PerGroupByOperations(const at::Tensor& w, int64_t group_size) {
  const Int4Weight q = QuantizeInt4PerGroup(w, group_size);
  at::Tensor quantized;
  {
    torch::NoGradGuard no_grad;
    quantized = DequantizeInt4PerGroup(q.codes, q.scales, w.scalar_type());
  }
  return WithStraightThroughGradient(w, quantized);
}

at::Tensor FakeQuantizeInt8PerToken(const at::Tensor& x) {
  at::Tensor quantized;
  if (x.dim() >= 1 && x.numel() > 0 && OnePassApplies(x)) {  // else the operations' errors
    torch::NoGradGuard no_grad;
    quantized = FakeQuantizeRows(x, x.size(-1), Int8TokensBf16, Int8TokensFloat);
  }
  if (!quantized.defined()) return FakeQuantizeInt8PerTokenByOperations(x);
  return WithStraightThroughGradient(x, quantized);
}

at::Tensor FakeQuantizeInt8PerTokenByOperations(const at::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1, "int8 activation fake quantisation needs at least one dimension");
  at::Tensor quantized;
  {
    torch::NoGradGuard no_grad;
    const at::Tensor v = x.detach();
    const at::Tensor low = v.amin(-1, true).clamp_max(0), high = v.amax(-1, true).clamp_min(0);
    at::Tensor scale = ((high - low) / static_cast<double>(kInt8Max - kInt8Min)).clamp_min(Epsilon(x.scalar_type()));
    const at::Tensor zero_point = (kInt8Min - torch::round(low / scale)).clamp(kInt8Min, kInt8Max).to(torch::kFloat);
    quantized = QuantizeDequantize(v, scale.to(torch::kFloat), zero_point, kInt8Min, kInt8Max);
  }
  return WithStraightThroughGradient(x, quantized);
}

}  // namespace tmx::models
