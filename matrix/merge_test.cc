#include "matrix/merge.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <sstream>

#include "base/file_util.h"
#include "matrix/journal.h"
#include "matrix/support_block.h"
#include "matrix/testdata/checkout.h"

namespace tmx::matrix {
namespace {

using testing::TestCheckout;
constexpr const char* kCpu = TestCheckout::kCpu;
constexpr const char* kCuda = TestCheckout::kCuda;

class MergeTest : public ::testing::Test {
 protected:
  std::string Journal(const std::string& name, const std::vector<CellResult>& cells) {
    std::string path = co_.dir() + "/" + name;
    for (const CellResult& c : cells) EXPECT_TRUE(AppendToJournal(path, c).ok());
    return path;
  }
  MergeOptions Options() {
    MergeOptions o;
    o.journal_out = co_.dir() + "/merged.jsonl";
    o.reports_dir = co_.dir() + "/reports";
    return o;
  }
  Status Merge(const std::vector<std::string>& journals) {
    StatusOr<JournalSet> set = LoadJournals(journals, co_.registry);
    if (!set.ok()) return set.status();
    std::ostringstream log;
    return MergeJournals(*set, co_.registry, Options(), log);
  }

  testing::TestCheckout co_;
};

TEST_F(MergeTest, JournalsFromTwoMachinesFillEachDeviceWithProvenance) {
  std::string cpu =
      Journal("cpu.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z", 812.4),
                            co_.Observe("tiny/full", "cpu", CellStatus::kTooLarge, "2026-12-02T10:00:01Z")});
  CellResult gpu_fails = co_.Observe("tiny/lora", "cuda:0", CellStatus::kFails, "2026-12-02T11:00:00Z");
  std::string cuda = Journal("cuda.jsonl", {gpu_fails});
  ASSERT_TRUE(Merge({cpu, cuda}).ok());

  ConfigSupport claims = ReadConfigSupport(co_.Read("tiny/lora"), "x").value();
  EXPECT_EQ(claims.supported_devices, std::vector<std::string>({kCpu}));
  ASSERT_EQ(claims.entries.size(), 2u);
  EXPECT_EQ(claims.entries[kCpu].status, "runs");
  EXPECT_EQ(*claims.entries[kCpu].tokens_per_second, 812.4);
  EXPECT_EQ(claims.entries[kCpu].host, "host-cpu");
  EXPECT_EQ(claims.entries[kCpu].job, "job-cpu");
  EXPECT_EQ(claims.entries[kCpu].commit, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(claims.entries[kCuda].status, "fails");
  EXPECT_EQ(claims.entries[kCuda].reason, "fails for a reason");
  EXPECT_EQ(claims.entries[kCuda].host, "host-cuda");
  EXPECT_EQ(ReadConfigSupport(co_.Read("tiny/full"), "x")->entries[kCpu].status, "too_large");
  // The user's bytes stay in front of the block; the untouched config gets no block.
  EXPECT_EQ(co_.Read("tiny/lora").rfind("# LoRA, small\nbatch_size: 4  # per step\nlr: 3e-4\n# --- BEGIN", 0), 0u);
  EXPECT_EQ(co_.Read("tiny/lora_big"), "batch_size: 64\nlr: 3e-4\n");
  EXPECT_TRUE(PathExists(co_.dir() + "/reports/SUPPORT.md"));
  EXPECT_TRUE(PathExists(co_.dir() + "/reports/support.json"));
  // The combined journal holds each cell once.
  StatusOr<std::vector<CellResult>> merged = ReadJournal(co_.dir() + "/merged.jsonl", nullptr);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->size(), 3u);
}

