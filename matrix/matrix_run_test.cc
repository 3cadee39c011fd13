// tune-matrix run and cell between the command line and the child processes: a test checkout, fake
// devices and a fake runner that writes the run summary each child would write.
#include "matrix/matrix_run.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "harness/run_summary.h"
#include "matrix/journal.h"
#include "matrix/testdata/checkout.h"
#include "matrix/testdata/fake_runner.h"

namespace tmx::matrix {
namespace {

DeviceInfo Cpu() {
  DeviceInfo d;
  d.id = d.type = "cpu";
  d.name = "Test CPU";
  d.total_memory_bytes = int64_t{16} << 30;
  d.probed = true;
  return d;
}

class MatrixRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.tune_path = "/bin/tune";
    options_.journal_path = co_.dir() + "/reports/journal.jsonl";
    options_.work_dir = co_.dir() + "/runs";
    options_.reports_dir = co_.dir() + "/reports";
    options_.junit_path = co_.dir() + "/junit.xml";
    // The column `tune-matrix run` records into on the AMX machine the checkout's records were made on.
    options_.cpu_class = "amx";
    options_.torch_version = "2.11.0";
    ASSERT_TRUE(MakeDirs(options_.reports_dir).ok());
    // Each child "runs" its steps: the summary lands in the cell's output_dir= override.
    runner_.on_start = [this](const CellCommand& cmd) {
      ++children_;
      std::string out;
      for (const std::string& a : cmd.argv) {
        if (a.rfind("output_dir=", 0) == 0) out = a.substr(11);
      }
      // The recipe's own budget (RecipeSpec::cell_overrides) reaches the child command.
      EXPECT_NE(std::find(cmd.argv.begin(), cmd.argv.end(), "steps=3"), cmd.argv.end());
      RunSummary s;
      s.ok = true;
      s.step_times_s = {2.0, 1.0, 1.0};
      s.step_tokens = {50, 50, 50};
      s.losses = {3.0, 2.0, 1.0};
      s.Finish();
      ASSERT_TRUE(WriteRunSummary(out, s).ok());
    };
    for (const char* c : {"tiny/lora", "tiny/lora_big", "tiny/full"}) runner_.outcomes[c].exit_code = 0;
    setting_.devices = {Cpu()};
    setting_.provenance = {"host", "job", "abc", "2.11.0", "", ""};
    setting_.runner = &runner_;
    setting_.now = [] { return std::string("2026-11-22T10:00:00Z"); };
  }

  testing::TestCheckout co_;
  MatrixOptions options_;
  FakeRunner runner_;
  RunSetting setting_;
  int children_ = 0;
  std::ostringstream out_, err_;
};

TEST_F(MatrixRunTest, ARunRecordsEveryCellWritesBackAndKeepsTheNewestRecordPerCell) {
  const std::string old = JournalLine(co_.Observe("tiny/lora", "cpu", CellStatus::kFails, "2026-11-21T10:00:00Z")) + "\n";
  ASSERT_TRUE(WriteFileAtomically(options_.journal_path, old).ok());
  StatusOr<MatrixRun> run = RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(children_, 3);
  EXPECT_EQ(run->recorded.size(), 3u);
  EXPECT_FALSE(PathExists(options_.journal_path + ".prev"));
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_EQ(journal->size(), 3u);  // the old tiny/lora record replaced by this run's (it is in the history)
  for (const CellResult& r : *journal) EXPECT_EQ(r.status, CellStatus::kRuns) << r.key.config;
  EXPECT_NE(out_.str().find("tune-matrix: 3 cells (3 to run, 0 recorded without running) on 1 device(s): cpu (amx, "
                            "torch 2.11.0)\n"),
            std::string::npos)
      << out_.str();
  std::string lora = co_.Read("tiny/lora");
  EXPECT_NE(lora.find("supported_devices: [\"cpu (amx, torch 2.11.0)\"]"), std::string::npos) << lora;
  EXPECT_NE(lora.find("tokens_per_second: 50.0"), std::string::npos) << lora;
  EXPECT_TRUE(PathExists(options_.reports_dir + "/SUPPORT.md"));
  EXPECT_NE(ReadFile(options_.junit_path)->find("tests=\"3\""), std::string::npos);
}

