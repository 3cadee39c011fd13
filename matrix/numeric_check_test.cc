// The numeric check: deltas and verdicts, and the scheduler running a cell's float32 reference after it
// (against the fake runner).
#include "matrix/numeric_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "base/file_util.h"
#include "harness/numeric_probe.h"
#include "harness/run_summary.h"
#include "matrix/journal.h"
#include "matrix/scheduler.h"
#include "matrix/testdata/fake_runner.h"
#include "matrix/testdata/planned_cell.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

PlannedCell CheckedCell(const std::string& dir) {
  PlannedCell c = RunnableCpuCell("tiny/lora_single_device", "lora_finetune_single_device", dir);
  c.argv = {"tune", "run", "lora_finetune_single_device", "--config", c.key.config, "device=cpu"};
  c.reference.argv = {"tune", "run", "lora_finetune_single_device", "--config", c.key.config, "device=cpu",
                      "dtype=fp32"};
  c.reference.output_dir = c.output_dir + "__reference";
  c.reference.dtype = "bf16";
  c.reference.device = "cpu";
  return c;
}

CellResult Ran(double loss, std::optional<double> grad_norm) {
  CellResult r;
  r.status = CellStatus::kRuns;
  r.first_loss = loss;
  r.first_grad_norm = grad_norm;
  return r;
}

TEST(NumericCheckTest, RelativeDeltas) {
  EXPECT_NEAR(*RelativeDelta(10.1, 10.0), 0.01, 1e-12);
  EXPECT_NEAR(*RelativeDelta(9.9, 10.0), 0.01, 1e-12);  // either side
  EXPECT_FALSE(RelativeDelta(1.0, 0.0));
  EXPECT_FALSE(RelativeDelta(std::nullopt, 1.0));
  EXPECT_FALSE(RelativeDelta(std::numeric_limits<double>::quiet_NaN(), 1.0));
  // Reduced precision gets a wider tolerance than float32 against float32.
  EXPECT_GT(ToleranceFor("bf16").loss, ToleranceFor("fp32").loss);
  EXPECT_GT(ToleranceFor("bf16").grad_norm, ToleranceFor("fp32").grad_norm);
}

TEST(NumericCheckTest, WithinToleranceRecordsTheDeltasOutsideIsWrong) {
  PlannedCell cell = CheckedCell("/tmp");
  const NumericTolerance tolerance = ToleranceFor("bf16");
  CellResult r = Ran(10.01, 2.02);
  AddNumericCheck(cell, Ran(10.01, 2.02), Ran(10.0, 2.0), &r);
  EXPECT_EQ(r.status, CellStatus::kRuns);
  EXPECT_NEAR(*r.loss_delta, 0.001, 1e-9);
  EXPECT_NEAR(*r.grad_norm_delta, 0.01, 1e-9);
  EXPECT_EQ(*r.loss_tolerance, tolerance.loss);
  EXPECT_EQ(*r.reference_loss, 10.0);
  EXPECT_EQ(r.numeric_note.rfind("bf16 on cpu against float32 on cpu: first loss off by 0.1", 0), 0u)
      << r.numeric_note;

  // A gradient norm 1.5 times the reference's: the loss agrees, the cell is still wrong.
  CellResult w = Ran(10.0, 3.0);
  AddNumericCheck(cell, Ran(10.0, 3.0), Ran(10.0, 2.0), &w);
  EXPECT_EQ(w.status, CellStatus::kWrong);
  EXPECT_NEAR(*w.grad_norm_delta, 0.5, 1e-12);
  EXPECT_NE(w.reason.find("its numbers disagree with the reference: bf16 on cpu against float32 on cpu"),
            std::string::npos)
      << w.reason;

  // No gradient norm (a step inside backward): the loss alone decides.
  CellResult l = Ran(10.0, std::nullopt);
  AddNumericCheck(cell, Ran(10.0, std::nullopt), Ran(12.0, std::nullopt), &l);
  EXPECT_EQ(l.status, CellStatus::kWrong);
  EXPECT_FALSE(l.grad_norm_delta);
}