// A record of another CPU class or torch version is another column: merged beside the others' entries, never over
// them, however much newer, and kept in the combined journal beside them.
TEST_F(MergeTest, RecordsOfAnotherClassOrTorchAreColumnsOfTheirOwn) {
  CellResult amx = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z", 812.4);
  CellResult avx2 = co_.Observe("tiny/lora", "cpu", CellStatus::kTooSlow, "2026-12-03T10:00:00Z");
  avx2.provenance.cpu_class = "avx2";
  CellResult newer_torch = co_.Observe("tiny/lora", "cpu", CellStatus::kFails, "2026-12-04T10:00:00Z");
  newer_torch.provenance.torch_version = "2.15.0";
  ASSERT_TRUE(Merge({Journal("amx.jsonl", {amx}), Journal("other.jsonl", {avx2, newer_torch})}).ok());
  ConfigSupport claims = ReadConfigSupport(co_.Read("tiny/lora"), "x").value();
  ASSERT_EQ(claims.entries.size(), 3u);
  EXPECT_EQ(claims.entries[kCpu].status, "runs");
  EXPECT_EQ(*claims.entries[kCpu].tokens_per_second, 812.4);
  EXPECT_EQ(claims.entries["cpu (avx2, torch 2.11.0)"].status, "too_slow");
  EXPECT_EQ(claims.entries["cpu (avx2, torch 2.11.0)"].cpu_class, "avx2");
  EXPECT_EQ(claims.entries["cpu (amx, torch 2.15.0)"].status, "fails");
  EXPECT_EQ(claims.supported_devices, std::vector<std::string>({kCpu}));
  StatusOr<std::vector<CellResult>> merged = ReadJournal(co_.dir() + "/merged.jsonl", nullptr);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->size(), 3u);
  // The SUPPORT.md table has one column each.
  std::string support = ReadFile(co_.dir() + "/reports/SUPPORT.md").value();
  EXPECT_NE(support.find("| config | recipe | cpu (amx, torch 2.11.0) | cpu (amx, torch 2.15.0) | cpu (avx2, torch "
                         "2.11.0) |"),
            std::string::npos)
      << support;
}

TEST_F(MergeTest, NewestRecordWinsWhateverTheOrderAndSameInputGivesSameBytes) {
  std::string older =
      Journal("older.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kFails, "2026-12-01T09:00:00Z")});
  std::string newer =
      Journal("newer.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T09:00:00Z")});
  ASSERT_TRUE(Merge({newer, older}).ok());
  std::string first = co_.Read("tiny/lora");
  std::string first_journal = ReadFile(co_.dir() + "/merged.jsonl").value();
  EXPECT_EQ(ReadConfigSupport(first, "x")->entries[kCpu].status, "runs");
  ASSERT_TRUE(Merge({older, newer}).ok());
  EXPECT_EQ(co_.Read("tiny/lora"), first);
  EXPECT_EQ(ReadFile(co_.dir() + "/merged.jsonl").value(), first_journal);
}

TEST_F(MergeTest, AnOlderJournalDoesNotRollBackANewerEntry) {
  std::string newer =
      Journal("newer.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T09:00:00Z")});
  std::string older =
      Journal("older.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kFails, "2026-12-01T09:00:00Z"),
                              co_.Observe("tiny/full", "cpu", CellStatus::kFails, "2026-12-01T09:00:00Z")});
  ASSERT_TRUE(Merge({newer}).ok());
  ASSERT_TRUE(Merge({older}).ok());
  EXPECT_EQ(ReadConfigSupport(co_.Read("tiny/lora"), "x")->entries[kCpu].status, "runs");
  EXPECT_EQ(ReadConfigSupport(co_.Read("tiny/full"), "x")->entries[kCpu].status, "fails");  // nothing newer there
}

TEST_F(MergeTest, TiesWithinASecondDoNotDependOnTheOrderOfJournals) {
  std::string a = Journal("a.jsonl", {co_.Observe("tiny/lora", "cuda:0", CellStatus::kFails, "2026-12-02T09:00:00Z")});
  std::string b = Journal("b.jsonl", {co_.Observe("tiny/lora", "cuda:1", CellStatus::kRuns, "2026-12-02T09:00:00Z")});
  ASSERT_TRUE(Merge({a, b}).ok());
  std::string first = co_.Read("tiny/lora");
  co_.Write("tiny/lora", "# LoRA, small\nbatch_size: 4  # per step\nlr: 3e-4\n");
  ASSERT_TRUE(Merge({b, a}).ok());
  EXPECT_EQ(co_.Read("tiny/lora"), first);
  EXPECT_EQ(ReadConfigSupport(first, "x")->entries[kCuda].status, "runs");  // cuda:1 over cuda:0
}

