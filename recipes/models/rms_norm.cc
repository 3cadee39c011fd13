#include "recipes/models/rms_norm.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "recipes/models/cpu_vector.h"

namespace tmx::models {
namespace {

using cpu::Narrow;
using cpu::Widen;

// Partial sums per row: one AVX-512 register of float32 or two AVX2 ones. The sum's order is the source's in
// every compiled copy, so every CPU gets the same bits.
constexpr int kLanes = 16;

struct NormArgs {
  const void* x;      // [rows, dim], contiguous
  const void* scale;  // [dim], x's dtype
  const void* grad;   // [rows, dim], contiguous: backward only
  void* out;          // [rows, dim]: y forward, x's gradient backward
  float* rstd;        // [rows]: 1 / rms, written forward and read backward
  int64_t dim;
  float eps;
  bool plus_one;
};

// Sum over i < dim of f(i), in kLanes partial sums then their sum, then the tail.
template <typename F>
TMX_VECTOR_INLINE float RowSum(int64_t dim, const F& f) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= dim; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += f(i + j);
  }
  float sum = 0;
  for (int j = 0; j < kLanes; ++j) sum += acc[j];
  for (; i < dim; ++i) sum += f(i);
  return sum;
}

// y = (x * rstd cast to T) * scale, or (x * rstd * (1 + scale)) cast to T: torchtune's roundings.
template <typename T>
TMX_VECTOR_INLINE void NormRows(const NormArgs& a, int64_t begin, int64_t end) {
  const T* w = static_cast<const T*>(a.scale);
  const int64_t dim = a.dim;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * dim;
    T* y = static_cast<T*>(a.out) + r * dim;
    const float sum_sq = RowSum(dim, [&](int64_t i) {
      const float v = Widen(x[i]);
      return v * v;
    });
    const float rstd = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + a.eps);
    a.rstd[r] = rstd;
    if (a.plus_one) {
      for (int64_t i = 0; i < dim; ++i) y[i] = Narrow<T>(Widen(x[i]) * rstd * (1.0f + Widen(w[i])));
    } else {
      for (int64_t i = 0; i < dim; ++i) y[i] = Narrow<T>(Widen(Narrow<T>(Widen(x[i]) * rstd)) * Widen(w[i]));
    }
  }
}

// x's gradient: with gn the gradient reaching the float32 normed value (g * scale rounded to T, or
// g * (1 + scale)), gn * rstd - x * rstd^3 * sum(gn * x) / dim.
template <typename T>
TMX_VECTOR_INLINE void NormGradRows(const NormArgs& a, int64_t begin, int64_t end) {
  const T* w = static_cast<const T*>(a.scale);
  const int64_t dim = a.dim;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * dim;
    const T* g = static_cast<const T*>(a.grad) + r * dim;
    T* gx = static_cast<T*>(a.out) + r * dim;
    const auto normed_grad = [&](int64_t i) {
      return a.plus_one ? Widen(g[i]) * (1.0f + Widen(w[i])) : Widen(Narrow<T>(Widen(g[i]) * Widen(w[i])));
    };
    const float dot = RowSum(dim, [&](int64_t i) { return normed_grad(i) * Widen(x[i]); });
    const float rstd = a.rstd[r];
    const float c = -dot * rstd * rstd * rstd / static_cast<float>(dim);
    for (int64_t i = 0; i < dim; ++i) gx[i] = Narrow<T>(normed_grad(i) * rstd + c * Widen(x[i]));
  }
}

TMX_VECTOR_CLONES void NormRowsBf16(const NormArgs& a, int64_t begin, int64_t end) {
  NormRows<uint16_t>(a, begin, end);
}
TMX_VECTOR_CLONES void NormRowsFloat(const NormArgs& a, int64_t begin, int64_t end) { NormRows<float>(a, begin, end); }
TMX_VECTOR_CLONES void NormGradRowsBf16(const NormArgs& a, int64_t begin, int64_t end) {
  NormGradRows<uint16_t>(a, begin, end);
}
TMX_VECTOR_CLONES void NormGradRowsFloat(const NormArgs& a, int64_t begin, int64_t end) {
  NormGradRows<float>(a, begin, end);
}

