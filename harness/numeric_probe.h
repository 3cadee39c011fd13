// The numeric probe: what a training run's first step computed, sampled to a bounded size, for the numeric
// check (matrix/numeric_check.h) to compare tensor by tensor with its float32 reference run's, as PyTorch's
// OpInfo tests compare a kernel's output with a reference's. A training run writes
// <output_dir>/numeric_probe.bin when TUNE_MATRIX_NUMERIC_PROBE=1 is in its environment (tune-matrix sets it
// for the cells it checks); torch-free, so the matrix reads it without LibTorch.
//
// Kinds of tensor: "batch" (the first micro-batch's token ids), "logits" (the initial weights' for the first 64
// positions of its first row), and per trained parameter "weight" (before the first optimizer step), "gradient" (after
// the first backward) and "stepped" (after the first optimizer step). Every tensor is sampled the same way
// (ProbeSampleIndices), so two runs of one config and shapes sample the same elements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx {

inline constexpr const char* kNumericProbeFile = "numeric_probe.bin";
inline constexpr const char* kNumericProbeEnv = "TUNE_MATRIX_NUMERIC_PROBE";
// A generation's probe (recipes/generate.cc) holds the prompt ("batch"), the first token's logits ("logits") and
// this many greedy tokens from the prompt ("greedy" of kind "tokens"), each with its step's margin between the two
// largest logits ("greedy" of kind "margins"). Eight: enough for a wrong kernel to show in the tokens of a model
// whose logits it moved, few enough that a right run rarely meets a near tie in them (matrix/tensor_check.h
// CompareGreedy).
inline constexpr int64_t kGreedyProbeTokens = 8;
// The most elements one probed tensor keeps (64 KiB of float32): tiny models' tensors whole, larger ones
// by an even stride.
inline constexpr int64_t kProbeSampleElements = 16384;

struct ProbeTensor {
  std::string name;  // the parameter's name ("layers.0.attn.q_proj.weight"), or "logits", "batch"
  std::string kind;  // "batch", "logits", "weight", "gradient", "stepped"; a generation's "tokens", "margins"
  std::vector<float> values;
};

struct NumericProbe {
  std::string dtype;  // the run's dtype: "bf16", "fp16", "fp32"
  // Whether its weights are quantised (QLoRA's NF4 base, QAT's fake quantisation): a bf16 run quantises
  // bf16-rounded numbers and its float32 reference float32 ones, into buckets that differ now and then, so the
  // two differ by more than the kernels (matrix/tensor_check.h). Also set for a mixture of experts, whose
  // routing is such a discrete choice per token.
  bool quantized = false;
  std::vector<ProbeTensor> tensors;
  // The tensor of `name` and `kind`, or null.
  const ProbeTensor* Find(const std::string& name, const std::string& kind) const;
};

// The flat indices a tensor of `elements` elements is sampled at: all of them up to kProbeSampleElements,
// else that many at an even stride (i * elements / kProbeSampleElements).
std::vector<int64_t> ProbeSampleIndices(int64_t elements);

// Whether this process was asked to write a probe (TUNE_MATRIX_NUMERIC_PROBE=1).
bool NumericProbeRequested();

// Written atomically: a header line, a JSON line naming each tensor's name, kind and count, then the values
// as little-endian float32 in that order.
Status WriteNumericProbe(const std::string& path, const NumericProbe& probe);
// NotFound when there is no file; InvalidArgument naming the file when it is not a probe or is cut short.
StatusOr<NumericProbe> ReadNumericProbe(const std::string& path);

}  // namespace tmx
