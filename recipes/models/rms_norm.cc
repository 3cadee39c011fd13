#include "recipes/models/rms_norm.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
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
  const void* x;      // [rows, dim], contiguous: the norm's input (backward: the saved one, the sum when added)
  const void* scale;  // [dim], x's dtype
  const void* grad;   // [rows, dim], contiguous: backward only
  void* out;          // [rows, dim]: y forward, x's gradient backward
  float* rstd;        // [rows]: 1 / rms, written forward and read backward
  int64_t dim;
  float eps;
  bool plus_one;
  // AddRmsNorm: forward normalises x + addend, written to `sum` (x's dtype, rounded as ATen's add rounds); backward
  // adds the gradient reaching the sum directly (`sum_grad`) to the norm's, rounded as autograd's sum of the two.
  const void* addend = nullptr;
  void* sum = nullptr;
  const void* sum_grad = nullptr;
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

// h = x + b rounded to T, as ATen's add.
template <typename T>
TMX_VECTOR_INLINE void AddRow(const T* __restrict x, const T* __restrict b, T* __restrict h, int64_t dim) {
  for (int64_t i = 0; i < dim; ++i) h[i] = Narrow<T>(Widen(x[i]) + Widen(b[i]));
}

// y = (x * rstd cast to T) * scale, or (x * rstd * (1 + scale)) cast to T: torchtune's roundings.
template <typename T>
TMX_VECTOR_INLINE void NormRows(const NormArgs& a, int64_t begin, int64_t end) {
  const T* w = static_cast<const T*>(a.scale);
  const int64_t dim = a.dim;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * dim;
    T* y = static_cast<T*>(a.out) + r * dim;
    if (a.addend != nullptr) {  // the residual add, then the norm of its result (still in the cache)
      const T* b = static_cast<const T*>(a.addend) + r * dim;
      T* h = static_cast<T*>(a.sum) + r * dim;
      AddRow(x, b, h, dim);
      x = h;
    }
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

// The gradient reaching the float32 normed value from the output's gradient g: g * scale rounded to T, or
// g * (1 + scale).
template <typename T>
TMX_VECTOR_INLINE float NormedGrad(T g, T w, bool plus_one) {
  return plus_one ? Widen(g) * (1.0f + Widen(w)) : Widen(Narrow<T>(Widen(g) * Widen(w)));
}

// One row of x's gradient plus `gs`, the gradient reaching x directly (AddRmsNorm), each rounded to T as autograd
// rounds the norm's gradient and then the sum. One loop for each kind of norm: with the choice inside it, the
// compiler left the loop scalar (its backward 2.4x slower; checked with and without restrict).
template <typename T>
TMX_VECTOR_INLINE void AddNormGradRow(const T* __restrict x, const T* __restrict w, const T* __restrict g,
                                      const T* __restrict gs, T* __restrict gx, int64_t dim, float rstd, float c,
                                      bool plus_one) {
  const auto row = [&](auto plus_one_constant) {
    for (int64_t i = 0; i < dim; ++i) {
      const float gn = NormedGrad(g[i], w[i], decltype(plus_one_constant)::value);
      gx[i] = Narrow<T>(Widen(Narrow<T>(gn * rstd + c * Widen(x[i]))) + Widen(gs[i]));
    }
  };
  plus_one ? row(std::true_type()) : row(std::false_type());
}

// x's gradient, with gn = NormedGrad: gn * rstd - x * rstd^3 * sum(gn * x) / dim.
template <typename T>
TMX_VECTOR_INLINE void NormGradRows(const NormArgs& a, int64_t begin, int64_t end) {
  const T* w = static_cast<const T*>(a.scale);
  const int64_t dim = a.dim;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * dim;
    const T* g = static_cast<const T*>(a.grad) + r * dim;
    T* gx = static_cast<T*>(a.out) + r * dim;
    const auto normed_grad = [&](int64_t i) { return NormedGrad(g[i], w[i], a.plus_one); };
    const float dot = RowSum(dim, [&](int64_t i) { return normed_grad(i) * Widen(x[i]); });
    const float rstd = a.rstd[r];
    const float c = -dot * rstd * rstd * rstd / static_cast<float>(dim);
    if (a.sum_grad == nullptr) {
      for (int64_t i = 0; i < dim; ++i) gx[i] = Narrow<T>(normed_grad(i) * rstd + c * Widen(x[i]));
    } else {
      AddNormGradRow(x, w, g, static_cast<const T*>(a.sum_grad) + r * dim, gx, dim, rstd, c, a.plus_one);
    }
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

// The norm of x (or of x + addend, returned too) [..., dim] forward: y, each row's 1 / rms, and the sum.
struct NormForwardResult {
  torch::Tensor normed_input;  // x, or x + addend
  torch::Tensor y, rstd;
};

NormForwardResult NormForward(const torch::Tensor& x, const torch::Tensor& addend, const torch::Tensor& w,
                              double eps, bool plus_one) {
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor bc = addend.defined() ? addend.contiguous() : addend;
  const int64_t dim = x.size(-1), rows = x.numel() / dim;
  NormForwardResult r;
  r.normed_input = addend.defined() ? at::empty_like(xc) : xc;
  r.y = at::empty_like(xc);
  r.rstd = at::empty({rows}, x.options().dtype(torch::kFloat));
  NormArgs args{xc.const_data_ptr(),
                w.const_data_ptr(),
                nullptr,
                r.y.mutable_data_ptr(),
                r.rstd.mutable_data_ptr<float>(),
                dim,
                static_cast<float>(eps),
                plus_one};
  if (addend.defined()) {
    args.addend = bc.const_data_ptr();
    args.sum = r.normed_input.mutable_data_ptr();
  }
  ForEachRowChunk(args, rows, x.scalar_type() == torch::kBFloat16, /*backward=*/false);
  return r;
}

// The gradients of the norm's input (plus `sum_grad` where defined: what reaches x + addend directly) and of its
// scale, each where needed, from the saved input x, scale w and rstd and the output's gradient g (undefined: none).
std::pair<torch::Tensor, torch::Tensor> NormBackward(const torch::Tensor& x, const torch::Tensor& w,
                                                     const torch::Tensor& rstd, bool plus_one, const torch::Tensor& g_y,
                                                     const torch::Tensor& sum_grad, bool input_grad, bool scale_grad) {
  if (!g_y.defined()) return {input_grad ? sum_grad : torch::Tensor(), torch::Tensor()};
  const torch::Tensor g = g_y.contiguous();
  const torch::Tensor gs = sum_grad.defined() ? sum_grad.contiguous() : sum_grad;
  const int64_t dim = x.size(-1), rows = x.numel() / dim;
  torch::Tensor grad_x, grad_scale;
  if (input_grad) {
    grad_x = at::empty_like(x);
    NormArgs args{x.const_data_ptr(),
                  w.const_data_ptr(),
                  g.const_data_ptr(),
                  grad_x.mutable_data_ptr(),
                  const_cast<float*>(rstd.const_data_ptr<float>()),
                  dim,
                  0.0f,
                  plus_one};
    if (gs.defined()) args.sum_grad = gs.const_data_ptr();
    ForEachRowChunk(args, rows, x.scalar_type() == torch::kBFloat16, /*backward=*/true);
  }
  if (scale_grad) {  // full fine-tuning: with ATen, as autograd of the formula takes it
    const torch::Tensor normed = x.to(torch::kFloat).reshape({rows, dim}) * rstd.unsqueeze(-1);
    const torch::Tensor g2 = g.reshape({rows, dim});
    grad_scale = plus_one ? (g2.to(torch::kFloat) * normed).sum(0).to(w.scalar_type())
                          : (g2 * normed.to(x.scalar_type())).sum(0);
  }
  return {grad_x, grad_scale};
}

class RmsNormNode : public torch::autograd::Function<RmsNormNode> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& scale, double eps, bool plus_one) {
    RECORD_FUNCTION("tmx::rms_norm", std::vector<c10::IValue>({x}));  // named in the operation profile
    const torch::Tensor w = scale.contiguous();
    NormForwardResult r = NormForward(x, torch::Tensor(), w, eps, plus_one);
    ctx->save_for_backward({r.normed_input, w, r.rstd});
    ctx->saved_data["plus_one"] = plus_one;
    return r.y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [grad_x, grad_scale] =
        NormBackward(saved[0], saved[1], saved[2], ctx->saved_data["plus_one"].toBool(), grads[0], torch::Tensor(),
                     ctx->needs_input_grad(0), ctx->needs_input_grad(1));
    return {grad_x, grad_scale, torch::Tensor(), torch::Tensor()};
  }
};

