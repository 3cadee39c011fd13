#include "matrix/compare.h"

#include <gtest/gtest.h>

#include <sstream>

#include "base/file_util.h"
#include "matrix/journal.h"
#include "matrix/testdata/git_repo.h"
#include "matrix/testdata/report_fixture.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

using testing::FixtureRecord;

const std::string kCommitA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const std::string kCommitB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

// A record of `config` on `device`; tokens/s of 1000 make a step of 2.048 s, long enough to compare.
CellResult Rec(const std::string& config, const std::string& device, CellStatus status, double tps = 1000,
               bool after = false) {
  return FixtureRecord(config, "lora_finetune_single_device", device, status,
                       after ? "2026-11-29T10:00:00Z" : "2026-11-21T10:00:00Z", tps, 1.0, after ? kCommitB : kCommitA);
}

std::string Text(const std::vector<CellResult>& records) {
  std::string text;
  for (const CellResult& r : records) text += JournalLine(r) + "\n";
  return text;
}

TEST(CompareTest, SortsEveryCellIntoWhatChanged) {
  const CellStatus runs = CellStatus::kRuns, fails = CellStatus::kFails, timeout = CellStatus::kTimeout;
  std::vector<CellResult> before = {Rec("a", "cpu", runs),       Rec("b", "cpu", fails),  Rec("c", "cpu", fails),
                                    Rec("d", "cpu", runs),       Rec("e", "cpu", runs),   Rec("f", "cpu", runs),
                                    Rec("gone", "cuda:0", runs), Rec("same", "cpu", runs)};
  std::vector<CellResult> after = {Rec("a", "cpu", fails, 0, true),     Rec("b", "cpu", runs, 900, true),
                                   Rec("c", "cpu", timeout, 0, true),   Rec("d", "cpu", runs, 700, true),
                                   Rec("e", "cpu", runs, 1300, true),   Rec("f", "cpu", runs, 950, true),
                                   Rec("new", "cuda:1", runs, 5, true), Rec("same", "cpu", runs, 1000, true)};
  Comparison c = CompareRecords(before, after, {});
  std::vector<std::pair<ChangeKind, std::string>> got;
  for (const CellChange& change : c.changes) got.emplace_back(change.kind, change.config + "@" + change.column);
  std::vector<std::pair<ChangeKind, std::string>> want = {
      {ChangeKind::kNewlyBroken, "a@cpu (avx512_bf16, torch 2.11.0)"},
      {ChangeKind::kNewlyFixed, "b@cpu (avx512_bf16, torch 2.11.0)"},
      {ChangeKind::kStatusChanged, "c@cpu (avx512_bf16, torch 2.11.0)"},
      {ChangeKind::kSlower, "d@cpu (avx512_bf16, torch 2.11.0)"},
      {ChangeKind::kFaster, "e@cpu (avx512_bf16, torch 2.11.0)"},
      {ChangeKind::kAppeared, "new@cuda (torch 2.11.0)"},
      {ChangeKind::kDisappeared, "gone@cuda (torch 2.11.0)"}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(c.unchanged, 2);  // f (5% slower is noise) and same
  EXPECT_EQ(c.speed_compared, 4);
  EXPECT_EQ(c.Regressions(), 2);

  std::ostringstream out;
  PrintComparison({"old.jsonl", before}, {"new.jsonl", after}, c, {}, out);
  EXPECT_EQ(out.str(),
            "tune-matrix compare: old.jsonl (8 cells) -> new.jsonl (8 cells)\n"
            "newly broken (1):\n"
            "  a  cpu (avx512_bf16, torch 2.11.0)  runs -> fails: exited with code 1: RuntimeError: CUDA out of memory "
            "<tried 2 GiB> & \"more\""
            "  (bbbbbbbbbbbb, 2026-11-29T10:00:00Z)\n"
            "newly fixed (1):\n"
            "  b  cpu (avx512_bf16, torch 2.11.0)  fails -> runs, 900.0 tok/s  (bbbbbbbbbbbb, 2026-11-29T10:00:00Z)\n"
            "status changed (1):\n"
            "  c  cpu (avx512_bf16, torch 2.11.0)  fails -> timeout: timeout: not started  (bbbbbbbbbbbb, "
            "2026-11-29T10:00:00Z)\n"
            "slower (1):\n"
            "  d  cpu (avx512_bf16, torch 2.11.0)  1000.0 -> 700.0 tok/s (-30.0%; allowed 10.0% = max(--max-slowdown "
            "10.0%, 3.0 x combined "
            "spread 2.8%))  (bbbbbbbbbbbb, 2026-11-29T10:00:00Z)\n"
            "faster (1):\n"
            "  e  cpu (avx512_bf16, torch 2.11.0)  1000.0 -> 1300.0 tok/s (+30.0%; allowed 10.0% = max(--max-slowdown "
            "10.0%, 3.0 x combined "
            "spread 2.8%))  (bbbbbbbbbbbb, 2026-11-29T10:00:00Z)\n"
            "appeared (1):\n"
            "  new  cuda (torch 2.11.0)  runs  (bbbbbbbbbbbb, 2026-11-29T10:00:00Z)\n"
            "disappeared (1):\n"
            "  gone  cuda (torch 2.11.0)  was runs  (aaaaaaaaaaaa, 2026-11-21T10:00:00Z)\n"
            "tune-matrix compare: 2 regression(s) (1 newly broken, 1 slower); 2 cells unchanged; tokens/s compared "
            "for 4 (0 with steps under --min-step-time)\n");
}

TEST(CompareTest, NoChangesAndTheNewestRecordPerCell) {
  // Each side's newest record of a cell counts: a fixed cell's older failure does not.
  std::vector<CellResult> before = {Rec("a", "cpu", CellStatus::kRuns)};
  std::vector<CellResult> after = {Rec("a", "cpu", CellStatus::kFails), Rec("a", "cpu", CellStatus::kRuns, 1000, true)};
  Comparison c = CompareRecords(before, after, {});
  EXPECT_TRUE(c.changes.empty());
  std::ostringstream out;
  PrintComparison({"x", before}, {"y", after}, c, {}, out);
  EXPECT_EQ(out.str(),
            "tune-matrix compare: x (1 cell) -> y (1 cell)\ntune-matrix compare: no changes; 1 cell unchanged; "
            "tokens/s compared for 1 (0 with steps under --min-step-time)\n");
}

TEST(CompareTest, ShortStepsAreNotCompared) {
  // 100000 tok/s make a 0.02 s step: noise, not speed.
  Comparison c = CompareRecords({Rec("a", "cpu", CellStatus::kRuns, 100000)},
                                {Rec("a", "cpu", CellStatus::kRuns, 50000, true)}, {});
  EXPECT_TRUE(c.changes.empty());
  EXPECT_EQ(c.speed_too_short, 1);
  SpeedNoise everything;
  everything.min_step_time_s = 0;
  c = CompareRecords({Rec("a", "cpu", CellStatus::kRuns, 100000)}, {Rec("a", "cpu", CellStatus::kRuns, 50000, true)},
                     everything);
  ASSERT_EQ(c.changes.size(), 1u);
  EXPECT_EQ(c.changes[0].kind, ChangeKind::kSlower);
}

TEST(CompareTest, ADisturbedSpeedIsNotCompared) {
  // 1000 -> 100 tok/s would be slower, but the later cell ran beside other work: its status counts (still
  // runs, unchanged), its speed is not compared; the summary says so.
  CellResult busy = Rec("a", "cpu", CellStatus::kRuns, 100, true);
  busy.disturbed = "other processes used 80% of the machine's CPU while it ran (more than 25%)";
  Comparison c = CompareRecords({Rec("a", "cpu", CellStatus::kRuns)}, {busy}, {});
  EXPECT_TRUE(c.changes.empty());
  EXPECT_EQ(c.speed_disturbed, 1);
  EXPECT_EQ(c.speed_compared, 0);
  EXPECT_EQ(c.unchanged, 1);
  std::ostringstream out;
  PrintComparison({"x", {Rec("a", "cpu", CellStatus::kRuns)}}, {"y", {busy}}, c, {}, out);
  EXPECT_NE(out.str().find("(0 with steps under --min-step-time; 1 not compared, measured beside other work)"),
            std::string::npos)
      << out.str();
  // A status change is still a change.
  CellResult broken = Rec("a", "cpu", CellStatus::kFails, 0, true);
  broken.disturbed = busy.disturbed;
  c = CompareRecords({Rec("a", "cpu", CellStatus::kRuns)}, {broken}, {});
  ASSERT_EQ(c.changes.size(), 1u);
  EXPECT_EQ(c.changes[0].kind, ChangeKind::kNewlyBroken);
}

// Generation cells (no loss, a prefill) compare by their decode tokens/s like any cell, read from journals.
TEST(CompareTest, GenerationCellsWithoutLossesCompareByTheirDecodeSpeed) {
  auto generation = [](double tps, bool after) {
    CellResult r = Rec("gen", "cpu", CellStatus::kRuns, tps, after);
    r.recipe = "generate";
    r.first_loss.reset();
    r.last_loss.reset();
    r.time_to_first_token_s = 0.25;
    r.prefill_tokens_per_second = 2048;
    return r;
  };
  test::ScratchDir dir("compare_test");
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/a.jsonl", Text({generation(1000, false)})).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/b.jsonl", Text({generation(700, true)})).ok());
  StatusOr<CompareSide> a = LoadCompareSide(dir.path() + "/a.jsonl", dir.path(), "reports/journal.jsonl");
  StatusOr<CompareSide> b = LoadCompareSide(dir.path() + "/b.jsonl", dir.path(), "reports/journal.jsonl");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Comparison c = CompareRecords(a->records, b->records, {});
  ASSERT_EQ(c.changes.size(), 1u);
  EXPECT_EQ(c.changes[0].kind, ChangeKind::kSlower);
  EXPECT_FALSE(c.changes[0].after->first_loss.has_value());
  EXPECT_EQ(c.changes[0].after->time_to_first_token_s, std::optional<double>(0.25));
}

