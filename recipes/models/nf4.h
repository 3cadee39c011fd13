// NF4 (4-bit NormalFloat, Dettmers et al. 2023): the frozen base weights of QLoRA, stored as torchao 0.11's
// NF4Tensor stores them (torchao/dtypes/nf4tensor.py), which torchtune 0.6.1's QLoRA builders use:
//  - the weight, flattened, is cut into blocks of 64; each block is divided by its absmax and every value
//    replaced by the index of the nearest of 16 fixed levels (the levels in the weight's dtype, the first
//    minimum on a tie); two indices share a byte, the even element in the high nibble;
//  - the per-block absmaxes ("scalers") are double-quantised: their mean is subtracted, then in blocks of 256
//    each is multiplied by 256 / (2 * the block's absmax) (the "quantization factor", one per 256 scalers),
//    rounded, clamped to [-128, 127] and stored as int8;
//  - every step runs in the weight's dtype, as torchao's does, so codes and dequantised values are byte-equal
//    to torchao's (recipes/models/nf4_test.cc compares with a fixture made by scripts/make_nf4_fixtures.py).
// Plain ATen ops on any device type LibTorch has; dequantisation on cpu in one pass of its own (same bits).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx::models {

struct Nf4Tensor {
  static constexpr int64_t kBlockSize = 64;         // weights per absmax scale
  static constexpr int64_t kScalerBlockSize = 256;  // scales per quantisation factor
  // Weights a tensor's element count must be a multiple of: every scale belongs to a full block of scales.
  static constexpr int64_t kGranule = kBlockSize * kScalerBlockSize;

  std::vector<int64_t> shape;          // of the original weight
  c10::ScalarType dtype = c10::kFloat;  // of the original weight; dequantisation returns it
  at::Tensor quantized_data;           // uint8 [numel / 2]
  at::Tensor quantized_scalers;        // int8 [numel / 64]
  at::Tensor quantization_factor;      // dtype [numel / (64 * 256)]
  at::Tensor scaler_mean;              // dtype, 0-dim

  int64_t numel() const;
  // Bytes the four tensors hold.
  int64_t nbytes() const;
  // The weight, in `dtype`, on the tensors' device: torchao's get_original_weight(). On cpu (float32 or bf16)
  // DequantizeInOnePass, elsewhere DequantizeByOperations: the same bits.
  at::Tensor Dequantize() const;
  // One pass over the codes, each byte's two weights written in place (cpu, float32 or bf16, contiguous codes).
  at::Tensor DequantizeInOnePass() const;
  // ATen operations (any device): each nibble's level gathered, times its block's scale, the halves stacked.
  at::Tensor DequantizeByOperations() const;
  // Each block's scale in `dtype`: the int8 scalers over their factor, plus the mean.
  at::Tensor Scalers() const;
};

// The 16 NF4 levels, in `dtype` (torchao rounds its float literals to the weight's dtype).
at::Tensor Nf4Levels(const c10::TensorOptions& options);

// InvalidArgument naming `name`, the shape and the fix when a weight of `shape` cannot be stored as NF4 (its
// element count is not a multiple of 64 * 256 = 16384; torchao asserts the same), OK otherwise.
Status CheckNf4Shape(const std::string& name, at::IntArrayRef shape);

// torchao's to_nf4(weight) (block_size 64, scaler_block_size 256), on weight's device and in its dtype
// (a floating dtype). Quantises in chunks of 2^20 weights, as torchao does, to bound the temporaries.
// REQUIRES: CheckNf4Shape(name, weight.sizes()).ok() (checked: throws c10::Error with its message).
Nf4Tensor QuantizeNf4(const at::Tensor& weight, const std::string& name = "weight");

// torchao's linear_nf4: x W^T with W dequantised to x's dtype, W never saved whole: backward dequantises it
// again for the input's gradient (grad_out W), and W gets none. Keeps only `weight`'s quantised tensors alive.
at::Tensor LinearNf4(const at::Tensor& x, const Nf4Tensor& weight);

// Bytes NF4 keeps per weight in `dtype`: half a byte of code, an int8 scale per 64 and a factor per 16384.
double Nf4BytesPerWeight(int64_t dtype_bytes);

}  // namespace tmx::models