TEST_F(MergeTest, TwoGpusOfOneTypeShareOneEntryNewestWins) {
  std::string j =
      Journal("gpus.jsonl", {co_.Observe("tiny/lora", "cuda:1", CellStatus::kRuns, "2026-12-02T09:00:05Z"),
                             co_.Observe("tiny/lora", "cuda:0", CellStatus::kFails, "2026-12-02T09:00:01Z")});
  ASSERT_TRUE(Merge({j}).ok());
  ConfigSupport claims = ReadConfigSupport(co_.Read("tiny/lora"), "x").value();
  ASSERT_EQ(claims.entries.size(), 1u);
  EXPECT_EQ(claims.entries[kCuda].status, "runs");
}

TEST_F(MergeTest, MalformedOrForeignJournalsAreRejectedNamingFileAndLineAndNothingIsWritten) {
  std::string good =
      Journal("good.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z")});
  CellResult foreign = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z");
  foreign.key.config = "other_project/7B_lora";
  CellResult wrong_recipe = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z");
  wrong_recipe.recipe = "lora_finetune_single_device";
  CellResult wrong_type = co_.Observe("tiny/full", "cuda:0", CellStatus::kRuns, "2026-12-02T10:00:00Z");
  wrong_type.device_type = "cpu";
  CellResult undated = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "");
  CellResult fraction = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00.5Z");
  struct Case {
    std::string name;
    std::string text;
    std::string expect;
  } cases[] = {
      {"syntax.jsonl", ToJson(foreign).dump() + "\n{not json\n", "syntax.jsonl:2: not a JSON record"},
      {"foreign.jsonl", "\n" + ToJson(foreign).dump() + "\n",
       "foreign.jsonl:2: config \"other_project/7B_lora\" is not a built-in config of this checkout"},
      {"recipe.jsonl", ToJson(wrong_recipe).dump() + "\n",
       "recipe.jsonl:1: config \"tiny/full\" is recorded with recipe \"lora_finetune_single_device\" but belongs to "
       "recipe \"full_finetune_single_device\""},
      {"type.jsonl", ToJson(wrong_type).dump() + "\n",
       "type.jsonl:1: cell record device type \"cpu\" does not match device \"cuda:0\""},
      {"undated.jsonl", ToJson(undated).dump() + "\n",
       "undated.jsonl:1: cell record provenance.verified_at \"\" is not a UTC time of the form 2026-12-02T11:30:00Z"},
      {"fraction.jsonl", ToJson(fraction).dump() + "\n",
       "fraction.jsonl:1: cell record provenance.verified_at \"2026-12-02T10:00:00.5Z\" is not a UTC time"},
      {"schema.jsonl", "{\"schema_version\": 99}\n", "schema.jsonl:1:"},
  };
  std::string before = co_.Read("tiny/lora");
  for (const Case& c : cases) {
    std::string path = co_.dir() + "/" + c.name;
    ASSERT_TRUE(WriteFileAtomically(path, c.text).ok());
    Status s = Merge({good, path});
    EXPECT_FALSE(s.ok()) << c.name;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.name << ": " << s.message();
    EXPECT_NE(s.message().find("fix:"), std::string::npos) << s.message();
    EXPECT_EQ(co_.Read("tiny/lora"), before) << c.name;
    EXPECT_FALSE(PathExists(co_.dir() + "/merged.jsonl")) << c.name;
    EXPECT_FALSE(PathExists(co_.dir() + "/reports")) << c.name;
  }
  Status missing = Merge({good, co_.dir() + "/nope.jsonl"});
  EXPECT_EQ(missing.code(), Status::Code::kNotFound);
  EXPECT_NE(missing.message().find("nope.jsonl: no such journal"), std::string::npos) << missing.message();
}