TEST(CompareTest, LoadsJournalFilesAndCommits) {
  testing::GitRepo repo;
  std::vector<CellResult> first = {Rec("a", "cpu", CellStatus::kRuns)};
  std::vector<CellResult> second = {Rec("a", "cpu", CellStatus::kFails, 0, true)};
  std::string c1 = repo.Commit("reports/journal.jsonl", Text(first));
  repo.Commit("reports/journal.jsonl", Text(second));

  StatusOr<CompareSide> side = LoadCompareSide("HEAD~1", repo.dir(), "reports/journal.jsonl");
  ASSERT_TRUE(side.ok()) << side.status().ToString();
  EXPECT_EQ(side->label, "HEAD~1 (" + c1.substr(0, 12) + "):reports/journal.jsonl");
  ASSERT_EQ(side->records.size(), 1u);
  EXPECT_EQ(side->records[0].status, CellStatus::kRuns);
  side = LoadCompareSide(c1, repo.dir(), "reports/journal.jsonl");
  ASSERT_TRUE(side.ok()) << side.status().ToString();
  EXPECT_EQ(side->label, c1 + ":reports/journal.jsonl");

  std::string file = repo.dir() + "/reports/journal.jsonl";
  side = LoadCompareSide(file, repo.dir(), "reports/journal.jsonl");
  ASSERT_TRUE(side.ok()) << side.status().ToString();
  EXPECT_EQ(side->label, file);
  EXPECT_EQ(side->records[0].status, CellStatus::kFails);
}

