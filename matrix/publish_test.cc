#include "matrix/publish.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "matrix/journal.h"
#include "matrix/merge.h"
#include "matrix/report.h"
#include "matrix/support_block.h"
#include "matrix/testdata/checkout.h"

namespace tmx::matrix {
namespace {

class PublishTest : public ::testing::Test {
 protected:
  std::string reports() const { return co_.dir() + "/reports"; }
  std::string History(const std::string& config, const std::string& type) const {
    StatusOr<std::string> text = ReadFile(reports() + "/history/" + config + "/" + type + ".jsonl");
    return text.ok() ? *text : "(missing)";
  }

  testing::TestCheckout co_;
  std::ostringstream log_;
};

// The report files are one table: rendering follows it, and messages and help texts list it.
TEST(ReportFilesTest, RenderingAndMessagesFollowTheTable) {
  std::vector<std::string> files;
  for (const ReportFile& f : ReportFiles()) files.push_back(f.file);
  // The reports the README and CI name are among them (a new format is one more row, and no edit here).
  for (const char* documented : {"SUPPORT.md", "support.json", "index.html"}) {
    EXPECT_NE(std::find(files.begin(), files.end(), documented), files.end()) << documented;
  }
  History history;
  std::vector<GeneratedReport> rendered = RenderReports({}, history);
  ASSERT_EQ(rendered.size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(rendered[i].name, files[i]);
    EXPECT_FALSE(rendered[i].text.empty()) << files[i];
  }
  // Lists in messages: every file once, in table order, the last one joined by the conjunction.
  std::string and_list, or_list, plain;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string sep = i == 0 ? "" : i + 1 == files.size() ? " and " : ", ";
    and_list += sep + "reports/" + files[i];
    or_list += (i == 0 ? "" : i + 1 == files.size() ? " or " : ", ") + files[i];
    plain += (i == 0 ? "" : ", ") + files[i];
  }
  EXPECT_EQ(ReportFileList("reports/", "and"), and_list);
  EXPECT_EQ(ReportFileList("", "or"), or_list);
  EXPECT_EQ(ReportFileList("", ""), plain);
  EXPECT_EQ(ReportFileList("", "or").find("SUPPORT.md, support.json"), 0u);
}

TEST_F(PublishTest, WritesTheThreeReportsAndKeepsEveryRecordInHistory) {
  CellResult old = co_.Observe("tiny/lora", "cpu", CellStatus::kFails, "2026-12-01T10:00:00Z");
  CellResult now = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z");
  CellResult foreign = now;
  foreign.key.config = "elsewhere/config";
  ASSERT_TRUE(PublishResults(co_.registry, {old, now, foreign}, reports(), log_).ok()) << log_.str();
  // The configs keep the newest record; history keeps both, oldest first; a config that is not built in has
  // no place there.
  EXPECT_NE(co_.Read("tiny/lora").find("status: runs"), std::string::npos);
  EXPECT_EQ(History("tiny/lora", "cpu"), JournalLine(old) + "\n" + JournalLine(now) + "\n");
  EXPECT_FALSE(PathExists(reports() + "/history/elsewhere"));
  for (const char* name : {"SUPPORT.md", "support.json", "index.html"}) {
    EXPECT_TRUE(PathExists(reports() + "/" + name)) << name;
  }
  EXPECT_NE(ReadFile(reports() + "/index.html")->find("2 measurements in history"), std::string::npos);
  EXPECT_NE(log_.str().find("added 2 measurement(s) to " + reports() + "/history (1 file(s))"), std::string::npos)
      << log_.str();
  // Publishing the same records again changes nothing.
  std::string before = History("tiny/lora", "cpu");
  ASSERT_TRUE(PublishResults(co_.registry, {now, old}, reports(), log_).ok());
  EXPECT_EQ(History("tiny/lora", "cpu"), before);
}

// A config entry newer than the journals' record stays; one dated after this machine's clock does not, or it
// would stand for ever.
TEST_F(PublishTest, AnEntryDatedAheadOfTheClockIsReplacedNotKept) {
  CellResult record = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z");
  CellResult newer = co_.Observe("tiny/lora", "cpu", CellStatus::kFails, "2026-12-02T11:00:00Z");
  ASSERT_TRUE(WriteBackResults(co_.registry, {newer}, log_).ok());
  ASSERT_TRUE(WriteBackResults(co_.registry, {record}, log_).ok());
  EXPECT_NE(co_.Read("tiny/lora").find("status: fails"), std::string::npos);
  EXPECT_NE(log_.str().find("is newer than the journals' record"), std::string::npos) << log_.str();

  CellResult ahead = co_.Observe("tiny/lora", "cpu", CellStatus::kFails, "2099-01-01T00:00:00Z");
  ASSERT_TRUE(WriteBackResults(co_.registry, {ahead}, log_).ok());
  log_.str("");
  ASSERT_TRUE(WriteBackResults(co_.registry, {record}, log_).ok());
  EXPECT_NE(co_.Read("tiny/lora").find("status: runs"), std::string::npos) << co_.Read("tiny/lora");
  EXPECT_NE(log_.str().find("replaced " + co_.Path("tiny/lora") +
                            " cpu (amx, torch 2.11.0): its entry is dated 2099-01-01T00:00:00Z, after this "
                            "machine's clock ("),
            std::string::npos)
      << log_.str();
}

// A record measured beside other work (disturbed) publishes its status and memory but not its speeds: the
// config keeps the speeds of its previous entry, or has none.
TEST_F(PublishTest, ADisturbedRecordsSpeedIsNotPublished) {
  CellResult quiet = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z", 100);
  ASSERT_TRUE(WriteBackResults(co_.registry, {quiet}, log_).ok());
  const std::string before = co_.Read("tiny/lora");
  ASSERT_NE(before.find("tokens_per_second: 100"), std::string::npos) << before;

  CellResult busy = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T11:00:00Z", 12);
  busy.disturbed = "other processes used 70% of the machine's CPU while it ran (more than 25%)";
  busy.peak_memory_bytes = int64_t{1} << 30;
  log_.str("");
  ASSERT_TRUE(WriteBackResults(co_.registry, {busy}, log_).ok());
  const std::string after = co_.Read("tiny/lora");
  EXPECT_NE(after.find("tokens_per_second: 100"), std::string::npos) << after;
  EXPECT_EQ(after.find("tokens_per_second: 12"), std::string::npos) << after;
  EXPECT_NE(after.find("verified_at: \"2026-12-02T11:00:00Z\""), std::string::npos) << after;
  EXPECT_NE(after.find("peak_memory_gib: 1"), std::string::npos) << after;
  EXPECT_NE(log_.str().find("kept the speeds of " + co_.Path("tiny/lora") +
                            " cpu (amx, torch 2.11.0): the new record was measured beside other work (disturbed)"),
            std::string::npos)
      << log_.str();

  // A first record that is disturbed publishes no speed at all.
  CellResult first = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T11:00:00Z", 12);
  first.disturbed = busy.disturbed;
  ASSERT_TRUE(WriteBackResults(co_.registry, {first}, log_).ok());
  const std::string full = co_.Read("tiny/full");
  EXPECT_NE(full.find("status: runs"), std::string::npos) << full;
  EXPECT_EQ(full.find("tokens_per_second"), std::string::npos) << full;
}

// With --accept-disturbed (CellResult::disturbed_accepted) a disturbed speed is published marked where the config
// has no speed measured undisturbed, and replaces an earlier marked one; it never supersedes an undisturbed speed,
// and an undisturbed record clears the mark. The report says so beside the speed.
TEST_F(PublishTest, AnAcceptedDisturbedSpeedIsPublishedMarkedButNeverOverAnUndisturbedOne) {
  const std::string why = "other processes used 70% of the machine's CPU while it ran (more than 25%)";
  CellResult first = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T11:00:00Z", 12);
  first.disturbed = why;
  first.disturbed_accepted = true;
  ASSERT_TRUE(WriteBackResults(co_.registry, {first}, log_).ok());
  std::string full = co_.Read("tiny/full");
  EXPECT_NE(full.find("tokens_per_second: 12"), std::string::npos) << full;
  EXPECT_NE(full.find("speeds_disturbed: \"" + why + "\""), std::string::npos) << full;
  StatusOr<SupportEntries> entries = ReadSupportEntries(full, "tiny/full");
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_EQ(Measurements(entries->begin()->second), "12 tok/s (measured beside other work) · 1.50 GiB");

  CellResult again = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T12:00:00Z", 15);
  again.disturbed = why;
  again.disturbed_accepted = true;
  ASSERT_TRUE(WriteBackResults(co_.registry, {again}, log_).ok());
  EXPECT_NE(co_.Read("tiny/full").find("tokens_per_second: 15"), std::string::npos) << "a marked speed is replaced";

  CellResult quiet = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T13:00:00Z", 100);
  ASSERT_TRUE(WriteBackResults(co_.registry, {quiet}, log_).ok());
  full = co_.Read("tiny/full");
  EXPECT_NE(full.find("tokens_per_second: 100"), std::string::npos) << full;
  EXPECT_EQ(full.find("speeds_disturbed"), std::string::npos) << full;

  CellResult later = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T14:00:00Z", 9);
  later.disturbed = why;
  later.disturbed_accepted = true;
  WriteBackTally tally;
  PublishLog how;
  how.tally = &tally;
  how.verbose = false;
  ASSERT_TRUE(WriteBackResults(co_.registry, {later}, log_, how).ok());
  full = co_.Read("tiny/full");
  EXPECT_NE(full.find("tokens_per_second: 100"), std::string::npos) << "the undisturbed speed stands: " << full;
  EXPECT_EQ(full.find("speeds_disturbed"), std::string::npos) << full;
  EXPECT_EQ(tally.disturbed, 1);
  EXPECT_EQ(tally.disturbed_published, 0);
}

// Without verbose a publish writes no line per config or entry but counts each record once by what it did
// (new, updated, unchanged, kept), again by status and disturbance, and the files written: the run's tally.
TEST_F(PublishTest, AQuietPublishTalliesWhatItDidInsteadOfALinePerCell) {
  ASSERT_TRUE(WriteBackResults(co_.registry, {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z")},
                               log_).ok());
  ASSERT_TRUE(WriteBackResults(co_.registry, {co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-03T10:00:00Z")},
                               log_).ok());
  CellResult newer_lora = co_.Observe("tiny/lora", "cpu", CellStatus::kFails, "2026-12-04T10:00:00Z");
  CellResult same_full = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-03T10:00:00Z");
  CellResult older_full_cuda = co_.Observe("tiny/full", "cuda", CellStatus::kRuns, "2026-12-04T10:00:00Z");
  older_full_cuda.disturbed = "other processes used 70% of the machine's CPU while it ran (more than 25%)";
  log_.str("");
  WriteBackTally tally;
  ASSERT_TRUE(WriteBackResults(co_.registry, {newer_lora, same_full, older_full_cuda}, log_, {false, &tally}).ok());
  EXPECT_EQ(log_.str(), "");
  EXPECT_EQ(tally.updated, 1);      // tiny/lora on cpu: runs -> fails
  EXPECT_EQ(tally.unchanged, 1);    // tiny/full on cpu: the same record again
  EXPECT_EQ(tally.new_entries, 1);  // tiny/full on cuda
  EXPECT_EQ(tally.kept_newer, 0);
  EXPECT_EQ(tally.disturbed, 1);
  EXPECT_EQ(tally.files_written, 2);
  EXPECT_EQ(TallyLine(tally),
            "Tally: 3 cells: 1 new, 1 updated, 1 unchanged; 2 runs, 1 fails; 1 measured beside other work (status "
            "recorded, speeds kept); 2 config files updated");

  // An entry verified after the record stands; verbose writes its line as before.
  WriteBackTally again;
  CellResult older = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-01T10:00:00Z");
  ASSERT_TRUE(WriteBackResults(co_.registry, {older}, log_, {true, &again}).ok());
  EXPECT_EQ(again.kept_newer, 1);
  EXPECT_EQ(again.files_written, 0);
  EXPECT_NE(log_.str().find("is newer than the journals' record"), std::string::npos) << log_.str();
  EXPECT_EQ(TallyLine(again), "Tally: 1 cell: 1 kept (a newer entry stands); 1 runs; 0 config files updated");
  EXPECT_EQ(TallyLine(WriteBackTally{}), "");
}

TEST_F(PublishTest, TemporaryFilesOfKilledWritesAreRemovedAndThoseOfLiveOnesKept) {
  // What a write-back killed between writing its temporary file and renaming it leaves behind.
  const std::string dead = co_.configs_dir() + "/tiny/" + AtomicWriteTempName("lora.yaml", 4194302, 0);
  const std::string live = co_.configs_dir() + "/tiny/" + AtomicWriteTempName("full.yaml", ::getpid(), 0);
  ASSERT_TRUE(MakeDirs(reports()).ok());
  const std::string dead_report = reports() + "/" + AtomicWriteTempName("SUPPORT.md", 4194302, 1);
  for (const std::string& path : {dead, live, dead_report}) {
    std::ofstream(path) << "partial";
  }
  CellResult now = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z");
  ASSERT_TRUE(PublishResults(co_.registry, {now}, reports(), log_).ok()) << log_.str();
  EXPECT_FALSE(PathExists(dead));
  EXPECT_FALSE(PathExists(dead_report));
  EXPECT_TRUE(PathExists(live));  // its writer (this process) may still rename it
  EXPECT_NE(log_.str().find("removed " + dead + ", left by a write that was killed"), std::string::npos)
      << log_.str();
}

TEST_F(PublishTest, MergeAddsEveryMergedRecordToHistoryNotOnlyTheNewest) {
  std::string a = co_.dir() + "/a.jsonl", b = co_.dir() + "/b.jsonl";
  CellResult older = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-01T10:00:00Z", 90);
  CellResult newer = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z", 110);
  ASSERT_TRUE(AppendToJournal(a, older).ok());
  ASSERT_TRUE(AppendToJournal(b, newer).ok());
  StatusOr<JournalSet> set = LoadJournals({b, a}, co_.registry);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  MergeOptions options;
  options.journal_out = reports() + "/journal.jsonl";
  options.reports_dir = reports();
  ASSERT_TRUE(MergeJournals(*set, co_.registry, options, log_).ok()) << log_.str();
  // The combined journal keeps the newest; history keeps both.
  EXPECT_EQ(ReadFile(options.journal_out).value(), JournalLine(newer) + "\n");
  EXPECT_EQ(History("tiny/full", "cpu"), JournalLine(older) + "\n" + JournalLine(newer) + "\n");
}

TEST_F(PublishTest, ADamagedHistoryFileStopsThePublishWithNothingWritten) {
  ASSERT_TRUE(PublishResults(co_.registry, {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-01T10:00:00Z")},
                             reports(), log_)
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(reports() + "/history/tiny/lora/cpu.jsonl", "{broken\n").ok());
  std::string config = co_.Read("tiny/full");
  std::string page = ReadFile(reports() + "/index.html").value();
  Status s = PublishResults(co_.registry, {co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z")},
                            reports(), log_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("history/tiny/lora/cpu.jsonl:1: not a JSON record"), std::string::npos) << s.message();
  EXPECT_EQ(co_.Read("tiny/full"), config);
  EXPECT_FALSE(PathExists(reports() + "/history/tiny/full"));
  EXPECT_EQ(ReadFile(reports() + "/index.html").value(), page);
}

}  // namespace
}  // namespace tmx::matrix
