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

// silu and its derivative for every bf16 value: bf16 has 65536, so a bf16 gate's are looked up rather than
// computed (an exp and two divisions an element, which made the node compute-bound where ATen's silu is not).
// The entries are the float32 formulas of the float32 loops below.
struct Bf16SiluTables {
  uint16_t silu[65536];        // x / (1 + exp(-x)) rounded to bf16, as its bits
  float derivative[65536];     // silu'(x) = s (1 + x (1 - s)) with s = 1 / (1 + exp(-x))
};

const Bf16SiluTables& SiluTables() {
  static const Bf16SiluTables* const tables = [] {
    auto* t = new Bf16SiluTables;  // 384 KiB, built once on first use and kept for the process
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      const float x = Widen(static_cast<uint16_t>(bits));
      const float e = Exp(-x);
      const float s = 1.0f / (1.0f + e);
      t->silu[bits] = Narrow<uint16_t>(x / (1.0f + e));
      t->derivative[bits] = s * (1.0f + x * (1.0f - s));
    }
    return t;
  }();
  return *tables;
}

struct SiluMulArgs {
  const void* gate;
  const void* up;
  const void* grad;  // backward only
  void* out;         // forward: silu(gate) * up; backward: gate's gradient
  void* grad_up;     // backward only
  const Bf16SiluTables* tables;  // bf16 only
};

// Elements go through in blocks: widened to float32 (or looked up) into arrays on the stack, the math in float32
// alone, then narrowed (a loop mixing bf16 and float32 lanes with Exp does not vectorise).
constexpr int64_t kBlock = 512;

TMX_VECTOR_INLINE void SiluMulFloatRange(const SiluMulArgs& a, int64_t begin, int64_t end) {
  const float* gate = static_cast<const float*>(a.gate);
  const float* up = static_cast<const float*>(a.up);
  float* out = static_cast<float*>(a.out);
  for (int64_t start = begin; start < end; start += kBlock) {
    const int64_t n = std::min(kBlock, end - start);
    float e[kBlock];
    for (int64_t i = 0; i < n; ++i) e[i] = Exp(-gate[start + i]);
    for (int64_t i = 0; i < n; ++i) out[start + i] = gate[start + i] / (1.0f + e[i]) * up[start + i];
  }
}

// silu rounded to bf16 (as torchtune's bf16 `F.silu` returns it), times up, rounded.
TMX_VECTOR_INLINE void SiluMulBf16Range(const SiluMulArgs& a, int64_t begin, int64_t end) {
  const uint16_t* gate = static_cast<const uint16_t*>(a.gate);
  const uint16_t* up = static_cast<const uint16_t*>(a.up);
  uint16_t* out = static_cast<uint16_t*>(a.out);
  const uint16_t* silu = a.tables->silu;
  for (int64_t start = begin; start < end; start += kBlock) {
    const int64_t n = std::min(kBlock, end - start);
    float s[kBlock];
    for (int64_t i = 0; i < n; ++i) s[i] = Widen(silu[gate[start + i]]);
    for (int64_t i = 0; i < n; ++i) out[start + i] = Narrow<uint16_t>(s[i] * Widen(up[start + i]));
  }
}

// up's gradient g * silu(gate) and gate's silu_backward(g * up, gate) = g * up * s * (1 + x (1 - s)) with
// s = sigmoid(x).
TMX_VECTOR_INLINE void SiluMulGradFloatRange(const SiluMulArgs& a, int64_t begin, int64_t end) {
  const float* gate = static_cast<const float*>(a.gate);
  const float* up = static_cast<const float*>(a.up);
  const float* grad = static_cast<const float*>(a.grad);
  float* grad_gate = static_cast<float*>(a.out);
  float* grad_up = static_cast<float*>(a.grad_up);
  for (int64_t start = begin; start < end; start += kBlock) {
    const int64_t n = std::min(kBlock, end - start);
    float e[kBlock];
    for (int64_t i = 0; i < n; ++i) e[i] = Exp(-gate[start + i]);
    for (int64_t i = 0; i < n; ++i) {
      const float x = gate[start + i], u = up[start + i], g = grad[start + i];
      const float sigmoid = 1.0f / (1.0f + e[i]);
      grad_up[start + i] = g * (x / (1.0f + e[i]));
      grad_gate[start + i] = g * u * sigmoid * (1.0f + x * (1.0f - sigmoid));
    }
  }
}

// The same in bf16, each product rounded where autograd's bf16 operations round: silu (the table's), and
// g * up before silu_backward, whose float32 product with the derivative may round apart from ATen's
// (g * up * s) * (1 + x (1 - s)) in the last float32 place (swiglu_test holds it within one bf16 rounding).
TMX_VECTOR_INLINE void SiluMulGradBf16Range(const SiluMulArgs& a, int64_t begin, int64_t end) {
  const uint16_t* gate = static_cast<const uint16_t*>(a.gate);
  const uint16_t* up = static_cast<const uint16_t*>(a.up);
  const uint16_t* grad = static_cast<const uint16_t*>(a.grad);
  uint16_t* grad_gate = static_cast<uint16_t*>(a.out);
  uint16_t* grad_up = static_cast<uint16_t*>(a.grad_up);
  const Bf16SiluTables& t = *a.tables;
  for (int64_t start = begin; start < end; start += kBlock) {
    const int64_t n = std::min(kBlock, end - start);
    float silu[kBlock], derivative[kBlock];
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t x = gate[start + i];
      silu[i] = Widen(t.silu[x]), derivative[i] = t.derivative[x];
    }
    for (int64_t i = 0; i < n; ++i) {
      const float u = Widen(up[start + i]), g = Widen(grad[start + i]);
      const float g_silu = RoundAs<uint16_t>(g * u);
      grad_up[start + i] = Narrow<uint16_t>(g * silu[i]);
      grad_gate[start + i] = Narrow<uint16_t>(g_silu * derivative[i]);
    }
  }
}

TMX_VECTOR_CLONES void SiluMulBf16(const SiluMulArgs& a, int64_t begin, int64_t end) {
  SiluMulBf16Range(a, begin, end);
}
TMX_VECTOR_CLONES void SiluMulFloat(const SiluMulArgs& a, int64_t begin, int64_t end) {
  SiluMulFloatRange(a, begin, end);
}
TMX_VECTOR_CLONES void SiluMulGradBf16(const SiluMulArgs& a, int64_t begin, int64_t end) {
  SiluMulGradBf16Range(a, begin, end);
}
TMX_VECTOR_CLONES void SiluMulGradFloat(const SiluMulArgs& a, int64_t begin, int64_t end) {
  SiluMulGradFloatRange(a, begin, end);
}

void ForEachChunk(SiluMulArgs a, int64_t n, bool bf16, bool backward) {
  if (bf16) a.tables = &SiluTables();  // built here, before the threads, on first use
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
    const SiluMulArgs args{g.const_data_ptr(), u.const_data_ptr(), nullptr, out.mutable_data_ptr(), nullptr, nullptr};
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
                           grad_up.mutable_data_ptr(), nullptr};
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
