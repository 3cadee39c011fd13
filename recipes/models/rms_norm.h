// RMSNorm as torchtune computes it (float32 statistics whatever the model's dtype), as one autograd node.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace tmx::models {

// torchtune's RMSNorm of x [..., dim] with `scale` [dim]: n = x_f32 * rsqrt(mean(x_f32^2) + eps), then
// n cast to x's dtype times scale, or with `plus_one` (Gemma) n * (1 + scale_f32) cast to x's dtype.
//
// On the CPU (float32 or bf16 x) one autograd node: one pass over each row forward and one backward, saving x
// and each row's 1 / rms (autograd of the formula saves float32 copies of x and runs about eight passes each
// way). Its values equal RmsNormUnfused's but for the order of each row's sum of squares (and, backward, of
// its dot product): within one rounding of bf16 where the two round apart (rms_norm_test). Elsewhere
// RmsNormUnfused. The scale's gradient, when it needs one (full fine-tuning), is taken with ATen operations.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& scale, double eps, bool plus_one);

// The residual add and the norm after it (a decoder layer's h = x + attention and mlp_norm(h)): {h, RmsNorm(h)}.
// On the CPU, where RmsNorm is one node, one node too: one pass forward writes h and y, one pass backward takes
// h's gradient as the norm's plus the one reaching h directly (the next residual add's), which x and addend both
// receive; the same bits as x + addend then RmsNorm (rms_norm_test), one pass each way fewer. Elsewhere those two.
std::pair<at::Tensor, at::Tensor> AddRmsNorm(const at::Tensor& x, const at::Tensor& addend, const at::Tensor& scale,
                                             double eps, bool plus_one);

// The formula above as ATen operations, differentiated by autograd: the reference RmsNorm keeps to
// (rms_norm_test) and the form it replaced (rms_norm_benchmark).
at::Tensor RmsNormUnfused(const at::Tensor& x, const at::Tensor& scale, double eps, bool plus_one);

}  // namespace tmx::models
