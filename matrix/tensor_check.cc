#include "matrix/tensor_check.h"
#include "harness/dtypes.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <vector>

namespace tmx::matrix {

TensorTolerance TensorToleranceFor(const std::string& dtype, bool quantized) {
  // Measured 2026-12-07 on an AMD EPYC (avx512_bf16, torch 2.11, 2 cores): `tune run` of each tiny
  // single-device training config for one step in bf16 and in fp32 (TUNE_MATRIX_NUMERIC_PROBE=1), the probes
  // compared as here. Largest over the 31 configs without quantised weights (14 full, 15 LoRA and
  // DoRA, kd, LoRA DPO), and what a 10% fault
  // (TUNE_MATRIX_FAULT, tiny/llama3_1_{full,lora}_single_device) moved the same number at least:
  //   starting weights 0.17% (bf16's rounding: at most 2^-9 = 0.195%); DoRA's magnitudes, computed from the
  //                    weights in the run's dtype, 0.22% (0.36% with QDoRA's NF4 base)
  //   logits           0.90% (qwen3 full)         faults: attention 7.6%, norm 14.2%, mlp 4.9%
  //   gradients        2.53% (gemma full)         faults: attention 12.8%, norm 49%, mlp 10.3%, loss 10.1%
  //   update norms     1.45% (llama2 full)        fault: optimizer 10.0%
  //   cosine           logits 0.999959, gradients 0.99969 at least; updates 0.889 (Adam's first step flips
  //                    the sign of near-zero gradients), so the update's cosine only catches a garbage update.
  // The tolerances lie between: about 2 to 3.5 times the spread and half the smallest fault (kd and lora_dpo
  // included: 0.70% and 1.5% at most). Quantised weights spread further, as bf16 and float32 numbers fall into
  // different quantisation buckets: QLoRA and QDoRA (NF4 bases) to 6.9% on the logits and 14% on a gradient
  // (cosine 0.9903), QAT (int8/int4 fake quantisation) to 5.0% and 12.6% (0.9924); their tolerances are about
  // twice that, so a 10% kernel error shows there on the update only. fp16 was not measured (it rounds finer
  // than bf16, so bf16's tolerances are loose for it). float32 against float32 is the same computation, thread
  // scheduling aside.
  if (ReducedPrecision(dtype)) {
    if (quantized) return {0.01, 0.15, 0.3, 0.05, 0.97, 0.5};
    return {0.01, 0.03, 0.05, 0.05, 0.999, 0.5};
  }
  return {1e-6, 1e-4, 1e-3, 1e-3, 0.99999, 0.99};
}

namespace {

// `v` to `digits` significant digits: 0.094, 0.99998.
std::string Significant(double v, int digits) {
  std::ostringstream out;
  out << std::setprecision(digits) << v;
  return out.str();
}

}  // namespace

double TensorDelta::Severity() const {
  const double by_error = tolerance > 0 ? error / tolerance : (error > 0 ? INFINITY : 0);
  const double by_cosine = min_cosine < 1 ? (1 - cosine) / (1 - min_cosine) : 0;
  return std::isnan(by_error) ? INFINITY : std::max(by_error, by_cosine);
}

std::string TensorDelta::Describe() const {
  const std::string error_text = std::isfinite(error) ? Significant(error, 2) : "inf";
  if (!(error <= tolerance)) return name + ": relative error " + error_text + " > " + Significant(tolerance, 2);
  if (cosine < min_cosine) {
    return name + ": cosine similarity " + Significant(cosine, 5) + " < " + Significant(min_cosine, 5);
  }
  return name + ": relative error " + error_text + " (tolerance " + Significant(tolerance, 2) + "), cosine " +
         Significant(cosine, 5);
}

namespace {

// The bits after a dtype's leading one, which set the spacing of its numbers.
int MantissaBits(const std::string& dtype) {
  const DtypeInfo* d = FindDtype(dtype);
  return d != nullptr ? d->mantissa_bits : 23;
}

// The spacing of `dtype`'s numbers at x (0 at 0).
double Spacing(double x, const std::string& dtype) {
  if (x == 0) return 0;
  int exponent = 0;
  std::frexp(x, &exponent);
  return std::ldexp(1.0, exponent - 1 - MantissaBits(dtype));
}

struct Sums {
  double dot = 0, checked = 0, reference = 0, difference = 0;
  bool finite = true;
};

Sums SumsOf(const std::vector<double>& a, const std::vector<double>& b) {
  Sums s;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) s.finite = false;
    s.dot += a[i] * b[i];
    s.checked += a[i] * a[i];
    s.reference += b[i] * b[i];
    s.difference += (a[i] - b[i]) * (a[i] - b[i]);
  }
  return s;
}