// The caller's one look at the machine's load (RunSetting::busy_warning) is printed once, before the first
// cell; a resumed run with nothing left to run does not repeat it.
TEST_F(MatrixRunTest, ABusyMachineIsWarnedOfOnceBeforeTheFirstCellAndNotWhenNothingRuns) {
  setting_.busy_warning = "the machine is busy: other processes used 1.9 of 2 cores";
  runner_.on_start = [this, start = runner_.on_start](const CellCommand& cmd) {
    EXPECT_NE(err_.str().find("tune-matrix: warning: the machine is busy: other processes used 1.9 of 2 cores\n"),
              std::string::npos)
        << "warned before the first cell";
    start(cmd);
  };
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_).ok());
  EXPECT_EQ(children_, 3);
  const std::string warned = err_.str();
  EXPECT_EQ(warned.find("the machine is busy"), warned.rfind("the machine is busy")) << warned;

  err_.str("");
  options_.resume = true;
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_).ok());
  EXPECT_EQ(children_, 3);
  EXPECT_EQ(err_.str().find("busy"), std::string::npos) << err_.str();
}

// A run ends with one tally of what it recorded instead of a line per config file or entry; --verbose
// (MatrixOptions::verbose) lists them as before, and the tally still ends the run.
TEST_F(MatrixRunTest, ARunEndsWithATallyAndListsEachCellOnlyWhenVerbose) {
  const std::string old = JournalLine(co_.Observe("tiny/lora", "cpu", CellStatus::kFails, "2026-11-21T10:00:00Z")) + "\n";
  ASSERT_TRUE(WriteFileAtomically(options_.journal_path, old).ok());
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_).ok());
  const std::string quiet = out_.str();
  EXPECT_EQ(quiet.find("updated " + co_.Path("tiny/lora")), std::string::npos) << quiet;
  EXPECT_EQ(quiet.find("unchanged "), std::string::npos) << quiet;
  EXPECT_NE(quiet.find("Tally: 3 cells: 3 new; 3 runs; 3 config files updated (--verbose lists each)\n"),
            std::string::npos)
      << quiet;

  out_.str("");
  options_.verbose = true;
  setting_.now = [] { return std::string("2026-11-23T10:00:00Z"); };
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_).ok());
  const std::string verbose = out_.str();
  EXPECT_NE(verbose.find("updated " + co_.Path("tiny/lora") + "\n"), std::string::npos) << verbose;
  EXPECT_NE(verbose.find("Tally: 3 cells: 3 updated; 3 runs; 3 config files updated\n"), std::string::npos) << verbose;
}

TEST_F(MatrixRunTest, HistoryKeepsEveryRunsRecordsAndThoseTheyReplace) {
  const std::string history = options_.reports_dir + "/history";
  auto lines = [&](const std::string& file) {
    StatusOr<std::string> text = ReadFile(history + "/" + file);
    return text.ok() ? std::count(text->begin(), text->end(), '\n') : -1;
  };
  // A journal that was never published (its run was interrupted, or ran with --no-write-back).
  ASSERT_TRUE(WriteFileAtomically(options_.journal_path, JournalLine(co_.Observe("tiny/lora", "cpu", CellStatus::kFails,
                                                                                 "2026-11-21T10:00:00Z")) +
                                                              "\n")
                  .ok());
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_).ok());
  EXPECT_EQ(lines("tiny/lora/cpu.jsonl"), 2);  // the replaced record and this run's
  EXPECT_EQ(lines("tiny/full/cpu.jsonl"), 1);
  // A second run replaces the first one's records: they are in history already, not added twice.
  setting_.now = [] { return std::string("2026-11-23T10:00:00Z"); };
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_).ok());
  EXPECT_EQ(lines("tiny/lora/cpu.jsonl"), 3);
  EXPECT_EQ(lines("tiny/lora_big/cpu.jsonl"), 2);
  EXPECT_EQ(lines("tiny/full/cpu.jsonl"), 2);
  EXPECT_TRUE(PathExists(options_.reports_dir + "/index.html"));
  EXPECT_NE(out_.str().find("added 3 measurement(s) to " + history + " (3 file(s))"), std::string::npos)
      << out_.str();
}

TEST_F(MatrixRunTest, APreviousJournalThatCannotBeKeptStopsTheRunWithNothingChanged) {
  ASSERT_TRUE(WriteFileAtomically(options_.journal_path, "old\n").ok());
  StatusOr<MatrixRun> run = RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("the journal's records cannot be kept"), std::string::npos)
      << run.status().message();
  EXPECT_NE(run.status().message().find("journal.jsonl:1: not a JSON record"), std::string::npos)
      << run.status().message();
  EXPECT_EQ(children_, 0);
  EXPECT_EQ(ReadFile(options_.journal_path).value(), "old\n");
  EXPECT_FALSE(PathExists(options_.journal_path + ".prev"));
  EXPECT_FALSE(PathExists(options_.reports_dir + "/history"));
}