TEST(NumericCheckTest, AReferenceThatDidNotRunGivesNoVerdict) {
  PlannedCell cell = CheckedCell("/tmp");
  CellResult failed;
  failed.status = CellStatus::kTooLarge;
  failed.reason = "resident memory passed the limit";
  CellResult r = Ran(10.0, 2.0);
  AddNumericCheck(cell, Ran(10.0, 2.0), failed, &r);
  EXPECT_EQ(r.status, CellStatus::kRuns);
  EXPECT_FALSE(r.loss_delta);
  EXPECT_EQ(r.numeric_note, "not checked: the reference run (bf16 on cpu against float32 on cpu) did not finish "
                            "(too_large): resident memory passed the limit");
}

// The scheduler runs the reference after the cell, and records one cell with the check: `wrong` when the
// cell's first step is off.
TEST(NumericCheckTest, TheSchedulerRunsTheReferenceAfterTheCell) {
  for (double cell_norm : {2.01, 5.0}) {
    SCOPED_TRACE(cell_norm);
    test::ScratchDir scratch("numeric_check_test");
    MatrixOptions options;
    options.journal_path = scratch.path() + "/journal.jsonl";
    PlannedCell cell = CheckedCell(scratch.path());
    FakeRunner runner;
    std::vector<std::vector<std::string>> argvs;
    runner.on_start = [&](const CellCommand& cmd) {
      argvs.push_back(cmd.argv);
      const bool reference = cmd.log_path.find("__reference") != std::string::npos;
      runner.outcomes[cell.key.config].wall_time_s = reference ? 7.0 : 3.0;
      RunSummary s;
      s.ok = true;
      s.step_times_s = reference ? std::vector<double>{1} : std::vector<double>{1, 1, 1};
      s.step_tokens = std::vector<int64_t>(s.step_times_s.size(), 100);
      s.losses = reference ? std::vector<double>{10.0} : std::vector<double>{10.002, 9.9, 9.8};
      s.first_grad_norm = reference ? 2.0 : cell_norm;
      s.Finish();
      ASSERT_TRUE(WriteRunSummary(reference ? cell.reference.output_dir : cell.output_dir, s).ok());
    };
    runner.outcomes[cell.key.config].exit_code = 0;
    std::ostringstream progress;
    StatusOr<MatrixRun> run = RunCells({cell}, {}, runner, options, Provenance{}, progress, [] {
      return std::string("2026-12-01T05:00:00Z");
    });
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ASSERT_EQ(argvs.size(), 2u);
    EXPECT_EQ(argvs[1], cell.reference.argv);
    ASSERT_EQ(run->recorded.size(), 1u);
    StatusOr<std::vector<CellResult>> journal = ReadJournal(options.journal_path, nullptr);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    ASSERT_EQ(journal->size(), 1u);
    const CellResult& r = (*journal)[0];
    EXPECT_EQ(r.status, cell_norm == 5.0 ? CellStatus::kWrong : CellStatus::kRuns);
    EXPECT_NEAR(*r.loss_delta, 0.0002, 1e-9);
    EXPECT_NEAR(*r.grad_norm_delta, cell_norm / 2 - 1, 1e-9);
    EXPECT_EQ(*r.numeric_grad_norm, cell_norm);
    EXPECT_EQ(*r.reference_grad_norm, 2.0);
    EXPECT_EQ(r.wall_time_s, 3.0);  // the cell's own run
    ASSERT_TRUE(r.reference_time_s.has_value());
    EXPECT_EQ(*r.reference_time_s, 7.0);
    EXPECT_NE(progress.str().find("numbers: loss 0.02% off float32"), std::string::npos) << progress.str();
  }
}