double Cosine(const Sums& s) {
  if (s.checked == 0 && s.reference == 0) return 1;
  if (s.checked == 0 || s.reference == 0) return 0;
  return s.dot / std::sqrt(s.checked * s.reference);
}

// Relative error and cosine of two equally long vectors; nullopt when both are zero (nothing to compare).
std::optional<TensorDelta> Delta(const std::string& name, const std::vector<double>& a,
                                 const std::vector<double>& b, bool of_norm) {
  const Sums s = SumsOf(a, b);
  if (s.checked == 0 && s.reference == 0) return std::nullopt;
  TensorDelta d;
  d.name = name;
  d.cosine = s.finite ? std::clamp(Cosine(s), -1.0, 1.0) : 0;
  if (!s.finite || s.reference == 0) {
    d.error = std::numeric_limits<double>::infinity();
  } else {
    d.error = of_norm ? std::fabs(std::sqrt(s.checked / s.reference) - 1) : std::sqrt(s.difference / s.reference);
  }
  return d;
}

std::vector<double> Doubles(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// The first optimizer update of a parameter, over the elements `dtype` can show it at (matrix/tensor_check.h).
std::optional<TensorDelta> UpdateDelta(const std::string& name, const ProbeTensor& weight, const ProbeTensor& stepped,
                                       const ProbeTensor& ref_weight, const ProbeTensor& ref_stepped,
                                       const std::string& dtype) {
  std::vector<double> update, ref_update;
  for (size_t i = 0; i < weight.values.size(); ++i) {
    const double ref = static_cast<double>(ref_stepped.values[i]) - ref_weight.values[i];
    if (16 * Spacing(weight.values[i], dtype) > std::fabs(ref)) continue;
    update.push_back(static_cast<double>(stepped.values[i]) - weight.values[i]);
    ref_update.push_back(ref);
  }
  if (update.size() < 16) return std::nullopt;
  return Delta(name + " update", update, ref_update, /*of_norm=*/true);
}

bool SameLength(const ProbeTensor* a, const ProbeTensor* b) {
  return a != nullptr && b != nullptr && a->values.size() == b->values.size();
}

// Every tensor of `checked` with a counterpart in `reference`, as deltas with their tolerances.
std::vector<TensorDelta> Deltas(const NumericProbe& checked, const NumericProbe& reference) {
  const TensorTolerance tol = TensorToleranceFor(checked.dtype, checked.quantized || reference.quantized);
  std::vector<TensorDelta> out;
  auto add = [&](std::optional<TensorDelta> d, double tolerance, double min_cosine) {
    if (!d) return;
    d->tolerance = tolerance;
    d->min_cosine = min_cosine;
    out.push_back(std::move(*d));
  };
  for (const ProbeTensor& t : checked.tensors) {
    const ProbeTensor* ref = reference.Find(t.name, t.kind);
    if (!SameLength(&t, ref)) continue;
    if (t.kind == "logits") add(Delta("logits", Doubles(t.values), Doubles(ref->values), false), tol.logits, tol.min_cosine);
    if (t.kind == "gradient") {
      add(Delta(t.name + " gradient", Doubles(t.values), Doubles(ref->values), false), tol.gradient, tol.min_cosine);
    }
    if (t.kind == "weight") add(Delta(t.name + " starting weight", Doubles(t.values), Doubles(ref->values), false), tol.weight, -1);
    if (t.kind != "stepped") continue;
    const ProbeTensor* weight = checked.Find(t.name, "weight");
    const ProbeTensor* ref_weight = reference.Find(t.name, "weight");
    if (!SameLength(&t, weight) || !SameLength(&t, ref_weight)) continue;
    add(UpdateDelta(t.name, *weight, t, *ref_weight, *ref, checked.dtype), tol.update_norm, tol.update_min_cosine);
  }
  return out;
}

}  // namespace