// Each of these used to merge as zero cells (replacing the combined journal with an empty one), hang, or
// abort with an uncaught exception; each must now fail naming the path, before anything is written.
TEST_F(MergeTest, AnythingButARegularJournalWithRecordsIsRefusedAndNothingIsWritten) {
  std::string good =
      Journal("good.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z")});
  std::string line = ToJson(co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z")).dump();
  std::string huge = line;
  huge.replace(huge.find("\"wall_time_s\":12.5"), 18, "\"wall_time_s\":-1e999");
  CellResult ahead = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2036-12-02T10:00:00Z");
  ASSERT_TRUE(WriteFileAtomically(co_.dir() + "/empty.jsonl", "").ok());
  ASSERT_TRUE(WriteFileAtomically(co_.dir() + "/blank.jsonl", "\n  \n").ok());
  ASSERT_TRUE(WriteFileAtomically(co_.dir() + "/torn.jsonl", line.substr(0, 40)).ok());
  ASSERT_TRUE(WriteFileAtomically(co_.dir() + "/huge.jsonl", huge + "\n").ok());
  ASSERT_TRUE(WriteFileAtomically(co_.dir() + "/ahead.jsonl", ToJson(ahead).dump() + "\n").ok());
  ASSERT_EQ(::mkfifo((co_.dir() + "/fifo.jsonl").c_str(), 0644), 0);
  ASSERT_TRUE(MakeDirs(co_.dir() + "/folder.jsonl").ok());
  struct Case {
    std::string path;
    std::string expect;
  } cases[] = {
      {co_.dir() + "/empty.jsonl", ": the journal holds no complete record (empty, blank or cut off)"},
      {co_.dir() + "/blank.jsonl", ": the journal holds no complete record"},
      {co_.dir() + "/torn.jsonl", ": the journal holds no complete record"},
      {"/dev/null", ": is a character device, not a journal file; fix: pass the journal files the jobs wrote"},
      {co_.dir() + "/fifo.jsonl", ": is a FIFO, not a journal file"},
      {co_.dir() + "/folder.jsonl", ": is a folder, not a journal file"},
      {co_.dir() + "/huge.jsonl", ":1: not a JSON record ([json.exception.out_of_range.406] number overflow"},
      {co_.dir() + "/ahead.jsonl",
       ":1: cell record provenance.verified_at \"2036-12-02T10:00:00Z\" is later than "
       "this machine's clock"},
  };
  std::string before = co_.Read("tiny/lora");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    Status s = Merge({good, c.path});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.ExitCode(), 2);
    EXPECT_EQ(s.message().rfind(c.path + c.expect, 0), 0u) << s.message();
    EXPECT_NE(s.message().find("fix:"), std::string::npos) << s.message();
    EXPECT_EQ(co_.Read("tiny/lora"), before);
    EXPECT_FALSE(PathExists(co_.dir() + "/merged.jsonl"));
    EXPECT_FALSE(PathExists(co_.dir() + "/reports"));
  }
}

TEST_F(MergeTest, RecordsOfARenamedConfigAreDroppedWithAWarning) {
  CellResult renamed = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z");
  renamed.key.config = "tiny/lora_old_name";
  std::string j =
      Journal("j.jsonl", {co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z"), renamed});
  StatusOr<JournalSet> set = LoadJournals({j}, co_.registry);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->records.size(), 1u);
  EXPECT_EQ(set->records[0].key.config, "tiny/full");
  ASSERT_EQ(set->warnings.size(), 1u);
  EXPECT_EQ(set->warnings[0], j + ":2: dropped the record of \"tiny/lora_old_name\" on cpu: no longer a built-in "
                                  "config (renamed or removed?)");
}

// Each was merged, written into the config, added to history and published (issue 55's hostile journals); the
// oversized ones killed the merge only after it had appended to history.
TEST_F(MergeTest, RecordsThatContradictThemselvesOrPassTheSizeBoundsAreRefusedAndNothingIsWritten) {
  std::string good =
      Journal("good.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z")});
  auto observed = [&] { return co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z"); };
  CellResult crashed = observed();
  crashed.exit_code = 139;
  crashed.term_signal = 11;
  CellResult untimed = observed();
  untimed.step_times_s.clear();
  untimed.step_time_median_s.reset();
  untimed.step_time_spread_s.reset();
  untimed.tokens_per_second = 1e6;
  CellResult beyond_peak = observed();
  beyond_peak.flops_per_second = 1e25;
  beyond_peak.peak_flops = 1e11;
  CellResult long_steps = observed();
  long_steps.wall_time_s = 0.46;
  long_steps.step_times_s = {1e9};
  long_steps.step_time_median_s = 1e9;
  CellResult reason = co_.Observe("tiny/full", "cpu", CellStatus::kFails, "2026-12-02T10:00:00Z");
  reason.reason = std::string(5 << 20, 'r');
  CellResult tail = observed();
  tail.output_tail = std::string(8 << 20, 't');
  const std::vector<std::pair<CellResult, std::string>> cases = {
      {crashed, "breaks rule status_vs_exit"}, {untimed, "breaks rule speed_vs_steps"},
      {beyond_peak, "breaks rule peak_share"},  {long_steps, "breaks rule times_within_wall"},
      {reason, "a journal line of"},            {tail, "a journal line of"}};
  const std::string before = co_.Read("tiny/full");
  for (const auto& [record, expect] : cases) {
    SCOPED_TRACE(expect);
    const std::string path = co_.dir() + "/bad.jsonl";
    ASSERT_TRUE(WriteFileAtomically(path, JournalLine(record) + "\n").ok());
    Status s = Merge({good, path});
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(s.message().rfind(path + ":1: ", 0), 0u) << s.message().substr(0, 300);
    EXPECT_NE(s.message().find(expect), std::string::npos) << s.message().substr(0, 300);
    EXPECT_EQ(co_.Read("tiny/full"), before);
    EXPECT_FALSE(PathExists(co_.dir() + "/merged.jsonl"));
    EXPECT_FALSE(PathExists(co_.dir() + "/reports")) << "no history, no report";
  }
}

