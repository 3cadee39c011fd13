// Repaired cells: the record made of what the repaired config got, and the scheduler recording a repaired
// cell (against the fake runner) through the journal into the support entry.
#include "matrix/repair_cell.h"

#include <gtest/gtest.h>

#include "harness/run_summary.h"
#include "matrix/journal.h"
#include "matrix/scheduler.h"
#include "matrix/support_entry.h"
#include "matrix/testdata/fake_runner.h"
#include "matrix/testdata/planned_cell.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

const std::vector<std::string> kRepair = {"optimizer._component_=torch.optim.AdamW", "optimizer.fused=True"};

PlannedCell RepairedCell(const std::string& dir) {
  PlannedCell c = RunnableCpuCell("qwen2/1.5B_full_single_device", "full_finetune_single_device", dir);
  c.repair = kRepair;
  c.written = c.preset;
  c.written.status = CellStatus::kInvalid;
  c.written.problems = {"optimizer._component_: a paged optimizer needs a cuda device, not cpu; use " +
                        kRepair[0] + " " + kRepair[1]};
  c.written.reason = c.written.problems[0];
  c.argv = {"tune", "run", "full_finetune_single_device", "--config", c.key.config, kRepair[0], kRepair[1],
            "device=cpu"};
  return c;
}

TEST(RepairCellTest, TheRecordIsInvalidAsWrittenWithWhatTheRepairGot) {
  PlannedCell cell = RepairedCell("/tmp");
  CellResult ran = cell.preset;
  ran.status = CellStatus::kRuns;
  ran.tokens_per_second = 812.5;
  ran.peak_memory_bytes = int64_t{3} << 30;
  CellResult r = RepairedResult(cell, ran);
  EXPECT_EQ(r.status, CellStatus::kInvalid);
  EXPECT_EQ(r.repaired_status, CellStatus::kRuns);
  EXPECT_EQ(r.repair, kRepair);
  EXPECT_EQ(r.problems, cell.written.problems);
  EXPECT_EQ(r.reason, cell.written.reason + "; runs with 2 overrides (" + kRepair[0] + " " + kRepair[1] + ")");
  EXPECT_EQ(r.tokens_per_second, 812.5);  // the repaired config's measurement
  EXPECT_EQ(*r.peak_memory_bytes, int64_t{3} << 30);

  // What the repaired config got follows, with its reason.
  CellResult failed = cell.preset;
  failed.status = CellStatus::kFails;
  failed.reason = "out of memory: cannot allocate";
  CellResult f = RepairedResult(cell, failed);
  EXPECT_EQ(f.status, CellStatus::kInvalid);
  EXPECT_EQ(f.repaired_status, CellStatus::kFails);
  EXPECT_NE(f.reason.find("; fails with 2 overrides (" + kRepair[0] + " " + kRepair[1] +
                          "): out of memory: cannot allocate"),
            std::string::npos)
      << f.reason;

  // A cell without a repair is its record as it is.
  PlannedCell plain = cell;
  plain.repair.clear();
  EXPECT_EQ(RepairedResult(plain, failed).status, CellStatus::kFails);
  EXPECT_FALSE(RepairedResult(plain, failed).repaired_status);
  EXPECT_EQ(RepairedOutcome("runs", 1), "runs with 1 override");
}

TEST(RepairCellTest, TheSchedulerRecordsARepairedCellThroughTheJournalIntoItsEntry) {
  test::ScratchDir scratch("repair_cell_test");
  MatrixOptions options;
  options.journal_path = scratch.path() + "/journal.jsonl";
  PlannedCell cell = RepairedCell(scratch.path());
  FakeRunner runner;
  std::vector<std::string> argv;
  runner.on_start = [&](const CellCommand& cmd) {
    argv = cmd.argv;
    ASSERT_TRUE(WriteRunSummary(cell.output_dir, TrainedSummary({3, 2, 2}, int64_t{5} << 30)).ok());
  };
  runner.outcomes[cell.key.config].exit_code = 0;
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells({cell}, {}, runner, options, Provenance{}, progress, [] {
    return std::string("2026-12-01T05:00:00Z");
  });
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(argv, cell.argv);  // the repair travels in the child's argv
  EXPECT_NE(progress.str().find("invalid as written, runs with 2 overrides"), std::string::npos) << progress.str();
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(journal->size(), 1u);
  const CellResult& r = (*journal)[0];
  EXPECT_EQ(r.status, CellStatus::kInvalid);
  EXPECT_EQ(r.repaired_status, CellStatus::kRuns);
  EXPECT_EQ(r.repair, kRepair);
  EXPECT_EQ(*r.peak_memory_bytes, int64_t{5} << 30);

  SupportEntry e = SupportFromCell(r);
  EXPECT_EQ(e.status, "invalid");
  EXPECT_EQ(e.repaired_status, "runs");
  EXPECT_EQ(e.repair, kRepair[0] + " " + kRepair[1]);
  EXPECT_DOUBLE_EQ(*e.peak_memory_gib, 5);
}

TEST(RepairCellTest, TheJournalRefusesARepairOnACellThatIsNotInvalid) {
  CellResult r;
  r.key = {"tiny/full_single_device", "cpu"};
  r.recipe = "full_finetune_single_device";
  r.device_type = "cpu";
  r.status = CellStatus::kRuns;
  r.repair = kRepair;
  r.repaired_status = CellStatus::kRuns;
  r.provenance.verified_at = "2026-12-01T05:00:00Z";
  nlohmann::json j = ToJson(r);
  StatusOr<CellResult> read = CellResultFromJson(j, "j:1");
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("a repair is recorded with the status its run got, on an invalid cell"),
            std::string::npos)
      << read.status().message();
  r.status = CellStatus::kInvalid;
  EXPECT_TRUE(CellResultFromJson(ToJson(r), "j:1").ok());
  r.repaired_status.reset();  // a repair without what it got
  EXPECT_FALSE(CellResultFromJson(ToJson(r), "j:1").ok());
}

}  // namespace
}  // namespace tmx::matrix
