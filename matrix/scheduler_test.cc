// The scheduler against a fake runner: no processes, no GPU (ninja's build_test habit).
#include "matrix/scheduler.h"


#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "harness/run_summary.h"
#include "matrix/journal.h"
#include "matrix/merge.h"
#include "matrix/shard.h"
#include "matrix/testdata/checkout.h"
#include "matrix/testdata/fake_runner.h"
#include "matrix/testdata/planned_cell.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.journal_path = dir_ + "/journal.jsonl";
    options_.max_steps = 3;
    options_.cpu_class = "amx";  // the class a run on the checkout's AMX machine records its cpu cells with
  }

  PlannedCell Cell(const std::string& config, const std::string& device, bool runnable = true) {
    PlannedCell c;
    c.key = {config, device};
    c.recipe = "lora_finetune_single_device";
    c.device.id = device;
    c.device.type = device == "cpu" ? "cpu" : "cuda";
    c.device_type = device == "cpu" ? "cpu" : "cuda";
    c.runnable = runnable;
    c.steps = 4;  // the plan's choice for the cell (options_.max_steps is 3)
    c.output_dir = dir_ + "/" + config + "_" + device;
    c.argv = {"tune", "run"};
    c.preset.key = c.key;
    c.preset.device_type = c.device_type;
    if (!runnable) {
      c.preset.status = CellStatus::kTooLarge;
      c.preset.reason = "predicted 30 GiB";
    }
    return c;
  }

  // Writes the cell's run summary as a recipe does (statistics computed by RunSummary::Finish).
  void WriteSummary(const PlannedCell& c, RunSummary summary) {
    summary.torch_version = "2.11.0";
    summary.Finish();
    ASSERT_TRUE(WriteRunSummary(c.output_dir, summary).ok());
  }

  static RunSummary Ran(std::vector<double> losses, int64_t peak) {
    RunSummary s;
    s.ok = true;
    s.step_times_s = {2.0, 1.0, 1.2};
    s.step_tokens = {100, 100, 120};
    s.losses = std::move(losses);
    s.peak_memory_bytes = peak;
    s.threads = 2;
    return s;
  }

  test::ScratchDir scratch_{"scheduler_test"};
  const std::string dir_ = scratch_.path();
  MatrixOptions options_;
};

SubprocessResult Exited(int code, const std::string& tail = "") {
  SubprocessResult r;
  r.exit_code = code;
  r.output_tail = tail;
  return r;
}

TEST_F(SchedulerTest, OneCellPerLaneDevicesInParallelAndEveryCellJournaled) {
  std::vector<PlannedCell> cells = {Cell("a", "cpu"), Cell("b", "cpu"), Cell("a", "cuda:0"), Cell("big", "cpu", false)};
  for (const PlannedCell& c : cells) {
    if (c.runnable) {
      WriteSummary(c, Ran({3.0, 2.5, 2.0}, 1000));
    }
  }
  FakeRunner runner;
  for (const char* n : {"a", "b"}) runner.outcomes[n] = Exited(0);
  runner.outcomes["a"].wall_time_s = 10.0;
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{"host", "job", "abc", "", "", ""}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_FALSE(run->interrupted);
  EXPECT_EQ(run->recorded.size(), 4u);
  EXPECT_EQ(runner.max_running, 2u);  // cpu and cuda:0 together, never two cpu cells
  EXPECT_EQ(runner.started, (std::vector<std::string>{"a@cpu", "a@cuda:0", "b@cpu"}));
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok());
  ASSERT_EQ(journal->size(), 4u);
  EXPECT_EQ(journal->front().status, CellStatus::kTooLarge);  // recorded without starting, first
  const CellResult& a = (*journal)[1];
  EXPECT_EQ(a.status, CellStatus::kRuns);
  EXPECT_DOUBLE_EQ(*a.step_time_median_s, 1.1);   // warm-up step excluded
  EXPECT_DOUBLE_EQ(*a.step_time_spread_s, 0.1);
  EXPECT_DOUBLE_EQ(*a.tokens_per_second, 100.0);  // median of 100/1.0 and 120/1.2
  EXPECT_DOUBLE_EQ(*a.first_loss, 3.0);
  EXPECT_EQ(a.threads, 2);  // from the run summary
  EXPECT_DOUBLE_EQ(*a.startup_time_s, 10.0 - (2.0 + 1.0 + 1.2));  // the wall time outside the steps
  EXPECT_FALSE(journal->front().startup_time_s.has_value());       // never started
  EXPECT_EQ(a.provenance.host, "host");
  EXPECT_NE(progress.str().find("[4/4]"), std::string::npos) << progress.str();
  EXPECT_NE(progress.str().find("start-up 6s (58%)"), std::string::npos) << progress.str();
  // While it waits for cells (the fake: once per wait), the run says what runs.
  EXPECT_NE(progress.str().find("  still running: a on cpu for "), std::string::npos) << progress.str();
  EXPECT_NE(progress.str().find(" done, "), std::string::npos) << progress.str();
}

