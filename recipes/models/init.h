// Random initial weights, fast enough for billions of parameters (a model initialised from its seed stands in
// for a checkpoint the machine lacks, so its start-up is part of every such matrix cell).
//
// Tensors of at least kFastInitElements elements on the CPU come from a counter-based generator: one 64-bit key
// drawn from torch's default CPU generator (so torch::manual_seed still decides every value, and the tensors
// drawn before and after move the generator the same way whatever their sizes), then element i from a hash of
// (key, i). The values do not depend on the thread count; chunks run in parallel. torch's own CPU generator is a
// sequential Mersenne Twister whose uniform_ draws one element at a time: for a 1.5B-parameter model it was 85%
// of a cell's start-up. Smaller tensors use torch's CPU uniform_/normal_ themselves, so small models and LoRA
// adapters keep torch's values. Either way a value is drawn as float32 on the CPU and converted: the weights of
// a seed are the same, up to rounding, in every dtype and on every device (on another device the tensor is
// filled by copies from the CPU), so a run and its float32 cpu reference (matrix/numeric_check.h) start from
// the same model. Meta tensors are left alone, as torch leaves them.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace tmx::models {

inline constexpr int64_t kFastInitElements = int64_t{1} << 20;

// U(low, high), as tensor.uniform_(low, high).
void UniformInit(at::Tensor& t, double low, double high);

// N(mean, std^2), as tensor.normal_(mean, std).
void NormalInit(at::Tensor& t, double mean, double std);

}  // namespace tmx::models