// Stopped after its first cell and started again without --resume, twice: the journal still holds a
// record of every cell, old or new. --fresh alone sets the journal aside.
TEST_F(MatrixRunTest, RestartsWithoutResumeLoseNoRecordAndFreshSetsTheJournalAside) {
  std::string old;
  for (const char* c : {"tiny/lora", "tiny/lora_big", "tiny/full"}) {
    old += JournalLine(co_.Observe(c, "cpu", CellStatus::kFails, "2026-11-21T10:00:00Z")) + "\n";
  }
  ASSERT_TRUE(WriteFileAtomically(options_.journal_path, old).ok());
  for (int restart = 0; restart < 2; ++restart) {
    FakeRunner stopped;  // a fresh process each time, stopped after its first cell
    stopped.on_start = runner_.on_start;
    stopped.outcomes = runner_.outcomes;
    stopped.interrupt_after_first = true;
    setting_.runner = &stopped;
    StatusOr<MatrixRun> run = RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    EXPECT_TRUE(run->interrupted);
    EXPECT_EQ(run->recorded.size(), 1u);
    StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
    ASSERT_TRUE(journal.ok());
    EXPECT_EQ(LatestByCell(*journal).size(), 3u) << "restart " << restart;
  }
  options_.fresh = true;
  setting_.runner = &runner_;
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_).ok());
  EXPECT_TRUE(PathExists(options_.journal_path + ".prev"));
  EXPECT_NE(out_.str().find("Previous journal kept as " + options_.journal_path + ".prev"), std::string::npos);
  EXPECT_EQ(ReadJournal(options_.journal_path, nullptr)->size(), 3u);
}

TEST_F(MatrixRunTest, ResumeRunsOnlyTheMissingCellsAndNoWriteBackLeavesConfigsAlone) {
  options_.config_globs = {"tiny/lora*"};
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/false, setting_, out_, err_).ok());
  EXPECT_EQ(children_, 2);
  EXPECT_EQ(co_.Read("tiny/lora").find("metadata"), std::string::npos);
  options_.config_globs = {};
  options_.resume = true;
  runner_.started.clear();
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/false, setting_, out_, err_).ok());
  EXPECT_EQ(runner_.started, std::vector<std::string>{"tiny/full@cpu"});
  EXPECT_EQ(ReadJournal(options_.journal_path, nullptr)->size(), 3u);
}

// --cpu-class: every child runs with ATen's and oneDNN's instruction sets capped to the class, in its environment
// vector, and its records are of that class's column, beside the records of the machine's own class, which they
// neither replace nor resume.
TEST_F(MatrixRunTest, ACappedClassCapsEveryChildAndRecordsAColumnOfItsOwn) {
  const std::string amx =
      JournalLine(co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-11-21T10:00:00Z")) + "\n";
  ASSERT_TRUE(WriteFileAtomically(options_.journal_path, amx).ok());
  options_.cpu_class = "avx2";
  options_.child_env = {{"ATEN_CPU_CAPABILITY", "avx2"}, {"ONEDNN_MAX_CPU_ISA", "AVX2"}};
  options_.resume = true;  // the amx record is no record of this column: its cell runs
  StatusOr<MatrixRun> run = RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(runner_.commands.size(), 3u);
  for (const CellCommand& cmd : runner_.commands) {
    EXPECT_EQ(cmd.env, options_.child_env) << cmd.key.config;
    EXPECT_EQ(cmd.argv.front(), "/bin/tune") << "a program and its arguments, never a shell string";
  }
  for (const CellResult& r : run->recorded) {
    EXPECT_EQ(r.provenance.cpu_class, "avx2");
    EXPECT_EQ(ColumnOf(r), "cpu (avx2, torch 2.11.0)");
  }
  EXPECT_NE(out_.str().find("on 1 device(s): cpu (avx2, torch 2.11.0); 0 already in the journal, 3 left\n"),
            std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("[1/3] cpu (avx2, torch 2.11.0)  "), std::string::npos) << out_.str();
  // The journal keeps the amx record beside the avx2 ones, and the config a column for each.
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok());
  EXPECT_EQ(journal->size(), 4u);
  const std::string lora = co_.Read("tiny/lora");
  EXPECT_NE(lora.find("    \"cpu (amx, torch 2.11.0)\":\n      status: runs\n      tokens_per_second: 100.0"),
            std::string::npos)
      << lora;
  EXPECT_NE(lora.find("    \"cpu (avx2, torch 2.11.0)\":\n      status: runs\n      tokens_per_second: 50.0"),
            std::string::npos)
      << lora;
  EXPECT_NE(lora.find("      cpu_class: \"avx2\"\n"), std::string::npos) << lora;
  // Resumed in the avx2 column, nothing is left to run; in the amx column, the two cells it lacks.
  runner_.commands.clear();
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/false, setting_, out_, err_).ok());
  EXPECT_TRUE(runner_.commands.empty());
  options_.cpu_class = "amx";
  options_.child_env.clear();
  ASSERT_TRUE(RunMatrix(co_.registry, options_, /*write_back=*/false, setting_, out_, err_).ok());
  ASSERT_EQ(runner_.commands.size(), 2u);
  EXPECT_TRUE(runner_.commands[0].env.empty());
}