// Two cpu lanes: host cells run two at a time, each pinned to its lane's CPUs, longest first; a cell whose
// predicted peak does not fit beside the running ones waits (and no later host cell overtakes it), and each
// cell's memory limit is what the running cells' predictions leave of the host's.
TEST_F(SchedulerTest, CpuLanesRunHostCellsSideBySideWithinTheHostsMemory) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  options_.cpu_lanes = 2;
  options_.lane_cpus = {0, 1, 2, 3};
  struct Planned {
    const char* config;
    double expected_s;
    int64_t predicted;
  };
  std::vector<PlannedCell> cells;
  FakeRunner runner;
  for (const Planned& p : {Planned{"short", 10, 1 * kGiB}, Planned{"long", 100, 2 * kGiB},
                           Planned{"huge", 50, 16 * kGiB}, Planned{"tail", 5, 1 * kGiB}}) {
    PlannedCell c = Cell(p.config, "cpu");
    c.expected_duration_s = p.expected_s;
    c.predicted_memory_bytes = p.predicted;
    c.device.total_memory_bytes = 20 * kGiB;  // the limit: 85%, 17 GiB
    WriteSummary(c, Ran({3.0, 2.5, 2.0}, 1000));
    runner.outcomes[p.config] = Exited(0);
    cells.push_back(c);
  }
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{"host", "job", "abc", "", "", ""}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // long first, alone: huge (16 GiB) does not fit beside its 2 GiB, and short may not overtake huge. Then huge,
  // and short beside it in the other lane (16 + 1 GiB fit the 17), then tail in the lane huge left.
  EXPECT_EQ(runner.started, (std::vector<std::string>{"long@cpu#0", "huge@cpu#0", "short@cpu#1", "tail@cpu#0"}));
  EXPECT_EQ(runner.max_running, 2u);
  ASSERT_EQ(runner.commands.size(), 4u);
  EXPECT_EQ(runner.commands[0].cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(runner.commands[2].cpus, (std::vector<int>{2, 3}));
  const int64_t limit = static_cast<int64_t>(0.85 * static_cast<double>(20 * kGiB));
  EXPECT_EQ(runner.commands[0].memory_limit_bytes, limit);
  EXPECT_EQ(runner.commands[1].memory_limit_bytes, limit);
  EXPECT_EQ(runner.commands[2].memory_limit_bytes, limit - 16 * kGiB);
  EXPECT_EQ(runner.commands[3].memory_limit_bytes, limit - 1 * kGiB);
  ASSERT_EQ(run->recorded.size(), 4u);
  for (const CellResult& r : run->recorded) {
    EXPECT_EQ(r.status, CellStatus::kRuns) << r.key.config;
    EXPECT_EQ(r.threads, 2) << r.key.config;  // what the cell's summary said, lane or not
  }
}

// A cell of 2 ranks where every lane has 1 CPU (2 lanes on 2 cores): it would be refused there (`tune run` gives
// no more ranks than cores), so it waits until the host is empty, runs unpinned on the whole host, and no host
// cell starts beside it; the one-rank cells run in the lanes before and after.
TEST_F(SchedulerTest, ACellWithMoreRanksThanAnyLaneHasCpusTakesTheWholeHost) {
  options_.cpu_lanes = 2;
  options_.lane_cpus = {0, 1};
  FakeRunner runner;
  std::vector<PlannedCell> cells;
  for (const auto& [config, expected_s, ranks] :
       {std::tuple{"one", 30.0, 1}, std::tuple{"ranks", 20.0, 2}, std::tuple{"two", 10.0, 1}}) {
    PlannedCell c = Cell(config, "cpu");
    c.expected_duration_s = expected_s;
    c.preset.world_size = ranks;
    WriteSummary(c, Ran({3.0, 2.5, 2.0}, 1000));
    runner.outcomes[config] = Exited(0);
    cells.push_back(c);
  }
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{"host", "job", "abc", "", "", ""}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(runner.started, (std::vector<std::string>{"one@cpu#0", "ranks@cpu", "two@cpu#0"}));
  EXPECT_EQ(runner.max_running, 1u);  // nothing beside "ranks", nor overtook it while it waited
  ASSERT_EQ(runner.commands.size(), 3u);
  EXPECT_TRUE(runner.commands[1].cpus.empty());
  EXPECT_EQ(runner.commands[2].cpus, (std::vector<int>{0}));
}