TEST_F(MergeTest, AWriteBackThatWouldPassTheConfigLimitIsRefusedBeforeAnyWrite) {
  // Its readers (validate, run, plan) refuse a config over 4 MiB; the merge used to write one while check said OK.
  const std::string padded = co_.Read("tiny/full") + "# " + std::string((4 << 20) - 200, 'p') + "\n";
  co_.Write("tiny/full", padded);
  CellResult full = co_.Observe("tiny/full", "cpu", CellStatus::kFails, "2026-12-02T10:00:00Z");
  full.reason = std::string(60000, 'r');  // within a record's bounds
  const std::string before_lora = co_.Read("tiny/lora");
  Status s = Merge({Journal("j.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z"),
                                        full})});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("full.yaml: its support block would make it"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("over the 4.00 MiB a config may hold"), std::string::npos) << s.message();
  EXPECT_EQ(co_.Read("tiny/full"), padded);
  EXPECT_EQ(co_.Read("tiny/lora"), before_lora) << "every config is rendered before any is written";
  EXPECT_FALSE(PathExists(co_.dir() + "/reports/history")) << "nothing added to history";
}

TEST_F(MergeTest, AConfigThatCannotTakeItsBlockStopsTheMergeBeforeAnyWrite) {
  co_.Write("tiny/full", "batch_size: [unclosed\n");
  std::string j = Journal("j.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z")});
  CellResult full = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z");
  ASSERT_TRUE(AppendToJournal(j, full).ok());
  std::string before = co_.Read("tiny/lora");
  Status s = Merge({j});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("full.yaml"), std::string::npos) << s.message();
  EXPECT_EQ(co_.Read("tiny/lora"), before);
  EXPECT_EQ(co_.Read("tiny/full"), "batch_size: [unclosed\n");
}

TEST_F(MergeTest, AReportsFolderThatCannotBeMadeStopsTheMergeBeforeAnyConfigChanges) {
  std::string j = Journal("j.jsonl", {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z")});
  ASSERT_TRUE(WriteFileAtomically(co_.dir() + "/a_file", "x").ok());
  StatusOr<JournalSet> set = LoadJournals({j}, co_.registry);
  ASSERT_TRUE(set.ok());
  std::string before = co_.Read("tiny/lora");
  for (bool reports : {true, false}) {
    MergeOptions o = Options();
    (reports ? o.reports_dir : o.journal_out) = co_.dir() + "/a_file/below" + (reports ? "" : "/merged.jsonl");
    std::ostringstream log;
    EXPECT_FALSE(MergeJournals(*set, co_.registry, o, log).ok()) << (reports ? "reports" : "journal");
    EXPECT_EQ(co_.Read("tiny/lora"), before);
  }
}

TEST(CombinedJournalTextTest, NewestPerCellSortedByConfigThenDevice) {
  testing::TestCheckout co;
  std::vector<CellResult> records = {co.Observe("tiny/lora", "cpu", CellStatus::kFails, "2026-12-02T10:00:00Z"),
                                     co.Observe("tiny/full", "cpu", CellStatus::kRuns, "2026-12-02T10:00:00Z"),
                                     co.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T11:00:00Z")};
  std::string text = CombinedJournalText(records);
  EXPECT_EQ(text, ToJson(records[1]).dump() + "\n" + ToJson(records[2]).dump() + "\n");
}

}  // namespace
}  // namespace tmx::matrix
