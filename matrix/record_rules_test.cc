#include "matrix/record_rules.h"

#include <gtest/gtest.h>

#include <set>

#include "base/clock.h"
#include "base/file_util.h"
#include "matrix/journal.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

constexpr char kT[] = "2026-12-01T10:00:00Z";

// A record that keeps every rule: a cpu cell that ran four steps in 0.46 s.
CellResult Ran() {
  CellResult r;
  r.key = {"tiny/full_single_device", "cpu"};
  r.recipe = "full_finetune_single_device";
  r.device_type = "cpu";
  r.status = CellStatus::kRuns;
  r.exit_code = 0;
  r.wall_time_s = 0.46;
  r.step_times_s = {0.05, 0.04, 0.04, 0.05};
  r.warmup_steps = 1;
  r.step_time_median_s = 0.045;
  r.tokens_per_second = 9000;
  r.flops_per_second = 2e10;
  r.peak_flops = 1e11;
  r.flops_dtype = "fp32";
  r.provenance.verified_at = kT;
  return r;
}

class RecordRulesTest : public ::testing::Test {
 protected:
  // What reading a journal holding `r` says ("" when it reads).
  std::string ReadError(const CellResult& r) {
    EXPECT_TRUE(WriteFileAtomically(path_, JournalLine(r) + "\n").ok());
    StatusOr<std::vector<CellResult>> read = ReadJournal(path_, nullptr, nullptr, *ParseUtc("2026-12-02T00:00:00Z"));
    return read.ok() ? "" : read.status().message();
  }
  test::ScratchDir dir_{"record_rules_test"};
  std::string path_ = dir_.path() + "/merged.jsonl";
};

TEST_F(RecordRulesTest, ARecordThatKeepsEveryRuleReads) { EXPECT_EQ(ReadError(Ran()), ""); }

// Each was merged, published and passed `check` (issue 55's hostile journals).
TEST_F(RecordRulesTest, EveryContradictionNamesItsRuleAndFields) {
  struct Case {
    const char* rule;
    std::string contradiction;
    CellResult record;
  };
  std::vector<Case> cases;
  CellResult crashed = Ran();
  crashed.exit_code = 139;
  crashed.term_signal = 11;
  cases.push_back({"status_vs_exit", "exit_code 139 and term_signal 11 together", crashed});
  CellResult killed = Ran();
  killed.exit_code.reset();
  killed.term_signal = 11;
  cases.push_back({"status_vs_exit", "status \"runs\" with term_signal 11: a killed run ran", killed});
  CellResult failed = Ran();
  failed.exit_code = 1;
  cases.push_back({"status_vs_exit", "status \"runs\" with exit_code 1", failed});
  CellResult untimed = Ran();
  untimed.step_times_s.clear();
  untimed.warmup_steps = 0;
  untimed.step_time_median_s.reset();
  untimed.flops_per_second.reset();
  untimed.tokens_per_second = 1e6;
  cases.push_back({"speed_vs_steps", "tokens_per_second 1000000.000 without step_times_s", untimed});
  CellResult median = Ran();
  median.step_time_median_s = 7;
  cases.push_back({"speed_vs_steps", "step_time_median_s 7.000 outside the timed steps'", median});
  CellResult long_steps = Ran();
  long_steps.step_times_s = {1e9, 1e9};
  long_steps.warmup_steps = 0;
  long_steps.step_time_median_s = 1e9;
  cases.push_back({"times_within_wall", "step_times_s add up to", long_steps});
  CellResult proxy = Ran();
  proxy.proxy_layers = {1, 2};
  proxy.proxy_step_times_s = {1, 500};
  cases.push_back({"times_within_wall", "a proxy_step_times_s of 500.000 s", proxy});
  CellResult beyond_peak = Ran();
  beyond_peak.flops_per_second = 1e25;  // 10^14 % of the peak
  cases.push_back({"peak_share", "flops_per_second reaches", beyond_peak});
  CellResult huge_reason = Ran();
  huge_reason.status = CellStatus::kFails;
  huge_reason.exit_code = 1;
  huge_reason.reason = std::string(1 << 20, 'x');
  cases.push_back({"sizes", "reason holds 1048576 bytes, over the 65536 a text field may hold", huge_reason});
  CellResult many = Ran();
  many.problems.assign(5000, "p");
  cases.push_back({"sizes", "problems holds 5000 items", many});
  CellResult lone = Ran();
  lone.extrapolated_step_time_s = 3;
  cases.push_back({"proxy_lists", "extrapolations from 0 proxy_layers", lone});
  CellResult uneven = Ran();
  uneven.proxy_layers = {1, 2};
  uneven.proxy_peak_memory_bytes = {1};
  cases.push_back({"proxy_lists", "proxy_peak_memory_bytes holds 1 values for 2 proxy_layers", uneven});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.rule);
    const std::string message = ReadError(c.record);
    EXPECT_EQ(message.rfind(path_ + ":1: cell record breaks rule " + c.rule + " (", 0), 0u) << message.substr(0, 400);
    EXPECT_NE(message.find(c.contradiction), std::string::npos) << message.substr(0, 400);
    EXPECT_NE(message.find("; fix: rerun the cell, or delete that line"), std::string::npos);
  }
}

TEST_F(RecordRulesTest, ALineOverTheBoundIsRefusedBeforeItIsParsed) {
  // Valid JSON, refused by its size alone: a 100 MB line used to be read and merged into history, and a 5 MiB
  // reason written into a config.
  CellResult big = Ran();
  big.output_tail = std::string(5 << 20, 'y');
  CellResult reason = Ran();
  reason.status = CellStatus::kFails;
  reason.exit_code = 1;
  reason.reason = std::string(5 << 20, 'x');
  for (const CellResult& r : {big, reason}) {
    const std::string message = ReadError(r);
    EXPECT_EQ(message.rfind(path_ + ":1: a journal line of ", 0), 0u) << message.substr(0, 300);
    EXPECT_NE(message.find("over the 4194304 one record may hold"), std::string::npos) << message.substr(0, 300);
  }
}

TEST(RecordRulesTableTest, EveryRuleHasANameAndSaysWhat) {
  std::set<std::string> names;
  for (const RecordRule& rule : RecordRules()) {
    EXPECT_TRUE(names.insert(rule.name).second) << rule.name;
    EXPECT_NE(std::string(rule.says), "") << rule.name;
    EXPECT_EQ(rule.broken(Ran()), "") << rule.name;
  }
}

TEST(RecordRulesTableTest, AConfigPastItsReadersLimitAndAnEntryPastThePeakAreNamed) {
  EXPECT_TRUE(CheckConfigFitsReaders("configs/a.yaml", 4 << 20).ok());
  Status s = CheckConfigFitsReaders("configs/a.yaml", (4 << 20) + 1);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("configs/a.yaml: its support block would make it 4.00 MiB, over the 4.00 MiB a config "
                              "may hold",
                              0),
            0u)
      << s.message();
  SupportEntry entry;
  entry.status = "runs";
  entry.peak_share = 0.4;
  EXPECT_EQ(SupportEntryContradiction(entry), "");
  entry.peak_share = 1e12;
  EXPECT_NE(SupportEntryContradiction(entry).find("peak_share"), std::string::npos);
  entry.peak_share.reset();
  entry.reason = std::string(100000, 'r');
  EXPECT_EQ(SupportEntryContradiction(entry), "reason holds 100000 bytes, over the 65536 a text field may hold");
}

}  // namespace
}  // namespace tmx::matrix