// An evaluation run's summary: its batches are steps, and its scores become the cell's one line of them.
TEST_F(SchedulerTest, AnEvaluationCellTakesItsScoresFromTheSummary) {
  std::vector<PlannedCell> cells = {Cell("eval", "cpu")};
  cells[0].recipe = "eleuther_eval";
  RunSummary scored;
  scored.ok = true;
  scored.step_times_s = {0.5, 0.25, 0.25};
  scored.step_tokens = {4096, 4096, 4096};
  scored.scores = {{"truthfulqa_mc2/acc", 0.23211}, {"truthfulqa_mc2/acc_stderr", 0.15256}};
  WriteSummary(cells[0], scored);
  FakeRunner runner;
  runner.outcomes["eval"] = Exited(0);
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{"host", "job", "abc", "", "", ""}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(journal->size(), 1u);
  EXPECT_EQ((*journal)[0].scores, "truthfulqa_mc2 acc 0.2321 ± 0.1526");
  EXPECT_DOUBLE_EQ(*(*journal)[0].tokens_per_second, 16384.0);
}

// A generation run's summary: decode steps with no loss, and its prefill. The cell takes the decode tokens/s,
// the time to first token and the prefill tokens/s as the recipe wrote them, and records no loss.
TEST_F(SchedulerTest, AGenerationCellTakesItsPrefillFromTheSummaryAndHasNoLoss) {
  std::vector<PlannedCell> cells = {Cell("gen", "cpu"), Cell("train", "cpu")};
  cells[0].recipe = "generate";
  RunSummary generated;
  generated.ok = true;
  generated.step_times_s = {0.5, 0.25, 0.25, 0.5};  // one new token for each of 4 sequences per step
  generated.step_tokens = {4, 4, 4, 4};
  generated.warmup_steps = 1;
  generated.time_to_first_token_s = 0.375;
  generated.prefill_tokens_per_second = 5461.5;
  // Each step read 2 GB (rates 8, 8, 4 GB/s after warm-up), the prefill 3e10 FLOPs (8e10 FLOP/s).
  generated.step_bytes = {2e9, 2e9, 2e9, 2e9};
  generated.prefill_flops = 3e10;
  generated.dtype = "bf16";
  generated.Finish();
  cells[0].device.memory_bandwidth = {{"copy", 1.6e10}, {"triad", 2e10}};
  cells[0].device.matmul_peak_flops = {{"bf16", 8e11}};
  WriteSummary(cells[0], generated);
  WriteSummary(cells[1], Ran({3.0, 2.5, 2.0}, 1000));
  FakeRunner runner;
  runner.outcomes["gen"] = Exited(0);
  runner.outcomes["train"] = Exited(0);
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{"host", "job", "abc", "", "", ""}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(journal->size(), 2u);
  const CellResult& gen = (*journal)[0];
  EXPECT_EQ(gen.key.config, "gen");
  EXPECT_EQ(gen.status, CellStatus::kRuns);
  EXPECT_DOUBLE_EQ(*gen.tokens_per_second, 16.0);  // decode: median of 16, 16, 8 new tokens/s
  EXPECT_DOUBLE_EQ(*gen.time_to_first_token_s, 0.375);
  EXPECT_DOUBLE_EQ(*gen.prefill_tokens_per_second, 5461.5);
  EXPECT_FALSE(gen.first_loss.has_value());
  EXPECT_FALSE(gen.last_loss.has_value());
  EXPECT_DOUBLE_EQ(*gen.bytes_per_second, 8e9);
  EXPECT_DOUBLE_EQ(*gen.peak_bandwidth, 2e10);  // the best kernel's
  EXPECT_DOUBLE_EQ(*BandwidthShare(gen), 0.4);
  EXPECT_DOUBLE_EQ(*gen.prefill_flops_per_second, 8e10);
  EXPECT_DOUBLE_EQ(*PrefillPeakShare(gen), 0.1);
  EXPECT_EQ(gen.flops_dtype, "bf16");
  const CellResult& train = (*journal)[1];
  EXPECT_FALSE(train.time_to_first_token_s.has_value());
  EXPECT_FALSE(train.prefill_tokens_per_second.has_value());
  EXPECT_DOUBLE_EQ(*train.first_loss, 3.0);
  // FakeRunner's children take a minute (kUnscriptedWallTimeS), most of it start-up.
  EXPECT_NE(progress.str().find("  runs  16 decode tok/s, 40% of the memory bandwidth  first token 375.0 ms, prefill "
                                "10% of the bf16 peak  start-up 59s (98%)\n"),
            std::string::npos)
      << progress.str();
  EXPECT_NE(progress.str().find("  runs  100 tok/s  start-up 56s (93%)\n"), std::string::npos) << progress.str();
}

