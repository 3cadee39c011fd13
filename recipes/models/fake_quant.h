// Quantisation-aware training's fake quantisation: int8 dynamic per-token activations and int4 per-group
// symmetric weights, the numerics of torchao's Int8DynActInt4WeightQATQuantizer (what torchtune's QAT recipes
// and configs name). A fake-quantised tensor keeps its dtype and shape; its values are those the quantised model
// will compute with, so training learns weights that survive quantisation.
//
// Both functions equal torchao 0.11 bit for bit (recipes/models/testdata/fake_quant_torchao_0_11.safetensors, made
// by scripts/make_qat_fixtures.py), including its choices of precision:
//   - ranges, scales and zero points are formed in the input's dtype, the scales clamped below at that dtype's
//     machine epsilon (bf16: 2^-7, so a group of small bf16 weights gets a coarser grid than its range asks for),
//     then widened to float32;
//   - q = clamp(round(v * (1 / scale)) + zero_point, qmin, qmax) in float32, rounding half to even;
//   - the result (q - zero_point) * scale is rounded back to the input's dtype.
// Gradients pass straight through (torchao's mask of in-range values is all true once q is clamped).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace tmx::models {

// The int4 weight grid: [-8, 7], symmetric (zero point 0), scale = max|w| over the group / 7.5.
constexpr int64_t kInt4Min = -8;
constexpr int64_t kInt4Max = 7;
// The int8 activation grid: [-128, 127], asymmetric per token, scale = (max(x, 0) - min(x, 0)) / 255.
constexpr int64_t kInt8Min = -128;
constexpr int64_t kInt8Max = 127;

// A weight quantised to int4 per group: what the quantize recipe saves and generation computes with
// (torchao's Int8DynActInt4WeightLinear holds the same: int8 storage of the int4 codes, float32 scales; its zero
// points are all 0).
struct Int4Weight {
  at::Tensor codes;   // int8 [out, in], each in [kInt4Min, kInt4Max]
  at::Tensor scales;  // float32 [out, in / group_size]
};

// The int4 codes and scales of a weight [out, in]: each row in groups of `group_size` consecutive inputs, one
// scale a group. No gradient. REQUIRES: w.dim() == 2, group_size > 1, in % group_size == 0 (checked).
Int4Weight QuantizeInt4PerGroup(const at::Tensor& w, int64_t group_size);
// codes x scales, rounded to `dtype`. REQUIRES: a weight made by QuantizeInt4PerGroup (its shapes are checked).
at::Tensor DequantizeInt4PerGroup(const at::Tensor& codes, const at::Tensor& scales, c10::ScalarType dtype);

// Int4 per-group symmetric fake quantisation: DequantizeInt4PerGroup(QuantizeInt4PerGroup(w)) in w's dtype,
// gradients passing straight through. REQUIRES as QuantizeInt4PerGroup.
at::Tensor FakeQuantizeInt4PerGroup(const at::Tensor& w, int64_t group_size);

// Int8 dynamic per-token asymmetric fake quantisation of activations [..., in]: one scale and zero point per
// token (over the last dimension), computed from the values themselves every call. REQUIRES: x.dim() >= 1.
at::Tensor FakeQuantizeInt8PerToken(const at::Tensor& x);

// The same two by ATen's operations, on any device. The forms above take a one-pass loop on cpu for bf16 and
// float32 (unless TUNE_MATRIX_ATEN_KERNELS=1), with these bits (FakeQuantTest), and these where a group or token
// holds an infinity or a NaN.
at::Tensor FakeQuantizeInt4PerGroupByOperations(const at::Tensor& w, int64_t group_size);
at::Tensor FakeQuantizeInt8PerTokenByOperations(const at::Tensor& x);
// Whether the two take the one-pass loop for tensors of `dtype` on cpu (on_cpu) or another device. The loop
// allocates the output alone; the operations hold float32 temporaries the size of the input, which the memory
// estimate counts.
bool FakeQuantizesInOnePass(bool on_cpu, c10::ScalarType dtype);

// Whether a linear layer with `in_features` inputs can have its weight fake-quantised in groups of `group_size`
// (torchao's prepare skips, and torchtune's QAT LoRA layers refuse, those it cannot).
inline bool Int4GroupsFit(int64_t in_features, int64_t group_size) {
  return group_size > 1 && in_features % group_size == 0;
}

}  // namespace tmx::models
