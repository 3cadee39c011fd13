// SwiGLU's elementwise half, silu(gate) * up, as torchtune's FeedForward computes it, as one autograd node.
#pragma once

#include <ATen/core/Tensor.h>

namespace tmx::models {

// silu(gate) * up for gate and up of one shape: silu rounded to their dtype, then the product rounded, as
// torchtune's `F.silu(w1(x)) * w3(x)` does in bf16.
//
// On the CPU (float32 or bf16, same dtype and shape) one autograd node: one pass forward and one backward (both
// gradients at once), saving gate and up only (autograd of the two operations saves silu's output too and
// takes three passes backward). Its exp is this file's own (a polynomial within about one float32 unit of
// ATen's), so its values equal SiluMulUnfused's within one rounding of the dtype where the two round apart
// (swiglu_test). A bf16 gate's silu and derivative come from tables of all 65536 bf16 values, built once per
// process with the float32 formulas (384 KiB), so the bf16 passes are lookups and products, bound by memory.
// Elsewhere SiluMulUnfused.
at::Tensor SiluMul(const at::Tensor& gate, const at::Tensor& up);

// at::silu(gate) * up, differentiated by autograd: the reference SiluMul keeps to (swiglu_test) and the form it
// replaced (swiglu_benchmark).
at::Tensor SiluMulUnfused(const at::Tensor& gate, const at::Tensor& up);

}  // namespace tmx::models
