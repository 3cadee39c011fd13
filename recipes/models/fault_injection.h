// Deliberately wrong kernels, for tests of the numeric check only (matrix/numeric_check.h): with
// TUNE_MATRIX_FAULT=<kernel>=<factor> in a run's environment, that kernel's output is scaled by the factor on
// every path but the reference one (float32 on cpu), as a broken reduced-precision or device kernel would, so
// the run's float32 reference stays right. Kernels: attention (SDPA's output), norm (every RMS norm's output),
// mlp (SwiGLU's silu(gate) * up), loss (the next-token cross entropy) and optimizer (each parameter's first
// and later optimizer updates). No config key reaches it; unset, malformed or a factor of 1, every call is one
// comparison of a value read once.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace tmx::models {

enum class FaultKernel { kAttention, kNorm, kMlp, kLoss, kOptimizer };

inline constexpr const char* kFaultEnv = "TUNE_MATRIX_FAULT";

// The factor TUNE_MATRIX_FAULT sets for `kernel`; 1 when it names another, is unset or malformed.
double FaultScale(FaultKernel kernel);

// Whether a tensor of `x`'s dtype and device is on the reference path (float32 on cpu), which no fault touches.
bool OnReferencePath(const at::Tensor& x);

// `x` scaled by `kernel`'s factor off the reference path; `x` itself otherwise.
at::Tensor InjectFault(FaultKernel kernel, const at::Tensor& x);

}  // namespace tmx::models

namespace tmx::models {

// The optimizer fault, around a step of `params`: OptimizerFaultBefore copies the parameters off the
// reference path when TUNE_MATRIX_FAULT names the optimizer (none otherwise), and OptimizerFaultAfter scales
// each one's update (after - before) by the factor.
std::vector<at::Tensor> OptimizerFaultBefore(const std::vector<at::Tensor>& params);
void OptimizerFaultAfter(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& before);

}  // namespace tmx::models