TEST_F(SchedulerTest, FailuresAreRecordedWithReasons) {
  std::vector<PlannedCell> cells = {Cell("crash", "cpu"), Cell("hang", "cpu"), Cell("oom", "cpu"),
                                    Cell("nan", "cpu"), Cell("bad", "cpu")};
  cells[2].device.total_memory_bytes = int64_t{20} << 30;  // its stop names the limit's size
  RunSummary failed;
  failed.error = "non-finite loss (nan) at step 2";
  failed.error_kind = "non_finite_loss";
  WriteSummary(cells[3], failed);
  FakeRunner runner;
  SubprocessResult crash;
  crash.term_signal = 11;
  crash.output_tail = "step 1\nSegmentation fault\n";
  runner.outcomes["crash"] = crash;
  SubprocessResult hang;
  hang.timed_out = true;
  hang.term_signal = 15;
  runner.outcomes["hang"] = hang;
  SubprocessResult oom;
  oom.memory_exceeded = true;
  oom.term_signal = 9;
  runner.outcomes["oom"] = oom;
  runner.outcomes["nan"] = Exited(1);
  runner.outcomes["bad"] = Exited(2, "error: cannot run\n  x.yaml:3:1: dtype: bf16 does not work on cpu\n");
  options_.cell_timeout_s = 60;
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok());
  std::map<std::string, CellResult> by;
  for (const CellResult& r : run->recorded) by[r.key.config] = r;
  EXPECT_EQ(by["crash"].status, CellStatus::kFails);
  EXPECT_NE(by["crash"].reason.find("Segmentation fault"), std::string::npos) << by["crash"].reason;
  EXPECT_EQ(by["hang"].status, CellStatus::kTimeout);
  EXPECT_NE(by["hang"].reason.find("wall-clock limit of 1m00s after 0 of 4 steps"), std::string::npos)
      << by["hang"].reason;
  EXPECT_EQ(by["oom"].status, CellStatus::kTooLarge);
  EXPECT_NE(by["oom"].reason.find("resident memory passed the limit of 85% of cpu's 20.00 GiB and the run was stopped"),
            std::string::npos)
      << by["oom"].reason;
  EXPECT_EQ(by["nan"].status, CellStatus::kFails);
  EXPECT_EQ(by["nan"].reason, "non-finite loss (nan) at step 2");
  EXPECT_EQ(by["bad"].status, CellStatus::kInvalid);
  EXPECT_NE(by["bad"].reason.find("dtype: bf16 does not work on cpu"), std::string::npos) << by["bad"].reason;
}

TEST_F(SchedulerTest, AnEnvironmentFailureIsReportedButNeverJournaledAsTheDevicesVerdict) {
  std::vector<PlannedCell> cells = {Cell("full_disk", "cpu"), Cell("fine", "cpu")};
  FakeRunner runner;
  runner.outcomes["full_disk"] =
      Exited(1, "step 1 loss 2.5\nerror: cannot write /work/out/metrics.jsonl: No space left on device\n");
  runner.outcomes["fine"] = Exited(0);
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->environment_errors.size(), 1u);
  EXPECT_EQ(run->environment_errors[0].key.config, "full_disk");
  EXPECT_NE(run->environment_errors[0].reason.find("No space left on device"), std::string::npos)
      << run->environment_errors[0].reason;
  EXPECT_NE(progress.str().find("ERROR full_disk on cpu: environment failure"), std::string::npos) << progress.str();
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(journal->size(), 1u);
  EXPECT_EQ(journal->front().key.config, "fine");
}

// A cell whose record would break a record rule (here: 4.2 s of steps inside a child that lived 0.5 s, as a clock
// jump could make) is an error of the run, not a journal line that every later reader would refuse.
TEST_F(SchedulerTest, ARecordThatBreaksARecordRuleIsAnErrorAndNeverJournaled) {
  std::vector<PlannedCell> cells = {Cell("jumped", "cpu"), Cell("fine", "cpu")};
  for (const PlannedCell& c : cells) WriteSummary(c, Ran({3.0, 2.5, 2.0}, 1000));
  FakeRunner runner;
  runner.outcomes["jumped"] = Exited(0);
  runner.outcomes["jumped"].wall_time_s = 0.5;
  runner.outcomes["fine"] = Exited(0);
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->environment_errors.size(), 1u);
  EXPECT_EQ(run->environment_errors[0].key.config, "jumped");
  EXPECT_NE(run->environment_errors[0].reason.find("breaks rule times_within_wall"), std::string::npos)
      << run->environment_errors[0].reason;
  EXPECT_NE(progress.str().find("ERROR cell jumped on cpu: cell record breaks rule times_within_wall"),
            std::string::npos)
      << progress.str();
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(journal->size(), 1u);
  EXPECT_EQ(journal->front().key.config, "fine");
}

