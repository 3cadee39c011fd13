#include "matrix/numeric_check.h"

#include <cmath>
#include <map>

#include "base/stats.h"
#include "base/text.h"
#include "matrix/escape.h"
#include "matrix/tensor_check.h"
#include "harness/dtypes.h"

namespace tmx::matrix {

NumericTolerance ToleranceFor(const std::string& dtype) {
  // Chosen from the deltas measured over the cpu matrix (benchmarks/README.md, "Numeric check"): bf16 against
  // float32 from the same weights, over the 39 tiny bf16 cells, at most 0.21% on the first loss and 1.86% on the
  // gradient norm, so about 5x and 2.7x that; an attention output off by 2x moved a tiny full model's first loss
  // by 2.2%. float32 against float32 read 0.000% on both: thread scheduling alone.
  if (ReducedPrecision(dtype)) return {0.01, 0.05};
  return {0.001, 0.01};
}

PlannedCell ReferenceView(const PlannedCell& cell) {
  PlannedCell view = cell;
  view.argv = cell.reference.argv;
  view.output_dir = cell.reference.output_dir;
  view.steps = 1;
  view.proxies.clear();
  return view;
}

std::optional<double> RelativeDelta(const std::optional<double>& value, const std::optional<double>& reference) {
  if (!value || !reference || !std::isfinite(*value) || !std::isfinite(*reference) || *reference == 0) {
    return std::nullopt;
  }
  return std::fabs(*value / *reference - 1);
}

namespace {

std::string Percent(double share) { return FormatNumber(100 * share, share < 0.001 ? 3 : 2) + "%"; }

}  // namespace

ProbeFiles ProbeFilesIn(const std::string& checked_output_dir, const std::string& reference_output_dir) {
  return {checked_output_dir + "/" + kNumericProbeFile, reference_output_dir + "/" + kNumericProbeFile};
}

namespace {

// The tensors' verdict (matrix/tensor_check.h) on `r`: its numbers, and a clause for the note ("" when the
// probes were not asked for). Returns whether a tensor is outside its tolerance.
bool CheckTensors(const ProbeFiles& probes, CellResult* r, std::string* clause) {
  if (probes.checked.empty()) return false;
  StatusOr<NumericProbe> checked = ReadNumericProbe(probes.checked);
  StatusOr<NumericProbe> reference = ReadNumericProbe(probes.reference);
  if (!checked.ok() || !reference.ok()) {
    *clause = "; tensors not compared: " + (checked.ok() ? reference : checked).status().message();
    return false;
  }
  const TensorComparison c = CompareProbes(*checked, *reference);
  r->tensors_compared = static_cast<int>(c.compared);
  if (!c.worst) {
    *clause = "; tensors not compared: " + c.problem;
    return false;
  }
  r->tensor_worst = c.worst->name;
  r->tensor_error = c.worst->error;
  r->tensor_cosine = c.worst->cosine;
  r->tensor_tolerance = c.worst->tolerance;
  *clause = "; " + std::to_string(c.compared) + " tensors compared, " + (c.wrong() ? "worst " : "nearest its tolerance ") +
            c.worst->Describe();
  return c.wrong();
}

// A generation's verdict (a run without a loss whose probe holds its first token): the first token's logits against
// the reference's (CheckTensors) and its greedy tokens (CompareGreedy); either outside makes the cell `wrong`.
void AddFirstTokenCheck(const std::string& what, const std::string& dtype, const ProbeFiles& probes, CellResult* r) {
  StatusOr<NumericProbe> checked = ReadNumericProbe(probes.checked);
  StatusOr<NumericProbe> reference = ReadNumericProbe(probes.reference);
  if (!checked.ok() || !reference.ok()) {
    r->numeric_note = "not checked: " + (checked.ok() ? reference : checked).status().message();
    return;
  }
  if (checked->Find("greedy", "tokens") == nullptr) {
    r->numeric_note = "not checked: no finite first loss and no first token to compare (" + what + ")";
    return;
  }
  std::string tensors;
  const bool wrong_logits = CheckTensors(probes, r, &tensors);
  const GreedyComparison greedy = CompareGreedy(*checked, *reference);
  r->numeric_dtype = dtype;
  r->numeric_note = what + ": first token" + tensors + "; " + greedy.Describe(*checked, *reference);
  if (!wrong_logits && !greedy.wrong()) return;
  r->status = CellStatus::kWrong;
  r->reason = "its numbers disagree with the reference: " + r->numeric_note + (r->reason.empty() ? "" : "; " + r->reason);
}

}  // namespace

void AddNumericCheck(const PlannedCell& cell, const CellResult& checked, const CellResult& reference, CellResult* r,
                     const ProbeFiles& probes) {
  const ReferenceRun& ref = cell.reference;
  const bool proxied = cell.RunsProxiesInstead();
  const std::string what =
      ref.dtype + " on " + cell.device.id +
      (proxied ? " (its " + std::to_string(cell.proxies.front().layers) + "-layer proxy)" : "") +
      " against float32 on " + ref.device;
  r->numeric_loss = checked.first_loss;
  r->numeric_grad_norm = checked.first_grad_norm;
  if (reference.status != CellStatus::kRuns) {
    r->numeric_note = "not checked: the reference run (" + what + ") did not finish (" +
                      CellStatusName(reference.status) + "): " + reference.reason;
    return;
  }
  if (!checked.first_loss && !probes.checked.empty()) {  // generation: its first token
    AddFirstTokenCheck(what, ref.dtype, probes, r);
    return;
  }
  r->reference_loss = reference.first_loss;
  r->reference_grad_norm = reference.first_grad_norm;
  r->loss_delta = RelativeDelta(checked.first_loss, reference.first_loss);
  r->grad_norm_delta = RelativeDelta(checked.first_grad_norm, reference.first_grad_norm);
  if (!r->loss_delta) {
    r->numeric_note = "not checked: no finite first loss to compare (" + what + ")";
    return;
  }
  const NumericTolerance tolerance = ToleranceFor(ref.dtype);
  r->numeric_dtype = ref.dtype;
  r->loss_tolerance = tolerance.loss;
  r->grad_norm_tolerance = tolerance.grad_norm;
  std::string numbers = "first loss off by " + Percent(*r->loss_delta) + " (tolerance " + Percent(tolerance.loss) + ")";
  if (r->grad_norm_delta) {
    numbers += ", gradient norm by " + Percent(*r->grad_norm_delta) + " (" + Percent(tolerance.grad_norm) + ")";
  }
  std::string tensors;
  const bool wrong_tensor = CheckTensors(probes, r, &tensors);
  r->numeric_note = what + ": " + numbers + tensors;
  const bool wrong = wrong_tensor || *r->loss_delta > tolerance.loss ||
                     (r->grad_norm_delta && *r->grad_norm_delta > tolerance.grad_norm);
  if (!wrong) return;
  r->status = CellStatus::kWrong;
  r->reason = "its numbers disagree with the reference: " + r->numeric_note + "; loss " +
              FormatNumber(*checked.first_loss, 5) + " against " + FormatNumber(*reference.first_loss, 5) +
              (r->reason.empty() ? "" : "; " + r->reason);
}

void AddQuantizationCheck(const std::vector<QuantizedKind>& kinds, const std::string& dtype, CellResult* r) {
  if (kinds.empty()) return;
  const auto severity = [](const QuantizedKind& q) {
    return std::max(q.max_error / q.max_bound, q.relative_rms_bound > 0 ? q.relative_rms / q.relative_rms_bound : 0);
  };
  const QuantizedKind* worst = &kinds.front();
  std::vector<std::string> parts;
  int tensors = 0;
  bool wrong = false;
  for (const QuantizedKind& q : kinds) {
    if (severity(q) > severity(*worst)) worst = &q;
    tensors += static_cast<int>(q.tensors);
    wrong = wrong || q.Exceeds();
    parts.push_back(q.kind + " largest error " + FormatNumber(q.max_error, 3) + " steps (bound " +
                    FormatNumber(q.max_bound, 3) + "), relative RMS " + Percent(q.relative_rms) + " (bound " +
                    Percent(q.relative_rms_bound) + ")");
  }
  r->tensors_compared = tensors;
  r->tensor_worst = worst->kind + " weights";
  r->tensor_error = worst->max_error;
  r->tensor_tolerance = worst->max_bound;
  r->numeric_dtype = dtype;
  r->numeric_note = worst->scheme + " against the " + dtype + " originals: " + JoinStrings(parts, "; ");
  if (!wrong || r->status != CellStatus::kRuns) return;
  r->status = CellStatus::kWrong;
  r->reason = "its quantised weights are further from the originals than the scheme allows: " + r->numeric_note;
}

namespace {

void AddTensorSpread(const std::vector<const CellResult*>& rows, NumericSpread* s) {
  std::vector<double> errors;
  for (const CellResult* r : rows) {
    if (!r->tensor_error) continue;
    errors.push_back(*r->tensor_error);
    if (*r->tensor_error >= s->tensor_max) {
      s->tensor_max = *r->tensor_error;
      s->tensor_worst = r->key.config + " on " + r->key.device + ": " + r->tensor_worst;
    }
  }
  s->tensor_cells = errors.size();
  if (!errors.empty()) s->tensor_median = Median(errors);
}

}  // namespace

std::vector<NumericSpread> NumericSpreads(const std::vector<CellResult>& records) {
  std::map<std::string, std::vector<const CellResult*>> by_dtype;
  for (const CellResult& r : records) {
    if (r.loss_delta && !r.numeric_dtype.empty()) by_dtype[r.numeric_dtype].push_back(&r);
  }
  std::vector<NumericSpread> spreads;
  for (const auto& [dtype, rows] : by_dtype) {
    NumericSpread s;
    s.dtype = dtype;
    s.tolerance = ToleranceFor(dtype);
    std::vector<double> loss, grad;
    for (const CellResult* r : rows) {
      ++s.cells;
      s.wrong += r->status == CellStatus::kWrong || r->repaired_status == CellStatus::kWrong;
      loss.push_back(*r->loss_delta);
      if (r->grad_norm_delta) grad.push_back(*r->grad_norm_delta);
      if (*r->loss_delta >= s.loss_max) {
        s.loss_max = *r->loss_delta;
        s.loss_worst = r->key.config + " on " + r->key.device;
      }
      if (r->grad_norm_delta && *r->grad_norm_delta >= s.grad_norm_max) {
        s.grad_norm_max = *r->grad_norm_delta;
        s.grad_norm_worst = r->key.config + " on " + r->key.device;
      }
    }
    AddTensorSpread(rows, &s);
    s.loss_median = Median(loss);
    s.grad_norm_cells = grad.size();
    if (!grad.empty()) s.grad_norm_median = Median(grad);
    spreads.push_back(s);
  }
  return spreads;
}

void WriteNumericSpreads(const std::vector<NumericSpread>& spreads, std::ostream& out) {
  if (spreads.empty()) {
    out << "No cell has a numeric check yet: `tune-matrix run` checks every cell that trains.\n";
    return;
  }
  out << "| dtype | cells | first loss: median | largest | tolerance | gradient norm: median | largest | tolerance "
         "| wrong |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const NumericSpread& s : spreads) {
    out << "| " << MarkdownCell(s.dtype) << " | " << s.cells << " | " << Percent(s.loss_median) << " | " << Percent(s.loss_max)
        << " | " << Percent(s.tolerance.loss) << " | "
        << (s.grad_norm_cells ? Percent(s.grad_norm_median) + " | " + Percent(s.grad_norm_max) : "— | —") << " | "
        << Percent(s.tolerance.grad_norm) << " | " << s.wrong << " |\n";
  }
  for (const NumericSpread& s : spreads) {
    out << s.dtype << ": largest loss delta " << Percent(s.loss_max) << " (" << s.loss_worst << ")";
    if (s.grad_norm_cells) out << ", largest gradient norm delta " << Percent(s.grad_norm_max) << " (" << s.grad_norm_worst << ")";
    out << "\n";
    if (s.tensor_cells) {
      out << s.dtype << ": worst tensor of each of " << s.tensor_cells << " cells: median " << Percent(s.tensor_median)
          << ", largest " << Percent(s.tensor_max) << " (" << s.tensor_worst << ")\n";
    }
  }
}

}  // namespace tmx::matrix