// The journal of RunCells over `cell` alone, its children started by `runner`.
std::vector<CellResult> RunAndReadBack(const PlannedCell& cell, FakeRunner& runner, const std::string& journal) {
  MatrixOptions options;
  options.journal_path = journal;
  runner.outcomes[cell.key.config].exit_code = 0;
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells({cell}, {}, runner, options, Provenance{}, progress, [] {
    return std::string("2026-12-01T05:00:00Z");
  });
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  StatusOr<std::vector<CellResult>> read = ReadJournal(journal, nullptr);
  EXPECT_TRUE(read.ok()) << read.status().ToString();
  return read.ok() ? *read : std::vector<CellResult>{};
}

// What a run started by `cmd` (the cell's, or its reference's in `reference_dir`) leaves: a summary of one step
// (loss 10, gradient norm 2), and a probe whose gradient is the reference's times `scale`.
void WriteRunWithProbe(const CellCommand& cmd, const PlannedCell& cell, float scale) {
  const bool reference = cmd.log_path.find("__reference") != std::string::npos;
  const std::string dir = reference ? cell.reference.output_dir : cell.output_dir;
  const std::pair<std::string, std::string> asked(kNumericProbeEnv, "1");
  EXPECT_NE(std::find(cmd.env.begin(), cmd.env.end(), asked), cmd.env.end());
  RunSummary s;
  s.ok = true;
  s.step_times_s = {1};
  s.step_tokens = {100};
  s.losses = {10.0};
  s.first_grad_norm = 2.0;
  s.Finish();
  ASSERT_TRUE(WriteRunSummary(dir, s).ok());
  const float g = reference ? 1.0f : scale;
  NumericProbe probe{reference ? "fp32" : "bf16", false,
                     {{"batch", "batch", {1, 2}}, {"logits", "logits", {0.5f, -0.25f}},
                      {"layers.0.w", "gradient", {g, -2 * g, 0.5f * g}}}};
  ASSERT_TRUE(WriteNumericProbe(dir + "/" + kNumericProbeFile, probe).ok());
}

// Both runs write their numeric probes, asked for in their environment; the cell's gradient off by 10% (with
// its loss and gradient norm as the reference's) makes it `wrong`, naming the tensor, and the record keeps it.
TEST(NumericCheckTest, TheSchedulerComparesTheTwoRunsTensors) {
  for (float scale : {1.0f, 1.1f}) {
    SCOPED_TRACE(scale);
    test::ScratchDir scratch("numeric_check_test");
    const PlannedCell cell = CheckedCell(scratch.path());
    FakeRunner runner;
    runner.on_start = [&](const CellCommand& cmd) { WriteRunWithProbe(cmd, cell, scale); };
    const std::vector<CellResult> journal = RunAndReadBack(cell, runner, scratch.path() + "/journal.jsonl");
    ASSERT_EQ(journal.size(), 1u);
    const CellResult& r = journal[0];
    EXPECT_EQ(*r.loss_delta, 0);
    EXPECT_EQ(r.tensors_compared, 2);  // the logits and the gradient
    if (scale == 1.0f) {
      EXPECT_EQ(r.status, CellStatus::kRuns);
      EXPECT_EQ(*r.tensor_error, 0);
      EXPECT_NE(r.numeric_note.find("; 2 tensors compared, nearest its tolerance "), std::string::npos) << r.numeric_note;
      continue;
    }
    EXPECT_EQ(r.status, CellStatus::kWrong);
    EXPECT_EQ(r.tensor_worst, "layers.0.w gradient");
    EXPECT_EQ(*r.tensor_tolerance, 0.05);
    EXPECT_NEAR(*r.tensor_error, 0.1, 1e-6);
    EXPECT_NE(r.reason.find("2 tensors compared, worst layers.0.w gradient: relative error 0.1 > 0.05"),
              std::string::npos)
        << r.reason;
  }
}