TEST_F(MatrixRunTest, OneCellIsRecordedInItsOwnJournalOnly) {
  options_.journal_path = co_.dir() + "/cell.jsonl";
  StatusOr<MatrixRun> run = RunOneCell(co_.registry, "tiny/full", "cpu", options_, setting_, out_);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->recorded.size(), 1u);
  EXPECT_EQ(run->recorded[0].status, CellStatus::kRuns);
  EXPECT_EQ(runner_.started, std::vector<std::string>{"tiny/full@cpu"});
  EXPECT_EQ(co_.Read("tiny/full").find("metadata"), std::string::npos);
  EXPECT_FALSE(PathExists(options_.reports_dir + "/SUPPORT.md"));
}

// A user's config goes through run and cell without touching the built-in configs or the checkout's reports:
// its records land in the journal, history and reports the run was given.
TEST_F(MatrixRunTest, AUserConfigRecordsIntoItsOwnJournalAndReportsOnly) {
  const std::string mine = co_.dir() + "/mine/my_lora.yaml";
  const std::string text = "# tune run lora_finetune_single_device --config my_lora\nbatch_size: 2  # mine\nlr: 3e-4\n";
  ASSERT_TRUE(MakeDirs(co_.dir() + "/mine").ok());
  ASSERT_TRUE(WriteFileAtomically(mine, text).ok());
  std::map<std::string, std::string> builtins;
  for (const char* c : {"tiny/lora", "tiny/lora_big", "tiny/full"}) builtins[c] = co_.Read(c);
  runner_.outcomes["my_lora"].exit_code = 0;
  const std::string results = co_.dir() + "/matrix-results";
  options_.user_configs = {{"my_lora", mine, "lora_finetune_single_device"}};
  options_.journal_path = results + "/journal.jsonl";
  options_.reports_dir = results;
  options_.work_dir = results + "/runs";
  options_.junit_path.clear();
  ASSERT_TRUE(MakeDirs(results).ok());

  StatusOr<MatrixRun> run = RunMatrix(co_.registry, options_, /*write_back=*/true, setting_, out_, err_);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(children_, 1);
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options_.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(journal->size(), 1u);
  EXPECT_EQ(journal->front().key.config, "my_lora");
  EXPECT_EQ(journal->front().status, CellStatus::kRuns);
  EXPECT_EQ(journal->front().recipe, "lora_finetune_single_device");
  // Its reports and history, in the folder it was given.
  StatusOr<std::string> support = ReadFile(results + "/SUPPORT.md");
  ASSERT_TRUE(support.ok());
  EXPECT_NE(support->find("| `my_lora` | `lora_finetune_single_device` | ✅ runs · 50 tok/s"), std::string::npos)
      << *support;
  EXPECT_TRUE(PathExists(results + "/index.html"));
  EXPECT_TRUE(PathExists(results + "/history/my_lora/cpu.jsonl"));
  // Nothing of the checkout's, and the user's file as written.
  EXPECT_EQ(*ReadFile(mine), text);
  for (const auto& [name, before] : builtins) EXPECT_EQ(co_.Read(name), before) << name;
  EXPECT_FALSE(PathExists(co_.dir() + "/reports/SUPPORT.md"));
  EXPECT_FALSE(PathExists(co_.dir() + "/reports/journal.jsonl"));
  EXPECT_FALSE(PathExists(co_.dir() + "/reports/history"));

  // One cell of it: a journal of its own, the same child.
  MatrixOptions cell = options_;
  cell.journal_path = results + "/cell.jsonl";
  StatusOr<MatrixRun> one = RunOneCell(co_.registry, "my_lora", "cpu", cell, setting_, out_);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->recorded.size(), 1u);
  EXPECT_EQ(one->recorded.front().key.config, "my_lora");
  EXPECT_EQ(ReadJournal(cell.journal_path, nullptr)->size(), 1u);
  EXPECT_EQ(*ReadFile(mine), text);
}

}  // namespace
}  // namespace tmx::matrix