// A cell disturbed by other work runs again once, and the second run is its record (undisturbed here); a cell
// disturbed twice is recorded as disturbed.
TEST_F(SchedulerTest, ADisturbedCellRunsAgainOnce) {
  std::vector<PlannedCell> cells = {Cell("burst", "cpu"), Cell("busy", "cpu")};
  for (const PlannedCell& c : cells) WriteSummary(c, Ran({3.0, 2.5, 2.0}, 1000));
  FakeRunner runner;
  runner.disturbed_finishes = {0, 2, 3};  // burst's first run; both of busy's
  for (const char* n : {"burst", "busy"}) runner.outcomes[n] = Exited(0);
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(runner.started, (std::vector<std::string>{"burst@cpu", "burst@cpu", "busy@cpu", "busy@cpu"}));
  ASSERT_EQ(run->recorded.size(), 2u);
  EXPECT_EQ(run->recorded[0].key.config, "burst");
  EXPECT_EQ(run->recorded[0].disturbed, "");
  EXPECT_EQ(run->recorded[1].key.config, "busy");
  EXPECT_NE(run->recorded[1].disturbed, "");
  EXPECT_NE(progress.str().find("burst on cpu was measured beside other work (other processes used 95% of the "
                                "machine's CPU while it ran (more than 25%)); running it again once"),
            std::string::npos)
      << progress.str();
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  EXPECT_EQ(journal->size(), 2u);
}

// Before a disturbed cell is measured again it waits for a quiet machine, a look a second, up to --quiet-wait;
// past the bound it is measured anyway, and with --quiet-wait 0 at once.
TEST_F(SchedulerTest, ADisturbedCellWaitsForAQuietMachineUpToABoundBeforeItRunsAgain) {
  const Disturbance busy{true, 0.63, 0, "other processes used 63%"}, quiet{true, 0.02, 0, ""};
  std::vector<PlannedCell> cells = {Cell("burst", "cpu")};
  WriteSummary(cells[0], Ran({3.0, 2.5, 2.0}, 1000));

  FakeRunner waits;
  waits.disturbed_finishes = {0};
  waits.outcomes["burst"] = Exited(0);
  waits.loads = {busy, busy, busy, quiet};
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, waits, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(waits.started.size(), 2u);
  EXPECT_EQ(waits.probes, (std::vector<double>{1, 1, 1, 1}));
  ASSERT_EQ(run->recorded.size(), 1u);
  EXPECT_EQ(run->recorded[0].disturbed, "");
  EXPECT_NE(progress.str().find("  the machine is busy (other processes use 63% of the CPU): waiting up to 1m00s "
                                "for it to be quiet before measuring burst on cpu again\n"
                                "  quiet after 4s: measuring burst on cpu again\n"),
            std::string::npos)
      << progress.str();

  options_.quiet_wait_s = 12;  // never quiet: a line at least every 9 s, then measured anyway
  FakeRunner never;
  never.disturbed_finishes = {0};
  never.outcomes["burst"] = Exited(0);
  never.loads = {busy};
  progress.str("");
  run = RunCells(cells, {}, never, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(never.started.size(), 2u);
  EXPECT_EQ(never.probes.size(), 12u);
  EXPECT_NE(progress.str().find("  still busy after 9s (other processes use 63% of the CPU)\n"
                                "  still busy after 12s (--quiet-wait 12s): measuring burst on cpu again anyway\n"),
            std::string::npos)
      << progress.str();

  options_.quiet_wait_s = 0;
  FakeRunner at_once;
  at_once.disturbed_finishes = {0};
  at_once.outcomes["burst"] = Exited(0);
  at_once.loads = {busy};
  run = RunCells(cells, {}, at_once, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(at_once.started.size(), 2u);
  EXPECT_TRUE(at_once.probes.empty());
}

// --accept-disturbed: a cell disturbed twice is recorded disturbed and accepted, which the journal keeps and the
// progress line says; without it the record carries no acceptance.
TEST_F(SchedulerTest, AcceptDisturbedMarksTheRecordThatIsStillDisturbed) {
  std::vector<PlannedCell> cells = {Cell("busy", "cpu")};
  WriteSummary(cells[0], Ran({3.0, 2.5, 2.0}, 1000));
  options_.accept_disturbed = true;
  options_.quiet_wait_s = 0;
  FakeRunner runner;
  runner.disturbed_finishes = {0, 1};
  runner.outcomes["busy"] = Exited(0);
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(journal->size(), 1u);
  EXPECT_NE((*journal)[0].disturbed, "");
  EXPECT_EQ((*journal)[0].disturbed_accepted, true);
  EXPECT_NE(progress.str().find("; its speed is published marked where no undisturbed one stands (--accept-disturbed)"),
            std::string::npos)
      << progress.str();

  options_.accept_disturbed = false;
  ASSERT_TRUE(WriteFileAtomically(options_.journal_path, "").ok());
  FakeRunner plain;
  plain.disturbed_finishes = {0, 1};
  plain.outcomes["busy"] = Exited(0);
  run = RunCells(cells, {}, plain, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->recorded.size(), 1u);
  EXPECT_FALSE(run->recorded[0].disturbed_accepted.has_value());
}

TEST_F(SchedulerTest, InterruptKeepsFinishedCellsAndResumeRunsOnlyTheRest) {
  std::vector<PlannedCell> cells = {Cell("a", "cpu"), Cell("b", "cpu"), Cell("c", "cpu")};
  FakeRunner first;
  first.interrupt_after_first = true;
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, first, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->interrupted);
  ASSERT_EQ(run->recorded.size(), 1u);

  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok());
  std::vector<CellKey> done;
  for (const auto& [key, r] : LatestByCell(*journal)) done.push_back(key.first);
  FakeRunner second;
  StatusOr<MatrixRun> resumed = RunCells(cells, done, second, options_, Provenance{}, progress);
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(second.started, (std::vector<std::string>{"b@cpu", "c@cpu"}));
  journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_EQ(journal->size(), 3u);  // every cell exactly once
  EXPECT_EQ(LatestByCell(*journal).size(), 3u);
}