// h = x + addend and RmsNorm(h) as one node: outputs {h, y}. Backward, h's gradient is the one reaching h
// directly plus the norm's, which both x and addend receive.
class AddRmsNormNode : public torch::autograd::Function<AddRmsNormNode> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                const torch::Tensor& addend, const torch::Tensor& scale, double eps,
                                                bool plus_one) {
    RECORD_FUNCTION("tmx::add_rms_norm", std::vector<c10::IValue>({x, addend}));
    ctx->set_materialize_grads(false);  // an output nothing used gets no gradient, not zeros
    const torch::Tensor w = scale.contiguous();
    NormForwardResult r = NormForward(x, addend, w, eps, plus_one);
    ctx->save_for_backward({r.normed_input, w, r.rstd});
    ctx->saved_data["plus_one"] = plus_one;
    return {r.normed_input, r.y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const bool input_grad = ctx->needs_input_grad(0) || ctx->needs_input_grad(1);
    auto [grad_sum, grad_scale] = NormBackward(saved[0], saved[1], saved[2], ctx->saved_data["plus_one"].toBool(),
                                               grads[1], grads[0], input_grad, ctx->needs_input_grad(2));
    return {ctx->needs_input_grad(0) ? grad_sum : torch::Tensor(), ctx->needs_input_grad(1) ? grad_sum : torch::Tensor(),
            grad_scale, torch::Tensor(), torch::Tensor()};
  }
};

