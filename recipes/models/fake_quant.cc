#include "recipes/models/fake_quant.h"

#include <torch/torch.h>

#include <limits>

namespace tmx::models {
namespace {

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

}  // namespace

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
  const Int4Weight q = QuantizeInt4PerGroup(w, group_size);
  at::Tensor quantized;
  {
    torch::NoGradGuard no_grad;
    quantized = DequantizeInt4PerGroup(q.codes, q.scales, w.scalar_type());
  }
  return WithStraightThroughGradient(w, quantized);
}

at::Tensor FakeQuantizeInt8PerToken(const at::Tensor& x) {
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