// A stop that arrives between two cells (the first recorded, the next refused by the runner) ends the run as
// interrupted, with the first cell kept, not as an error of the run.
TEST_F(SchedulerTest, AStopBetweenTwoCellsIsAnInterruptionNotAnError) {
  std::vector<PlannedCell> cells = {Cell("a", "cpu"), Cell("b", "cpu")};
  FakeRunner runner;
  runner.interrupt_at_start = 2;
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells(cells, {}, runner, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->interrupted);
  ASSERT_EQ(run->recorded.size(), 1u);
  EXPECT_EQ(run->recorded[0].key.config, "a");
  EXPECT_EQ(runner.started, (std::vector<std::string>{"a@cpu"}));
}

// Two "machines" each run one shard into their own journal; merging the two journals writes the same
// metadata and reports as one machine running every cell.
TEST_F(SchedulerTest, ShardsRunSeparatelyMergeToTheSameMetadataAsOneFullRun) {
  testing::TestCheckout co;
  std::vector<PlannedCell> cells;
  for (const char* config : {"tiny/lora", "tiny/lora_big", "tiny/full"}) {
    for (const char* device : {"cpu", "cuda:0"}) {
      bool too_large = std::string(config) == "tiny/lora_big" && std::string(device) == "cpu";
      PlannedCell c = Cell(config, device, !too_large);
      c.output_dir = dir_ + "/" + config + "_" + device;
      c.recipe = c.preset.recipe = co.registry.RecipeForConfig(config)->name;
      c.preset.config_hash = ConfigHash(co.Read(config));
      c.expected_duration_s = static_cast<double>(cells.size() * 7 % 5) + 1;
      if (c.runnable) {
        WriteSummary(c, Ran({3.0, 2.0, 1.5}, 4096));
      }
      cells.push_back(c);
    }
  }
  std::vector<ShardItem> items;
  for (const PlannedCell& c : cells) items.push_back({c.key, c.expected_duration_s});
  std::vector<int> shard_of = AssignShards(items, 2);
  auto run = [&](const std::string& journal, int shard) {
    std::vector<PlannedCell> mine;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (shard == 0 || shard_of[i] == shard) mine.push_back(cells[i]);
    }
    FakeRunner runner;
    for (const PlannedCell& c : mine) runner.outcomes[c.key.config] = Exited(0);
    options_.journal_path = dir_ + "/" + journal;
    std::ostringstream progress;
    Provenance machine{"host", "job", "abc", "2.11.0", "", ""};
    StatusOr<MatrixRun> r = RunCells(mine, {}, runner, options_, machine, progress,
                                     [] { return std::string("2026-11-22T10:00:00Z"); });
    EXPECT_TRUE(r.ok());
    return options_.journal_path;
  };
  std::string a = run("shard1.jsonl", 1), b = run("shard2.jsonl", 2), full = run("full.jsonl", 0);

  // Every cell in exactly one shard.
  std::multiset<CellKey> seen;
  for (const std::string& j : {a, b}) {
    std::vector<CellResult> records = ReadJournal(j, nullptr).value();
    for (const CellResult& r : records) seen.insert(r.key);
  }
  ASSERT_EQ(seen.size(), cells.size());
  for (const PlannedCell& c : cells) EXPECT_EQ(seen.count(c.key), 1u) << c.key.config << " " << c.key.device;
  EXPECT_GT(ReadJournal(a, nullptr)->size(), 0u);
  EXPECT_GT(ReadJournal(b, nullptr)->size(), 0u);

  auto merge = [&](const std::vector<std::string>& journals, const std::string& out) {
    StatusOr<JournalSet> set = LoadJournals(journals, co.registry);
    EXPECT_TRUE(set.ok()) << set.status().ToString();
    MergeOptions o;
    o.journal_out = dir_ + "/" + out + ".jsonl";
    o.reports_dir = dir_ + "/" + out;
    std::ostringstream log;
    EXPECT_TRUE(MergeJournals(*set, co.registry, o, log).ok());
    std::map<std::string, std::string> files;
    for (const char* config : {"tiny/lora", "tiny/lora_big", "tiny/full"}) files[config] = co.Read(config);
    files["SUPPORT.md"] = ReadFile(o.reports_dir + "/SUPPORT.md").value();
    files["support.json"] = ReadFile(o.reports_dir + "/support.json").value();
    files["journal"] = ReadFile(o.journal_out).value();
    return files;
  };
  std::map<std::string, std::string> original;
  for (const char* config : {"tiny/lora", "tiny/lora_big", "tiny/full"}) original[config] = co.Read(config);
  std::map<std::string, std::string> from_shards = merge({a, b}, "shards");
  for (const auto& [config, text] : original) co.Write(config, text);
  std::map<std::string, std::string> from_full = merge({full}, "full");
  for (const auto& [name, text] : from_full) EXPECT_EQ(from_shards[name], text) << name;
  EXPECT_NE(from_full["tiny/lora"].find("supported_devices: [\"cpu (amx, torch 2.11.0)\", \"cuda (torch 2.11.0)\"]"),
            std::string::npos)
      << from_full["tiny/lora"];
  EXPECT_NE(from_full["tiny/lora_big"].find("status: too_large"), std::string::npos);
}

