// The numeric check: a cell that trains also says whether its numbers are right. Its first optimizer step (the
// one whose weights every run of the config shares, from the same seed) is compared with the same step of a
// reference run: the same argv (the cell's, or its shallowest proxy's where it is proxied), in float32 on the
// reference device type of the device table (cpu), one step. The relative deltas of the step's loss and of its
// gradient norm (RunSummary::first_grad_norm) are recorded with the tolerance of the checked run's dtype; a
// cell outside it is `wrong`: it runs, but disagrees with the reference (a device kernel returning wrong numbers
// would otherwise be recorded as support).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/run_summary.h"
#include "matrix/cell.h"
#include "matrix/plan.h"

namespace tmx::matrix {

// The largest relative deltas of the first step's loss and gradient norm a checked run of `dtype` ("bf16",
// "fp16", "fp32") may show against its float32 reference. How they were chosen, from the deltas measured over
// the cpu matrix, is in benchmarks/README.md ("Numeric check").
struct NumericTolerance {
  double loss = 0;
  double grad_norm = 0;
};
NumericTolerance ToleranceFor(const std::string& dtype);

// The cell as its reference run is started and read back.
PlannedCell ReferenceView(const PlannedCell& cell);

// |value / reference - 1|; nullopt when either is unknown, not finite, or the reference is 0.
std::optional<double> RelativeDelta(const std::optional<double>& value, const std::optional<double>& reference);

// Where the two runs' numeric probes are (harness/numeric_probe.h): <output_dir>/numeric_probe.bin of the
// checked run and of the reference. Empty: the tensors are not compared.
struct ProbeFiles {
  std::string checked;
  std::string reference;
};
ProbeFiles ProbeFilesIn(const std::string& checked_output_dir, const std::string& reference_output_dir);

// Adds the numeric check to `r`, the cell's record: `checked` is the run whose first step is compared (the
// cell's own, or its shallowest proxy's), `reference` the reference run's record. Records both first steps,
// the deltas, the tolerance and a note; a delta over the tolerance makes the cell `wrong`, with the numbers in
// its reason. With `probes`, the tensors too (matrix/tensor_check.h): the worst tensor's numbers are recorded
// and named in the note, and one outside its tolerance makes the cell `wrong`, named in the reason. A reference
// that did not run (or a checked run without a loss) leaves a note and no verdict.
void AddNumericCheck(const PlannedCell& cell, const CellResult& checked, const CellResult& reference, CellResult* r,
                     const ProbeFiles& probes = {});

// A quantize cell's verdict from its own run (RunSummary::quantization, recipes/quantize.h): its dequantised
// weights against the originals, per kind of tensor, within the scheme's bounds. Records the kinds as compared
// tensors (the worst kind's largest error in steps and its bound: tensor_error, tensor_tolerance), every kind's
// numbers in the note, and makes a cell that ran `wrong` where a kind is outside.
void AddQuantizationCheck(const std::vector<QuantizedKind>& kinds, const std::string& dtype, CellResult* r);

// How far the checked runs of one dtype lay from their references, over a journal's records (newest per cell):
// what the tolerances were chosen from, and what `tune-matrix numeric` prints.
struct NumericSpread {
  std::string dtype;
  size_t cells = 0;           // records with a loss delta
  size_t grad_norm_cells = 0;  // ... and a gradient norm delta
  size_t wrong = 0;
  double loss_median = 0, loss_max = 0;
  double grad_norm_median = 0, grad_norm_max = 0;
  std::string loss_worst, grad_norm_worst;  // "config on device"
  NumericTolerance tolerance;
  // Over the records whose tensors were compared (CellResult::tensor_error, each its worst tensor's).
  size_t tensor_cells = 0;
  double tensor_median = 0, tensor_max = 0;
  std::string tensor_worst;  // "config on device: tensor"
};
std::vector<NumericSpread> NumericSpreads(const std::vector<CellResult>& records);

// The spreads as a Markdown table (deltas in percent), then the cell of each largest delta.
void WriteNumericSpreads(const std::vector<NumericSpread>& spreads, std::ostream& out);

}  // namespace tmx::matrix