TEST(NumericCheckTest, WithoutProbesTheTensorsAreNotCompared) {
  test::ScratchDir scratch("numeric_check_test");
  PlannedCell cell = CheckedCell(scratch.path());
  CellResult r = Ran(10.0, 2.0);
  AddNumericCheck(cell, Ran(10.0, 2.0), Ran(10.0, 2.0), &r, ProbeFilesIn(cell.output_dir, cell.reference.output_dir));
  EXPECT_EQ(r.status, CellStatus::kRuns);
  EXPECT_FALSE(r.tensors_compared);
  EXPECT_NE(r.numeric_note.find("; tensors not compared: " + cell.output_dir + "/numeric_probe.bin: no numeric probe"),
            std::string::npos)
      << r.numeric_note;
}

// A generation (no loss): its first token's logits and greedy tokens against the reference's, right and perturbed.
TEST(NumericCheckTest, AGenerationIsCheckedByItsFirstTokenAndGreedyTokens) {
  test::ScratchDir scratch("numeric_check_test");
  PlannedCell cell = CheckedCell(scratch.path());
  auto write = [&](const std::string& dir, const std::string& dtype, float logit_scale, float token) {
    ASSERT_TRUE(MakeDirs(dir).ok());
    NumericProbe probe{dtype, false,
                       {{"batch", "batch", {1, 2}},
                        {"logits", "logits", {logit_scale * 3, -1, 0.5f, -2}},
                        {"greedy", "tokens", {0, token, 4}},
                        {"greedy", "margins", {3.5f, 1, 1}}}};
    ASSERT_TRUE(WriteNumericProbe(dir + "/" + kNumericProbeFile, probe).ok());
  };
  CellResult generated;
  generated.status = CellStatus::kRuns;
  const ProbeFiles probes = ProbeFilesIn(cell.output_dir, cell.reference.output_dir);
  write(cell.reference.output_dir, "fp32", 1, 7);
  write(cell.output_dir, "bf16", 1.005f, 7);
  CellResult right = generated;
  AddNumericCheck(cell, generated, generated, &right, probes);
  EXPECT_EQ(right.status, CellStatus::kRuns) << right.reason;
  EXPECT_EQ(right.tensors_compared, 1);
  EXPECT_EQ(right.tensor_worst, "logits");
  EXPECT_EQ(right.numeric_dtype, "bf16");
  EXPECT_NE(right.numeric_note.find("greedy tokens equal for all 3"), std::string::npos) << right.numeric_note;
  write(cell.output_dir, "bf16", 1.2f, 7);  // the logits perturbed: a kernel off by 20% on the top logit
  CellResult logits = generated;
  AddNumericCheck(cell, generated, generated, &logits, probes);
  EXPECT_EQ(logits.status, CellStatus::kWrong);
  EXPECT_NE(logits.reason.find("worst logits: relative error"), std::string::npos) << logits.reason;
  write(cell.output_dir, "bf16", 1, 8);  // the same logits, a greedy token that no near tie explains
  CellResult tokens = generated;
  AddNumericCheck(cell, generated, generated, &tokens, probes);
  EXPECT_EQ(tokens.status, CellStatus::kWrong);
  EXPECT_NE(tokens.reason.find("greedy token 2 of 3 is 8 against the reference's 7"), std::string::npos) << tokens.reason;
}

// A quantize cell's own verdict: its kinds within their bounds run, one outside is wrong, named with its numbers.
TEST(NumericCheckTest, AQuantizeCellIsCheckedByItsDequantisedWeights) {
  const std::vector<QuantizedKind> right = {{"q_proj", "int4 per group of 256", 2, 0.5, 0.516, 0.08, 0.12},
                                            {"w1", "int4 per group of 256", 2, 0.49, 0.516, 0.09, 0.12}};
  CellResult r;
  r.status = CellStatus::kRuns;
  AddQuantizationCheck(right, "bf16", &r);
  EXPECT_EQ(r.status, CellStatus::kRuns);
  EXPECT_EQ(r.tensors_compared, 4);
  EXPECT_EQ(r.tensor_worst, "q_proj weights");  // 0.5 steps of 0.516 is the nearest any number comes to its bound
  EXPECT_EQ(r.tensor_error, 0.5);
  EXPECT_EQ(r.numeric_note, "int4 per group of 256 against the bf16 originals: q_proj largest error 0.500 steps (bound "
                            "0.516), relative RMS 8.00% (bound 12.00%); w1 largest error 0.490 steps (bound 0.516), "
                            "relative RMS 9.00% (bound 12.00%)");
  std::vector<QuantizedKind> perturbed = right;
  perturbed[0].max_error = 0.74;  // scales 3% off
  CellResult wrong;
  wrong.status = CellStatus::kRuns;
  AddQuantizationCheck(perturbed, "bf16", &wrong);
  EXPECT_EQ(wrong.status, CellStatus::kWrong);
  EXPECT_EQ(wrong.tensor_worst, "q_proj weights");
  EXPECT_EQ(wrong.tensor_error, 0.74);
  EXPECT_NE(wrong.reason.find("further from the originals than the scheme allows: "), std::string::npos) << wrong.reason;
  CellResult none;
  AddQuantizationCheck({}, "bf16", &none);
  EXPECT_TRUE(none.numeric_note.empty());
}

