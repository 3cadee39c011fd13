#include "recipes/models/swiglu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "recipes/models/cpu_vector.h"

namespace tmx::models {
namespace {

using cpu::Exp;
using cpu::Narrow;
using cpu::RoundAs;
using cpu::Widen;

struct SiluMulArgs {
  const void* gate;
  const void* up;
  const void* grad;  // backward only
  void* out;         // forward: silu(gate) * up; backward: gate's gradient
  void* grad_up;     // backward only
};

// Elements go through in blocks: widened to float32 into arrays on the stack, the math in float32 alone, then
// narrowed (a loop mixing bf16 and float32 lanes with Exp does not vectorise).
constexpr int64_t kBlock = 512;

template <typename T>
TMX_VECTOR_INLINE void SiluMulRange(const SiluMulArgs& a, int64_t begin, int64_t end) {
  const T* gate = static_cast<const T*>(a.gate);
  const T* up = static_cast<const T*>(a.up);
  T* out = static_cast<T*>(a.out);
  float x[kBlock], u[kBlock];
  for (int64_t start = begin; start < end; start += kBlock) {
    const int64_t n = std::min(kBlock, end - start);
    for (int64_t i = 0; i < n; ++i) x[i] = Widen(gate[start + i]), u[i] = Widen(up[start + i]);
    for (int64_t i = 0; i < n; ++i) x[i] = RoundAs<T>(x[i] / (1.0f + Exp(-x[i]))) * u[i];
    for (int64_t i = 0; i < n; ++i) out[start + i] = Narrow<T>(x[i]);
  }
}

// up's gradient g * silu(gate) and gate's silu_backward(g * up, gate) = g * up * s * (1 + x (1 - s)) with
// s = sigmoid(x), each rounded where autograd's operations round.
template <typename T>
TMX_VECTOR_INLINE void SiluMulGradRange(const SiluMulArgs& a, int64_t begin, int64_t end) {
  const T* gate = static_cast<const T*>(a.gate);
  const T* up = static_cast<const T*>(a.up);
  const T* grad = static_cast<const T*>(a.grad);
  T* grad_gate = static_cast<T*>(a.out);
  T* grad_up = static_cast<T*>(a.grad_up);
  float x[kBlock], u[kBlock], g[kBlock];
  for (int64_t start = begin; start < end; start += kBlock) {
    const int64_t n = std::min(kBlock, end - start);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = Widen(gate[start + i]), u[i] = Widen(up[start + i]), g[i] = Widen(grad[start + i]);
    }
    for (int64_t i = 0; i < n; ++i) {
      const float e = Exp(-x[i]);
      const float silu = RoundAs<T>(x[i] / (1.0f + e));
      const float sigmoid = 1.0f / (1.0f + e);
      const float g_silu = RoundAs<T>(g[i] * u[i]);
      u[i] = g[i] * silu;                                          // up's gradient
      x[i] = g_silu * sigmoid * (1.0f + x[i] * (1.0f - sigmoid));  // gate's
    }
    for (int64_t i = 0; i < n; ++i) grad_up[start + i] = Narrow<T>(u[i]), grad_gate[start + i] = Narrow<T>(x[i]);
  }
}

TMX_VECTOR_CLONES void SiluMulBf16(const SiluMulArgs& a, int64_t begin, int64_t end) {
  SiluMulRange<uint16_t>(a, begin, end);
}
TMX_VECTOR_CLONES void SiluMulFloat(const SiluMulArgs& a, int64_t begin, int64_t end) {
  SiluMulRange<float>(a, begin, end);
}
TMX_VECTOR_CLONES void SiluMulGradBf16(const SiluMulArgs& a, int64_t begin, int64_t end) {
  SiluMulGradRange<uint16_t>(a, begin, end);
}
TMX_VECTOR_CLONES void SiluMulGradFloat(const SiluMulArgs& a, int64_t begin, int64_t end) {
  SiluMulGradRange<float>(a, begin, end);
}

void ForEachChunk(const SiluMulArgs& a, int64_t n, bool bf16, bool backward) {
  at::parallel_for(0, n, 16 * kBlock, [&](int64_t begin, int64_t end) {
    if (backward) {
      bf16 ? SiluMulGradBf16(a, begin, end) : SiluMulGradFloat(a, begin, end);
    } else {
      bf16 ? SiluMulBf16(a, begin, end) : SiluMulFloat(a, begin, end);
    }
  });
}

class SiluMulNode : public torch::autograd::Function<SiluMulNode> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& gate,
                               const torch::Tensor& up) {
    RECORD_FUNCTION("tmx::silu_mul", std::vector<c10::IValue>({gate, up}));  // named in the operation profile
    const torch::Tensor g = gate.contiguous(), u = up.contiguous();
    torch::Tensor out = at::empty_like(g);
    const SiluMulArgs args{g.const_data_ptr(), u.const_data_ptr(), nullptr, out.mutable_data_ptr(), nullptr};
    ForEachChunk(args, g.numel(), g.scalar_type() == torch::kBFloat16, /*backward=*/false);
    ctx->save_for_backward({g, u});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &gate = saved[0], &up = saved[1];
    const torch::Tensor g = grads[0].contiguous();
    torch::Tensor grad_gate = at::empty_like(gate), grad_up = at::empty_like(up);
    const SiluMulArgs args{gate.const_data_ptr(), up.const_data_ptr(), g.const_data_ptr(), grad_gate.mutable_data_ptr(),
                           grad_up.mutable_data_ptr()};
    ForEachChunk(args, gate.numel(), gate.scalar_type() == torch::kBFloat16, /*backward=*/true);
    return {ctx->needs_input_grad(0) ? grad_gate : torch::Tensor(),
            ctx->needs_input_grad(1) ? grad_up : torch::Tensor()};
  }
};

}  // namespace

at::Tensor SiluMul(const at::Tensor& gate, const at::Tensor& up) {
  const auto type = gate.scalar_type();
  const bool kernel = cpu::OnePassKernels() && gate.is_cpu() && up.is_cpu() &&
                      (type == torch::kFloat || type == torch::kBFloat16) && up.scalar_type() == type &&
                      gate.sizes() == up.sizes() && gate.numel() > 0;
  return kernel ? SiluMulNode::apply(gate, up) : SiluMulUnfused(gate, up);
}

at::Tensor SiluMulUnfused(const at::Tensor& gate, const at::Tensor& up) { return at::silu(gate) * up; }

}  // namespace tmx::models