bool KernelApplies(const at::Tensor& x, const at::Tensor& scale) {
  const auto type = x.scalar_type();
  return cpu::OnePassKernels() && x.is_cpu() && scale.is_cpu() &&
         (type == torch::kFloat || type == torch::kBFloat16) && scale.scalar_type() == type && scale.dim() == 1 &&
         x.dim() >= 1 && x.numel() > 0 && scale.size(0) == x.size(-1);
}

}  // namespace

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& scale, double eps, bool plus_one) {
  return KernelApplies(x, scale) ? RmsNormNode::apply(x, scale, eps, plus_one)
                                 : RmsNormUnfused(x, scale, eps, plus_one);
}

std::pair<at::Tensor, at::Tensor> AddRmsNorm(const at::Tensor& x, const at::Tensor& addend, const at::Tensor& scale,
                                             double eps, bool plus_one) {
  if (KernelApplies(x, scale) && addend.sizes() == x.sizes() && addend.scalar_type() == x.scalar_type() &&
      addend.device() == x.device()) {
    torch::autograd::variable_list out = AddRmsNormNode::apply(x, addend, scale, eps, plus_one);
    return {out[0], out[1]};
  }
  at::Tensor h = x + addend;
  at::Tensor y = RmsNorm(h, scale, eps, plus_one);
  return {h, y};
}

at::Tensor RmsNormUnfused(const at::Tensor& x, const at::Tensor& scale, double eps, bool plus_one) {
  torch::Tensor xf = x.to(torch::kFloat);
  torch::Tensor normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  if (plus_one) return (normed * (1 + scale.to(torch::kFloat))).to(x.scalar_type());
  return normed.to(x.scalar_type()) * scale;
}

}  // namespace tmx::models