void ForEachRowChunk(const NormArgs& a, int64_t rows, bool bf16, bool backward) {
  at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, a.dim)), [&](int64_t begin, int64_t end) {
    if (backward) {
      bf16 ? NormGradRowsBf16(a, begin, end) : NormGradRowsFloat(a, begin, end);
    } else {
      bf16 ? NormRowsBf16(a, begin, end) : NormRowsFloat(a, begin, end);
    }
  });
}

class RmsNormNode : public torch::autograd::Function<RmsNormNode> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& scale, double eps, bool plus_one) {
    RECORD_FUNCTION("tmx::rms_norm", std::vector<c10::IValue>({x}));  // named in the operation profile
    const torch::Tensor xc = x.contiguous();
    const torch::Tensor w = scale.contiguous();
    const int64_t dim = x.size(-1), rows = x.numel() / dim;
    torch::Tensor y = at::empty_like(xc);
    torch::Tensor rstd = at::empty({rows}, x.options().dtype(torch::kFloat));
    const NormArgs args{xc.const_data_ptr(),
                        w.const_data_ptr(),
                        nullptr,
                        y.mutable_data_ptr(),
                        rstd.mutable_data_ptr<float>(),
                        dim,
                        static_cast<float>(eps),
                        plus_one};
    ForEachRowChunk(args, rows, x.scalar_type() == torch::kBFloat16, /*backward=*/false);
    ctx->save_for_backward({xc, w, rstd});
    ctx->saved_data["plus_one"] = plus_one;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &rstd = saved[2];
    const bool plus_one = ctx->saved_data["plus_one"].toBool();
    const torch::Tensor g = grads[0].contiguous();
    const int64_t dim = x.size(-1), rows = x.numel() / dim;
    torch::Tensor grad_x, grad_scale;
    if (ctx->needs_input_grad(0)) {
      grad_x = at::empty_like(x);
      const NormArgs args{x.const_data_ptr(),
                          w.const_data_ptr(),
                          g.const_data_ptr(),
                          grad_x.mutable_data_ptr(),
                          const_cast<float*>(rstd.const_data_ptr<float>()),
                          dim,
                          0.0f,
                          plus_one};
      ForEachRowChunk(args, rows, x.scalar_type() == torch::kBFloat16, /*backward=*/true);
    }
    if (ctx->needs_input_grad(1)) {  // full fine-tuning: with ATen, as autograd of the formula takes it
      const torch::Tensor normed = x.to(torch::kFloat).reshape({rows, dim}) * rstd.unsqueeze(-1);
      const torch::Tensor g2 = g.reshape({rows, dim});
      grad_scale = plus_one ? (g2.to(torch::kFloat) * normed).sum(0).to(w.scalar_type())
                            : (g2 * normed.to(x.scalar_type())).sum(0);
    }
    return {grad_x, grad_scale, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& scale, double eps, bool plus_one) {
  const auto type = x.scalar_type();
  const bool kernel = cpu::OnePassKernels() && x.is_cpu() && scale.is_cpu() &&
                      (type == torch::kFloat || type == torch::kBFloat16) && scale.scalar_type() == type &&
                      scale.dim() == 1 && x.dim() >= 1 && x.numel() > 0 && scale.size(0) == x.size(-1);
  return kernel ? RmsNormNode::apply(x, scale, eps, plus_one) : RmsNormUnfused(x, scale, eps, plus_one);
}

at::Tensor RmsNormUnfused(const at::Tensor& x, const at::Tensor& scale, double eps, bool plus_one) {
  torch::Tensor xf = x.to(torch::kFloat);
  torch::Tensor normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  if (plus_one) return (normed * (1 + scale.to(torch::kFloat))).to(x.scalar_type());
  return normed.to(x.scalar_type()) * scale;
}

}  // namespace tmx::models