TensorComparison CompareProbes(const NumericProbe& checked, const NumericProbe& reference) {
  TensorComparison c;
  const ProbeTensor* batch = checked.Find("batch", "batch");
  const ProbeTensor* ref_batch = reference.Find("batch", "batch");
  if (batch == nullptr || ref_batch == nullptr || batch->values != ref_batch->values) {
    c.problem = batch == nullptr || ref_batch == nullptr
                    ? "a probe without its batch"
                    : "the two runs' first batches differ (they must train on the same tokens)";
    return c;
  }
  for (TensorDelta& d : Deltas(checked, reference)) {
    ++c.compared;
    if (!c.worst || d.Severity() > c.worst->Severity()) c.worst = std::move(d);
  }
  if (c.compared == 0) c.problem = "no tensor of the probe has a counterpart in the reference's";
  return c;
}

GreedyComparison CompareGreedy(const NumericProbe& checked, const NumericProbe& reference) {
  GreedyComparison g;
  const ProbeTensor* tokens = checked.Find("greedy", "tokens");
  const ProbeTensor* ref_tokens = reference.Find("greedy", "tokens");
  const ProbeTensor* margins = checked.Find("greedy", "margins");
  const ProbeTensor* ref_margins = reference.Find("greedy", "margins");
  const ProbeTensor* ref_logits = reference.Find("logits", "logits");
  if (tokens == nullptr || ref_tokens == nullptr || !SameLength(tokens, margins) || !SameLength(ref_tokens, ref_margins) ||
      ref_logits == nullptr || ref_logits->values.empty()) {
    g.problem = "a probe without its greedy tokens, margins or logits";
    return g;
  }
  double squares = 0;
  for (float v : ref_logits->values) squares += static_cast<double>(v) * v;
  const double rms = std::sqrt(squares / static_cast<double>(ref_logits->values.size()));
  g.near_tie_margin = 2 * TensorToleranceFor(checked.dtype, checked.quantized || reference.quantized).logits * rms;
  g.tokens = std::min(tokens->values.size(), ref_tokens->values.size());
  while (g.agreed < g.tokens && tokens->values[g.agreed] == ref_tokens->values[g.agreed]) ++g.agreed;
  if (g.agreed == g.tokens) return g;
  g.margin = std::min(margins->values[g.agreed], ref_margins->values[g.agreed]);
  g.near_tie = g.margin <= g.near_tie_margin;
  return g;
}

std::string GreedyComparison::Describe(const NumericProbe& checked, const NumericProbe& reference) const {
  if (!problem.empty()) return "greedy tokens not compared: " + problem;
  const std::string of = std::to_string(tokens);
  if (agreed == tokens) return "greedy tokens equal for all " + of;
  const std::string margins = "top-2 margin " + Significant(margin, 2) + (near_tie ? " <= " : " > ") +
                              Significant(near_tie_margin, 2);
  if (near_tie) {
    return "greedy tokens equal for the first " + std::to_string(agreed) + " of " + of + ", then a near tie (" +
           margins + "; the rest not compared)";
  }
  const auto token = [&](const NumericProbe& p) {
    return std::to_string(static_cast<int64_t>(p.Find("greedy", "tokens")->values[agreed]));
  };
  return "greedy token " + std::to_string(agreed + 1) + " of " + of + " is " + token(checked) + " against the " +
         "reference's " + token(reference) + " (" + margins + ")";
}

}  // namespace tmx::matrix