TEST(CompareTest, BadInputIsOneErrorNamingIt) {
  testing::GitRepo repo;
  std::string bare = repo.Commit("README", "no journal here\n");
  std::string journal_text = Text({Rec("a", "cpu", CellStatus::kRuns)});
  std::string broken = repo.Commit("reports/journal.jsonl", journal_text + "not a record\n");
  ASSERT_TRUE(WriteFileAtomically(repo.dir() + "/config.yaml", "lr: 1\n").ok());

  struct Case {
    std::string spec;
    Status::Code code;
    std::string message;
  } cases[] = {
      {repo.dir() + "/config.yaml", Status::Code::kInvalidArgument, repo.dir() + "/config.yaml:1: not a JSON record"},
      {"no-such-thing.jsonl", Status::Code::kInvalidArgument,
       "no journal file 'no-such-thing.jsonl', and 'no-such-thing.jsonl' is not a commit of the git repository at " +
           repo.dir()},
      {bare, Status::Code::kNotFound, bare.substr(0, 12) + ":reports/journal.jsonl: not in that commit"},
      {broken, Status::Code::kInvalidArgument, broken + ":reports/journal.jsonl:2: not a JSON record"},
  };
  for (const Case& c : cases) {
    StatusOr<CompareSide> side = LoadCompareSide(c.spec, repo.dir(), "reports/journal.jsonl");
    ASSERT_FALSE(side.ok()) << c.spec;
    EXPECT_EQ(side.status().code(), c.code) << c.spec << ": " << side.status().message();
    EXPECT_EQ(side.status().message().rfind(c.message, 0), 0u) << c.spec << ": " << side.status().message();
  }
}

}  // namespace
}  // namespace tmx::matrix
