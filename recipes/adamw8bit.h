// bitsandbytes' AdamW family in C++: AdamW8bit (both Adam moments kept as uint8 codes, quantised in blocks of
// 256 with an absmax per block over bitsandbytes' dynamic maps) and the paged variants PagedAdamW8bit and
// PagedAdamW (on cuda their state lives in CUDA unified memory).
//
// The arithmetic is bitsandbytes' cpu backend (0.50.2), written with ATen operations so that it runs on every
// device type: bitsandbytes/backends/cpu/ops.py for the update (8-bit: dequantise both moments, update them in
// float32, step the weight, requantise; under `min_8bit_size` elements the moments stay float32 and take its
// 32-bit update), csrc/cpu_ops.cpp for the quantisation (absmax per block, the normalised value to the nearest
// code through a 65536-entry table). On cpu the 8-bit step runs that arithmetic in one pass per tensor instead
// (BnbAdamWOptions::fused_cpu; 15x faster, benchmarks/README.md "adamw8bit_benchmark"): the same moments, weights
// within an ulp. recipes/testdata/bitsandbytes_adamw8bit.json holds what bitsandbytes itself
// computes (scripts/make_bitsandbytes_fixtures.py); on cpu the codes and weights here are the same. bitsandbytes'
// CUDA kernel rounds differently (its own search for the nearest code, fused arithmetic), so on cuda the result
// is within float32 rounding of bitsandbytes', not bit for bit. Percentile clipping, max_unorm and skip_zeros
// are off, as in torchtune's configs.
#pragma once

#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/optim/optimizer.h>

namespace tmx::recipes {

constexpr int64_t kQuantBlockSize = 256;  // bitsandbytes' block size for its 8-bit blockwise optimizers

// bitsandbytes.functional.create_dynamic_map(signed): 256 sorted float32 codes in [-1, 1] (signed: the first
// moment's map) or [0, 1] (unsigned: the second moment's), on cpu.
at::Tensor DynamicMap(bool is_signed);

struct BlockwiseQuantized {
  at::Tensor codes;   // uint8, the shape of the input
  at::Tensor absmax;  // float32, one per block of kQuantBlockSize elements (the last may be shorter)
};
// bitsandbytes' quantize_blockwise: per block its absmax, and each value divided by it mapped to the nearest
// entry of `code` (a block of zeros has absmax 0 and codes 0). `x` is float32; `code` on any device.
BlockwiseQuantized QuantizeBlockwise(const at::Tensor& x, const at::Tensor& code);
// The inverse: code[codes] * absmax of the block, float32 in the shape of `codes`.
at::Tensor DequantizeBlockwise(const at::Tensor& codes, const at::Tensor& absmax, const at::Tensor& code);

struct BnbAdamWOptions : public torch::optim::OptimizerCloneableOptions<BnbAdamWOptions> {
  using betas_t = std::tuple<double, double>;
  BnbAdamWOptions(double lr = 1e-3) : lr_(lr) {}
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
  TORCH_ARG(double, lr) = 1e-3;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 1e-2;
  // 8: moments as uint8 codes (AdamW8bit, PagedAdamW8bit); 32: float32 moments (PagedAdamW's default).
  TORCH_ARG(int64_t, state_bits) = 8;
  // Tensors with fewer elements keep float32 moments whatever state_bits says.
  TORCH_ARG(int64_t, min_8bit_size) = 4096;
  // State in CUDA unified memory for cuda tensors of at least kPagedMinElements elements (bitsandbytes pages
  // only those; smaller ones stay in device memory). Without effect on other device types.
  TORCH_ARG(bool, paged) = false;
  // The 8-bit step dequantises, updates and requantises this many blocks at a time: its float32 temporaries
  // are those of 4096 blocks (1M elements), not of the largest tensor (an embedding's 262M). Same result.
  TORCH_ARG(int64_t, blocks_per_pass) = 4096;
  // On cpu (contiguous float32 or bf16 weights and gradients) the 8-bit step is one pass per tensor, each block
  // dequantised, stepped and requantised in a core's cache: the operations' arithmetic in their order, so the
  // same moments bit for bit and weights within an ulp (the square root). false takes the operations' path, which
  // other devices take (the tests compare the two).
  TORCH_ARG(bool, fused_cpu) = true;
};

// bitsandbytes pages a state tensor only from this size (get_state_buffer: p.numel() >= 1e5).
constexpr int64_t kPagedMinElements = 100000;

struct BnbAdamWParamState : public torch::optim::OptimizerCloneableParamState<BnbAdamWParamState> {
  bool quantized() const { return state1_.defined() && state1_.scalar_type() == c10::kByte; }
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, state1);   // first moment: uint8 codes over the signed map, or float32
  TORCH_ARG(at::Tensor, state2);   // second moment: uint8 codes over the unsigned map, or float32
  TORCH_ARG(at::Tensor, absmax1);  // float32 per block; undefined for float32 moments
  TORCH_ARG(at::Tensor, absmax2);
};

class BnbAdamW final : public torch::optim::Optimizer {
 public:
  BnbAdamW(const std::vector<at::Tensor>& params, BnbAdamWOptions options);

  at::Tensor step(LossClosure closure = nullptr) override;

  // A zeroed state for `param` as the first step would make it (8-bit or float32 by its size, in unified memory
  // when paged), for resuming into. Needs `param` to be one of this optimizer's.
  std::unique_ptr<BnbAdamWParamState> NewState(const at::Tensor& param) const;
  const BnbAdamWOptions& options() const;

  // True when `t`'s memory is CUDA unified (managed) memory; false elsewhere and in a build without CUDA.
  static bool InUnifiedMemory(const at::Tensor& t);

 private:
  at::Tensor StateBuffer(const at::Tensor& param, c10::ScalarType dtype) const;
  at::Tensor qmap1_, qmap2_;  // the signed and unsigned dynamic maps, cpu; copied to each device once
};

}  // namespace tmx::recipes