TEST(NumericCheckTest, SpreadsPerDtype) {
  auto checked = [](const std::string& config, const std::string& dtype, double loss, std::optional<double> grad,
                    CellStatus status) {
    CellResult r;
    r.key = {config, "cpu"};
    r.status = status;
    r.numeric_dtype = dtype;
    r.loss_delta = loss;
    r.grad_norm_delta = grad;
    return r;
  };
  std::vector<NumericSpread> spreads =
      NumericSpreads({checked("a", "bf16", 0.001, 0.01, CellStatus::kRuns),
                      checked("b", "bf16", 0.003, 0.02, CellStatus::kRuns),
                      checked("c", "bf16", 0.002, std::nullopt, CellStatus::kRuns),
                      checked("d", "bf16", 0.5, 0.9, CellStatus::kWrong), checked("e", "fp32", 0, 0, CellStatus::kRuns),
                      CellResult{}});  // no check: left out
  ASSERT_EQ(spreads.size(), 2u);
  const NumericSpread& bf16 = spreads[0];
  EXPECT_EQ(bf16.dtype, "bf16");
  EXPECT_EQ(bf16.cells, 4u);
  EXPECT_EQ(bf16.grad_norm_cells, 3u);
  EXPECT_EQ(bf16.wrong, 1u);
  EXPECT_DOUBLE_EQ(bf16.loss_median, 0.0025);
  EXPECT_DOUBLE_EQ(bf16.loss_max, 0.5);
  EXPECT_EQ(bf16.loss_worst, "d on cpu");
  EXPECT_DOUBLE_EQ(bf16.grad_norm_median, 0.02);
  EXPECT_EQ(spreads[1].dtype, "fp32");
  std::ostringstream out;
  WriteNumericSpreads(spreads, out);
  EXPECT_NE(out.str().find("| bf16 | 4 | 0.25% | 50.00% | 1.00% | 2.00% | 90.00% | 5.00% | 1 |"), std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("worst tensor"), std::string::npos) << "records without tensors: no line";

  // Records with tensors compared: their worst tensors' spread.
  std::vector<CellResult> with_tensors = {checked("a", "bf16", 0.001, 0.01, CellStatus::kRuns),
                                          checked("b", "bf16", 0.001, 0.01, CellStatus::kRuns),
                                          checked("c", "bf16", 0.001, 0.01, CellStatus::kWrong)};
  const double errors[] = {0.01, 0.02, 0.09};
  for (size_t i = 0; i < 3; ++i) {
    with_tensors[i].tensor_error = errors[i];
    with_tensors[i].tensor_worst = "layers.0.w gradient";
  }
  std::ostringstream tensors;
  WriteNumericSpreads(NumericSpreads(with_tensors), tensors);
  EXPECT_NE(tensors.str().find("bf16: worst tensor of each of 3 cells: median 2.00%, largest 9.00% (c on cpu: "
                               "layers.0.w gradient)"),
            std::string::npos)
      << tensors.str();
}

}  // namespace
}  // namespace tmx::matrix