// The runner's readings of the machine become the record's CPU accounting; a fake runner's unknown readings
// leave the shares unknown and the cell undisturbed.
// --time-limit: a cell the plan deferred neither runs nor is recorded; one not yet started when the time left
// is less than it is predicted to take waits for a later run too.
TEST_F(SchedulerTest, ATimeLimitDefersCellsAndNeverRecordsThem) {
  PlannedCell quick = Cell("quick", "cpu"), late = Cell("late", "cpu"), planned = Cell("planned", "cpu");
  quick.expected_duration_s = 10;
  late.expected_duration_s = 200;  // the plan fitted it; the run's first cell left it no time (limit 100 s)
  planned.deferred = true;
  for (const PlannedCell& c : {quick, late, planned}) WriteSummary(c, Ran({3.0, 2.5, 2.0}, 1000));
  options_.time_limit_s = 100;
  FakeRunner runner;
  for (const char* n : {"quick", "late", "planned"}) runner.outcomes[n] = Exited(0);
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells({quick, late, planned}, {}, runner, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(runner.started, (std::vector<std::string>{"quick@cpu"}));
  ASSERT_EQ(run->recorded.size(), 1u);
  EXPECT_EQ(run->recorded[0].key.config, "quick");
  ASSERT_EQ(run->deferred.size(), 2u);
  EXPECT_EQ(run->deferred[0].config, "planned");
  EXPECT_EQ(run->deferred[1].config, "late");
  EXPECT_NE(progress.str().find("[1/1]"), std::string::npos) << progress.str();

  // No limit: every cell the plan did not defer runs.
  options_.time_limit_s = 0;
  FakeRunner all;
  for (const char* n : {"quick", "late"}) all.outcomes[n] = Exited(0);
  run = RunCells({quick, late, planned}, {}, all, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(all.started, (std::vector<std::string>{"quick@cpu", "late@cpu"}));
  EXPECT_EQ(run->deferred.size(), 1u);
}

// --time-limit is a hard bound: a child's wall-clock limit is the time the run has left where that is shorter
// than --timeout, and a child stopped at it is the run's bound, not the device's verdict: its cell is not
// recorded (its earlier record stands) and waits for a later run. A --timeout shorter than the time left still
// records a timeout.
TEST_F(SchedulerTest, ATimeLimitIsAHardBoundAndAChildStoppedAtItIsNoVerdict) {
  PlannedCell slow = RunnableCpuCell("slow", "lora_finetune_single_device", dir_ + "/slow");
  slow.argv = {"tune", "run"};
  slow.expected_duration_s = 50;  // predicted to fit; it did not
  options_.time_limit_s = 100;
  options_.cell_timeout_s = 900;
  FakeRunner runner;
  runner.outcomes["slow"].timed_out = true;
  runner.outcomes["slow"].wall_time_s = 100;
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells({slow}, {}, runner, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(runner.commands.size(), 1u);
  EXPECT_GT(runner.commands[0].timeout_s, 90);
  EXPECT_LE(runner.commands[0].timeout_s, 100);
  EXPECT_TRUE(run->recorded.empty());
  ASSERT_EQ(run->deferred.size(), 1u);
  EXPECT_EQ(run->deferred[0].config, "slow");
  EXPECT_FALSE(PathExists(options_.journal_path)) << "nothing recorded";
  EXPECT_NE(progress.str().find("slow on cpu: its run was stopped after 1m40s at the run's --time-limit of 1m40s; "
                                "not recorded, its earlier record stands, left for a later run"),
            std::string::npos)
      << progress.str();

  options_.cell_timeout_s = 30;  // the cell's own limit comes first: a timeout, recorded as one
  FakeRunner own;
  own.outcomes["slow"].timed_out = true;
  own.outcomes["slow"].wall_time_s = 30;
  run = RunCells({slow}, {}, own, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(own.commands[0].timeout_s, 30);
  ASSERT_EQ(run->recorded.size(), 1u);
  EXPECT_EQ(run->recorded[0].status, CellStatus::kTimeout);
}

// Past the limit no child starts: a started cell's next proxy leaves the cell for a later run, and a numeric
// reference not started leaves its cell recorded without the check, saying why.
TEST_F(SchedulerTest, PastTheTimeLimitNoChildStartsAndACellWaitingForItsReferenceIsRecordedUnchecked) {
  PlannedCell proxied = RunnableCpuCell("proxied", "lora_finetune_single_device", dir_ + "/proxied");
  for (int64_t layers : {1, 2}) {
    ProxyRun p;
    p.layers = layers;
    p.argv = {"tune", "run", "model.num_layers=" + std::to_string(layers)};
    p.output_dir = proxied.output_dir + "__proxy" + std::to_string(layers);
    proxied.proxies.push_back(p);
  }
  proxied.argv.clear();  // too large: its proxies are its measurement
  PlannedCell checked = RunnableCpuCell("checked", "lora_finetune_single_device", dir_ + "/checked");
  checked.argv = {"tune", "run"};
  checked.reference.argv = {"tune", "run", "dtype=fp32"};
  checked.reference.output_dir = checked.output_dir + "__reference";
  for (const std::string& d : {proxied.proxies[0].output_dir, checked.output_dir}) {
    ASSERT_TRUE(WriteRunSummary(d, TrainedSummary({1, 1, 1}, 1000)).ok());
  }
  options_.time_limit_s = 1e-6;  // reached as soon as the first child started
  FakeRunner runner;
  for (const char* n : {"proxied", "checked"}) runner.outcomes[n] = Exited(0);
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells({checked, proxied}, {}, runner, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(runner.started, (std::vector<std::string>{"checked@cpu"})) << "neither the reference nor a new cell";
  ASSERT_EQ(run->recorded.size(), 1u);
  EXPECT_EQ(run->recorded[0].key.config, "checked");
  EXPECT_EQ(run->recorded[0].status, CellStatus::kRuns);
  EXPECT_EQ(run->recorded[0].numeric_note,
            "not checked: the run reached its --time-limit of 0s before the float32 reference could start");
  ASSERT_EQ(run->deferred.size(), 1u);
  EXPECT_EQ(run->deferred[0].config, "proxied");

  // The proxied cell first: its first proxy runs, its second does not start.
  FakeRunner second;
  second.outcomes["proxied"] = Exited(0);
  run = RunCells({proxied}, {}, second, options_, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(second.started.size(), 1u);
  EXPECT_TRUE(run->recorded.empty());
  ASSERT_EQ(run->deferred.size(), 1u);
  EXPECT_NE(progress.str().find("proxied on cpu: the run reached its --time-limit of 0s before its proxy of 2 layers "
                                "could start; not recorded"),
            std::string::npos)
      << progress.str();
}

TEST(CpuAccountingTest, OtherWorkDuringTheCellMarksItDisturbed) {
  CellOutcome outcome;
  outcome.result.cpu_time_s = 9;
  outcome.machine_before = {true, 100, 0, 1000};
  outcome.machine_after = {true, 119, 0, 1020};  // 19 s busy of 20: others took 10 s
  CellResult r;
  AddCpuAccounting(outcome, &r);
  EXPECT_EQ(r.cpu_time_s, 9);
  EXPECT_EQ(r.others_cpu_share, 0.5);
  EXPECT_EQ(r.steal_share, 0);
  EXPECT_EQ(r.disturbed, "other processes used 50% of the machine's CPU while it ran (more than 25%)");
  // The fields survive the journal.
  r.key = {"tiny/lora_single_device", "cpu"};
  r.recipe = "lora_finetune_single_device";
  r.device_type = "cpu";
  r.provenance.verified_at = "2026-12-04T09:00:00Z";
  StatusOr<CellResult> back = CellResultFromJson(ToJson(r), "journal:1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->disturbed, r.disturbed);
  EXPECT_EQ(back->others_cpu_share, 0.5);
  EXPECT_EQ(back->cpu_time_s, 9);

  CellOutcome fake;
  CellResult quiet;
  AddCpuAccounting(fake, &quiet);
  EXPECT_FALSE(quiet.cpu_time_s.has_value());
  EXPECT_FALSE(quiet.others_cpu_share.has_value());
  EXPECT_EQ(quiet.disturbed, "");
}

}  // namespace
}  // namespace tmx::matrix
