// The tensors of the numeric check (matrix/numeric_check.h): a checked run's numeric probe (harness/
// numeric_probe.h) against its float32 reference run's, tensor by tensor, as PyTorch's OpInfo tests compare a
// kernel's output with a reference's. The first loss and gradient norm alone miss a wrong kernel: from random
// weights, attention's output scaled by 1.1 on the bf16 path of tiny/llama3_1_full_single_device moved them
// 0.39% and 2.42%, inside their tolerances, while its logits moved 7.6% and a gradient 12.8% (this check).
//
// Compared, when both runs started from the same batch (the token ids, exactly):
//   - the starting weights (each trained parameter's, within its dtype's rounding: the same weights),
//   - the logits of the first micro-batch and each trained parameter's gradient after the first backward, by
//     relative error (|checked - reference| / |reference|, Euclidean norms) and cosine similarity,
//   - each parameter's first optimizer update (stepped - weight), by the relative error of its norm and its
//     cosine, over the elements whose update is at least 16 of the checked dtype's spacings at that weight (in
//     bf16 a smaller update rounds away, and Adam's first step flips the sign of near-zero gradients, so the
//     elementwise error of an update is large even for right kernels; its norm is not).
// A tensor outside its tolerance makes the cell `wrong`, naming the tensor.
#pragma once

#include <optional>
#include <string>

#include "harness/numeric_probe.h"

namespace tmx::matrix {

// What a checked run of `dtype` ("bf16", "fp16", "fp32") may differ from its float32 reference, per tensor;
// `quantized`: its base weights are quantised (NumericProbe::quantized), which moves logits and gradients more.
// Derived from the spreads measured over the tiny configs (TensorToleranceFor's comment, benchmarks/README.md,
// "Numeric check").
struct TensorTolerance {
  double weight = 0;             // starting weights: relative error (the dtype's rounding)
  double logits = 0;             // relative error
  double gradient = 0;           // relative error
  double update_norm = 0;        // relative error of the update's norm
  double min_cosine = 0;         // logits and gradients
  double update_min_cosine = 0;  // updates
};
TensorTolerance TensorToleranceFor(const std::string& dtype, bool quantized = false);

// One compared tensor.
struct TensorDelta {
  std::string name;  // "logits", "layers.0.attn.q_proj.lora_a.weight gradient", "... update", "... starting weight"
  double error = 0;  // the relative error (+inf for a non-finite value, or a nonzero tensor against zero)
  double cosine = 1;
  double tolerance = 0;
  double min_cosine = -1;
  bool Exceeds() const { return !(error <= tolerance) || cosine < min_cosine; }
  // How near its limits it is: the larger of error / tolerance and (1 - cosine) / (1 - min_cosine); over 1
  // when it exceeds them.
  double Severity() const;
  // "layers.0.attn.q_proj.lora_a.weight gradient: relative error 0.094 > 0.05", or within its tolerances
  // "logits: relative error 0.0071 (tolerance 0.03), cosine 0.99998".
  std::string Describe() const;
};

struct TensorComparison {
  size_t compared = 0;
  std::optional<TensorDelta> worst;  // the tensor of the largest Severity
  std::string problem;               // why nothing was compared ("" when tensors were)
  bool wrong() const { return worst && worst->Exceeds(); }
};

// `checked` (its dtype's tolerances) against `reference`.
TensorComparison CompareProbes(const NumericProbe& checked, const NumericProbe& reference);

// A generation's greedy tokens (harness/numeric_probe.h kGreedyProbeTokens) against its reference's. Equal tokens
// agree; the first that differs is wrong unless the step was a near tie: the margin between its two largest logits
// (either run's) within twice the error the logits' tolerance allows per element (2 x tolerance x the RMS of the
// reference's first-token logits), where a right kernel's rounding may swap the two. After such a token the runs
// continue from different sequences and the rest is not compared: an honest "equal for the first N".
struct GreedyComparison {
  size_t tokens = 0;   // greedy tokens in both probes (compared up to the first difference)
  size_t agreed = 0;   // leading tokens equal
  bool near_tie = false;  // the first difference came at a near tie (not wrong)
  double margin = 0;      // the smaller top-2 margin at the first difference
  double near_tie_margin = 0;
  std::string problem;  // why nothing was compared ("" when tokens were)
  bool wrong() const { return problem.empty() && agreed < tokens && !near_tie; }
  // "greedy tokens equal for all 8", "greedy tokens equal for the first 3 of 8, then a near tie (top-2 margin
  // 0.0012 <= 0.0031)", "greedy token 4 of 8 is 17 against the reference's 9 (top-2 margin 0.41 > 0.0031)".
  std::string Describe(const NumericProbe& checked, const NumericProbe& reference) const;
};
GreedyComparison CompareGreedy(const NumericProbe& checked, const NumericProbe& reference);

}  // namespace tmx::matrix
