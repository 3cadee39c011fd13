#include "matrix/check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "base/file_util.h"
#include "matrix/history.h"
#include "matrix/journal.h"
#include "matrix/testdata/checkout.h"

namespace tmx::matrix {
namespace {

// Claims come from configs written back by a merge of `recorded`; observations are `observed`.
class CheckTest : public ::testing::Test {
 protected:
  void Record(const std::vector<CellResult>& recorded) {
    std::string path = co_.dir() + "/recorded.jsonl";
    ::unlink(path.c_str());
    for (const CellResult& c : recorded) ASSERT_TRUE(AppendToJournal(path, c).ok());
    StatusOr<JournalSet> set = LoadJournals({path}, co_.registry);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    MergeOptions o;
    o.journal_out = "";
    o.reports_dir = co_.dir() + "/reports";
    std::ostringstream log;
    ASSERT_TRUE(MergeJournals(*set, co_.registry, o, log).ok());
  }

  std::vector<CheckProblem> Check(const std::vector<CellResult>& observed, CheckOptions options = {}) {
    JournalSet set;
    set.paths = {"new.jsonl"};
    set.records = observed;
    for (size_t i = 0; i < observed.size(); ++i) set.origins.push_back("new.jsonl:" + std::to_string(i + 1));
    StatusOr<std::vector<ConfigSupport>> claims = ReadBuiltinClaims(co_.registry);
    EXPECT_TRUE(claims.ok()) << claims.status().ToString();
    options.accept_command = "tune-matrix merge new.jsonl";
    std::vector<CheckProblem> problems = CheckSupport(*claims, set, options);
    std::ostringstream printed;
    PrintProblems(problems, printed);
    printed_ = printed.str();
    return problems;
  }

  CellResult Obs(const std::string& config, const std::string& device, CellStatus s, double tps = 100) {
    return co_.Observe(config, device, s, "2026-12-02T12:00:00Z", tps);
  }

  testing::TestCheckout co_;
  std::string printed_;
  const std::string old_ = "2026-12-01T12:00:00Z";
};

TEST_F(CheckTest, AgreeingClaimsAndObservationsPass) {
  std::vector<CellResult> cells = {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_),
                                   co_.Observe("tiny/full", "cpu", CellStatus::kTooLarge, old_),
                                   co_.Observe("tiny/lora", "cuda:0", CellStatus::kFails, old_)};
  Record(cells);
  EXPECT_TRUE(Check(cells, {{"cpu", "cuda"}}).empty()) << printed_;
  // A fresh observation that agrees passes too, and so does no observation at all.
  EXPECT_TRUE(Check({Obs("tiny/lora", "cpu", CellStatus::kRuns, 104)}).empty()) << printed_;
  EXPECT_TRUE(Check({}).empty()) << printed_;
}

// An observation of another CPU class or torch version is checked against its own column: an AVX2 machine that
// fails, or runs at a hundredth of the speed, breaks nothing the AMX machine's entry says.
TEST_F(CheckTest, AnotherClassOrTorchIsAnotherColumnNeverComparedWithTheEntry) {
  Record({co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_, 1000)});
  CellResult avx2 = Obs("tiny/lora", "cpu", CellStatus::kRuns, 10);
  avx2.provenance.cpu_class = "avx2";
  CellResult newer = Obs("tiny/lora", "cpu", CellStatus::kFails);
  newer.provenance.torch_version = "2.15.0";
  CheckCounts counts;
  JournalSet set;
  set.records = {avx2, newer};
  set.origins = {"new.jsonl:1", "new.jsonl:2"};
  std::vector<CheckProblem> p = CheckSupport(ReadBuiltinClaims(co_.registry).value(), set, {}, &counts);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].kind, ProblemKind::kNewlyFixed);  // not recorded in its column, runs there
  EXPECT_EQ(p[0].message.rfind("cpu (avx2, torch 2.11.0): not recorded, now runs", 0), 0u) << p[0].message;
  EXPECT_EQ(p[1].kind, ProblemKind::kDisagrees);
  EXPECT_EQ(p[1].message.rfind("cpu (amx, torch 2.15.0): no support entry, observed fails", 0), 0u) << p[1].message;
  EXPECT_EQ(counts.speed_compared, 0);
}

TEST_F(CheckTest, NewlyBrokenAndNewlyFixedAreListedSeparatelyWithTheCorrection) {
  Record({co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_),
          co_.Observe("tiny/lora", "cuda:0", CellStatus::kFails, old_)});
  std::vector<CheckProblem> p =
      Check({Obs("tiny/lora", "cpu", CellStatus::kFails), Obs("tiny/lora", "cuda:0", CellStatus::kRuns)});
  ASSERT_EQ(p.size(), 2u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kNewlyBroken);
  EXPECT_EQ(p[0].location, co_.Path("tiny/lora") + ":8");
  EXPECT_NE(p[0].message.find("cpu (amx, torch 2.11.0): recorded runs (verified " + old_ +
                              " at commit 0123456789ab), now fails "
                              "(new.jsonl:1, job job-cpu, host host-cpu"),
            std::string::npos)
      << p[0].message;
  EXPECT_NE(p[0].fix.find("tune-matrix merge new.jsonl"), std::string::npos) << p[0].fix;
  EXPECT_NE(p[0].fix.find(
                "supported_devices: [\"cuda (torch 2.11.0)\"] and support.\"cpu (amx, torch 2.11.0)\".status: fails"),
            std::string::npos)
      << p[0].fix;
  EXPECT_EQ(p[1].kind, ProblemKind::kNewlyFixed);
  EXPECT_NE(p[1].message.find("cuda (torch 2.11.0): recorded fails"), std::string::npos) << p[1].message;
  EXPECT_NE(printed_.find("newly broken (1):\n  "), std::string::npos) << printed_;
  EXPECT_NE(printed_.find("newly fixed (1):\n  "), std::string::npos) << printed_;
  EXPECT_NE(printed_.find("\n    fix: "), std::string::npos) << printed_;
}

TEST_F(CheckTest, ADeviceThatRanButIsNotListedAndAListedDeviceThatFailed) {
  Record({co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_)});
  // Ran on a device the config has never recorded.
  std::vector<CheckProblem> p = Check({Obs("tiny/lora", "cuda:0", CellStatus::kRuns)});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kNewlyFixed);
  EXPECT_NE(p[0].message.find("not recorded, now runs"), std::string::npos) << p[0].message;
  EXPECT_NE(p[0].message.find("it ran but is not listed in supported_devices"), std::string::npos);
  EXPECT_NE(p[0].fix.find("supported_devices: [\"cpu (amx, torch 2.11.0)\", \"cuda (torch 2.11.0)\"]"),
            std::string::npos)
      << p[0].fix;

  // A list edited by hand: it claims cuda, which nothing supports, and drops cpu, which runs.
  std::string text = co_.Read("tiny/lora");
  const std::string listed = "supported_devices: [\"cpu (amx, torch 2.11.0)\"]";
  size_t at = text.find(listed);
  ASSERT_NE(at, std::string::npos);
  co_.Write("tiny/lora", text.replace(at, listed.size(), "supported_devices: [\"cuda (torch 2.11.0)\"]"));
  p = Check({});
  ASSERT_EQ(p.size(), 2u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kDisagrees);
  EXPECT_EQ(p[0].location, co_.Path("tiny/lora") + ":6");
  EXPECT_NE(
      p[0].message.find("cpu (amx, torch 2.11.0): its status is runs, but metadata.supported_devices does not list it"),
      std::string::npos)
      << p[0].message;
  EXPECT_NE(p[1].message.find("cuda (torch 2.11.0): metadata.supported_devices lists cuda (torch 2.11.0), but nothing "
                              "was recorded or observed"),
            std::string::npos)
      << p[1].message;
  EXPECT_EQ(p[0].fix, "write " + listed);

  text = co_.Read("tiny/lora");
  const std::string wrong = "supported_devices: [\"cuda (torch 2.11.0)\"]";
  at = text.find(wrong);
  co_.Write("tiny/lora", text.replace(at, wrong.size(),
                                      "supported_devices: [\"cpu (amx, torch 2.11.0)\", \"cpu (amx, torch 2.11.0)\"]"));
  p = Check({});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(
      p[0].message,
      "metadata.supported_devices names a device more than once: [cpu (amx, torch 2.11.0), cpu (amx, torch 2.11.0)]");
  EXPECT_EQ(p[0].fix, "write " + listed);
}

TEST_F(CheckTest, OtherStatusChangesDisagree) {
  Record({co_.Observe("tiny/full", "cpu", CellStatus::kFails, old_)});
  std::vector<CheckProblem> p = Check({Obs("tiny/full", "cpu", CellStatus::kTimeout)});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kDisagrees);
  EXPECT_NE(p[0].message.find("cpu (amx, torch 2.11.0): recorded fails"), std::string::npos);
  EXPECT_NE(p[0].message.find("observed timeout"), std::string::npos) << p[0].message;
}

TEST_F(CheckTest, AConfigEditedSinceItsSupportWasVerifiedIsStale) {
  Record({co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_)});
  std::string old_hash = ConfigHash(co_.Read("tiny/lora"));
  std::string text = co_.Read("tiny/lora");
  co_.Write("tiny/lora", "lr: 1e-3\n" + text.substr(text.find("batch_size")));
  std::vector<CheckProblem> p = Check({});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kStale);
  EXPECT_NE(p[0].message.find("cpu (amx, torch 2.11.0): support entry runs (verified " + old_), std::string::npos)
      << p[0].message;
  EXPECT_NE(p[0].message.find("was made with config hash " + old_hash + ", but the config has changed since"),
            std::string::npos)
      << p[0].message;
  // On the column's class and torch: a rerun elsewhere would record another column.
  EXPECT_NE(p[0].fix.find("rerun and record it with torch 2.11.0: tune-matrix run --configs 'tiny/lora' --devices cpu "
                          "--cpu-class amx "),
            std::string::npos)
      << p[0].fix;

  // An observation of the old config is stale too, and is not compared: one problem names both.
  CellResult old_obs = Obs("tiny/lora", "cpu", CellStatus::kFails);
  old_obs.config_hash = old_hash;
  p = Check({old_obs});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_NE(p[0].message.find(", and the latest observation (new.jsonl:1, job job-cpu"), std::string::npos)
      << p[0].message;
  EXPECT_NE(p[0].message.find(") ran config hash " + old_hash + ", but the config has changed since"),
            std::string::npos)
      << p[0].message;
  // A fresh observation of the edited config makes the entry's fix a merge.
  p = Check({Obs("tiny/lora", "cpu", CellStatus::kRuns)});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kStale);
  EXPECT_EQ(p[0].fix, "record the fresh observation: tune-matrix merge new.jsonl");
}

TEST_F(CheckTest, ADeviceTheJobWasMeantToCoverWithNoCellStartedFails) {
  Record({co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_)});
  CheckOptions o;
  o.expect_devices = {"cpu", "cuda"};
  std::vector<CheckProblem> p = Check({Obs("tiny/lora", "cpu", CellStatus::kRuns)}, o);
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kNoCoverage);
  EXPECT_EQ(p[0].location, "new.jsonl");
  EXPECT_NE(p[0].message.find("cuda: the job meant to cover cuda ran no cell on it (no cell recorded for it)"),
            std::string::npos)
      << p[0].message;
  EXPECT_EQ(p[0].fix, "make sure the runner has the device (tune devices) and runs it: ci/run-device cuda");
  // Cells recorded without starting are not coverage; an empty journal covers nothing.
  o.expect_devices = {"cpu"};
  Record({co_.Observe("tiny/full", "cpu", CellStatus::kTooLarge, old_)});
  p = Check({Obs("tiny/full", "cpu", CellStatus::kTooLarge)}, o);
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_NE(p[0].message.find("1 cell recorded, none started"), std::string::npos) << p[0].message;
  EXPECT_EQ(Check({}, o).size(), 1u);
}

TEST_F(CheckTest, TokensPerSecondMayFallOnlyWithinTheNoise) {
  CellResult recorded = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_, 1000);
  Record({recorded});
  // 1% spread on both sides: the 10% floor decides.
  EXPECT_TRUE(Check({Obs("tiny/lora", "cpu", CellStatus::kRuns, 905)}).empty()) << printed_;
  std::vector<CheckProblem> p = Check({Obs("tiny/lora", "cpu", CellStatus::kRuns, 850)});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kSlower);
  EXPECT_NE(p[0].message.find("cpu (amx, torch 2.11.0): tokens/s fell 15.0%, from 1000.0 (verified " + old_ +
                              " at commit 0123456789ab)"),
            std::string::npos)
      << p[0].message;
  EXPECT_NE(p[0].fix.find("otherwise both ran commit 0123456789ab, so the machine or its load changed"),
            std::string::npos)
      << p[0].fix;
  EXPECT_NE(p[0].message.find("to 850.0"), std::string::npos);
  EXPECT_NE(p[0].message.find("allowed 10.0% = max(--max-slowdown 10.0%, 3.0 x combined spread 1.4%)"),
            std::string::npos)
      << p[0].message;
  // A noisy observation widens the allowance: spread 8% of the step time -> 3 x hypot(1%, 8%) = 24.2%.
  CellResult noisy = Obs("tiny/lora", "cpu", CellStatus::kRuns, 850);
  noisy.step_time_spread_s = *noisy.step_time_median_s * 0.08;
  EXPECT_TRUE(Check({noisy}).empty()) << printed_;
  // The threshold is an option.
  CheckOptions strict;
  strict.noise.max_slowdown = 0.02;
  EXPECT_EQ(Check({Obs("tiny/lora", "cpu", CellStatus::kRuns, 950)}, strict).size(), 1u);
  // Faster is never a problem; another device model is not compared.
  EXPECT_TRUE(Check({Obs("tiny/lora", "cpu", CellStatus::kRuns, 5000)}).empty());
  CellResult other_model = Obs("tiny/lora", "cpu", CellStatus::kRuns, 100);
  other_model.provenance.device_name = "Slower CPU";
  EXPECT_TRUE(Check({other_model}).empty()) << printed_;
}

TEST_F(CheckTest, StepsTooShortToTimeAreNotComparedButCounted) {
  // Observe() makes a step of 400 / tokens_per_second seconds: 0.4 s at 1000 tok/s, 0.04 s at 10000.
  Record({co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_, 1000),
          co_.Observe("tiny/full", "cpu", CellStatus::kRuns, old_, 10000)});
  JournalSet set;
  set.paths = {"new.jsonl"};
  set.records = {Obs("tiny/lora", "cpu", CellStatus::kRuns, 990), Obs("tiny/full", "cpu", CellStatus::kRuns, 4000)};
  set.origins = {"new.jsonl:1", "new.jsonl:2"};
  CheckCounts counts;
  EXPECT_TRUE(CheckSupport(ReadBuiltinClaims(co_.registry).value(), set, {}, &counts).empty());
  EXPECT_EQ(counts.observations, 2);
  EXPECT_EQ(counts.speed_compared, 1);
  EXPECT_EQ(counts.speed_too_short, 1);
  CheckOptions everything;
  everything.noise.min_step_time_s = 0;
  std::vector<CheckProblem> p = CheckSupport(ReadBuiltinClaims(co_.registry).value(), set, everything, &counts);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].message.find("tokens/s fell 60.0%, from 10000.0"), std::string::npos) << p[0].message;
  EXPECT_EQ(counts.speed_compared, 2);
}

TEST_F(CheckTest, ADisturbedObservationsSpeedIsNotCompared) {
  // 1000 -> 100 tok/s measured beside other work: no slowdown reported, counted apart; a status change still is.
  Record({co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_, 1000)});
  CellResult busy = Obs("tiny/lora", "cpu", CellStatus::kRuns, 100);
  busy.disturbed = "other processes used 80% of the machine's CPU while it ran (more than 25%)";
  JournalSet set;
  set.paths = {"new.jsonl"};
  set.records = {busy};
  set.origins = {"new.jsonl:1"};
  CheckCounts counts;
  EXPECT_TRUE(CheckSupport(ReadBuiltinClaims(co_.registry).value(), set, {}, &counts).empty());
  EXPECT_EQ(counts.speed_compared, 0);
  EXPECT_EQ(counts.speed_disturbed, 1);
  CellResult broken = Obs("tiny/lora", "cpu", CellStatus::kFails);
  broken.disturbed = busy.disturbed;
  std::vector<CheckProblem> p = Check({broken});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_NE(p[0].kind, ProblemKind::kSlower);
}

// A recorded speed published beside other work (--accept-disturbed) is no baseline: a quiet observation ten
// times faster is not compared with it, and counted apart.
TEST_F(CheckTest, ARecordedSpeedMeasuredBesideOtherWorkIsNotCompared) {
  CellResult marked = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_, 100);
  marked.disturbed = "other processes used 80% of the machine's CPU while it ran (more than 25%)";
  marked.disturbed_accepted = true;
  Record({marked});
  ASSERT_NE(co_.Read("tiny/lora").find("speeds_disturbed:"), std::string::npos) << co_.Read("tiny/lora");
  JournalSet set;
  set.paths = {"new.jsonl"};
  set.records = {Obs("tiny/lora", "cpu", CellStatus::kRuns, 1000)};
  set.origins = {"new.jsonl:1"};
  CheckCounts counts;
  CheckOptions everything;
  everything.noise.min_step_time_s = 0;
  EXPECT_TRUE(CheckSupport(ReadBuiltinClaims(co_.registry).value(), set, everything, &counts).empty());
  EXPECT_EQ(counts.speed_compared, 0);
  EXPECT_EQ(counts.speed_disturbed, 1);
}

TEST_F(CheckTest, AnObservationOlderThanTheRecordedEntryIsSuperseded) {
  Record({co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-12-02T12:30:00Z")});
  EXPECT_TRUE(Check({Obs("tiny/lora", "cpu", CellStatus::kFails)}).empty()) << printed_;
}

// An entry dated after the clock supersedes nothing (it would for ever): the observation is checked against it.
TEST_F(CheckTest, AnEntryDatedAheadOfTheClockDoesNotSupersedeAnObservation) {
  std::ostringstream log;
  ASSERT_TRUE(
      WriteBackResults(co_.registry, {co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2099-01-01T00:00:00Z")}, log)
          .ok());
  std::vector<CheckProblem> p = Check({Obs("tiny/lora", "cpu", CellStatus::kFails)});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kNewlyBroken) << printed_;
}

TEST_F(CheckTest, AFolderOrAnEmptyFileIsNoJournalToCheck) {
  // check reads journals through LoadJournals, as merge does: a folder used to read as zero records (OK).
  ASSERT_TRUE(WriteFileAtomically(co_.dir() + "/empty.jsonl", "").ok());
  for (const std::string& path : {co_.dir(), co_.dir() + "/empty.jsonl"}) {
    StatusOr<JournalSet> set = LoadJournals({path}, co_.registry);
    ASSERT_FALSE(set.ok()) << path;
    EXPECT_EQ(set.status().ExitCode(), 2);
    EXPECT_EQ(set.status().message().rfind(path + ": ", 0), 0u) << set.status().message();
  }
}

TEST_F(CheckTest, ReportsMustBeWhatTheConfigsRenderTo) {
  Record({co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_)});
  const std::string reports = co_.dir() + "/reports";
  StatusOr<std::vector<ConfigSupport>> configs = ReadBuiltinClaims(co_.registry);
  ASSERT_TRUE(configs.ok());
  EXPECT_TRUE(CheckReports(*configs, reports).empty());
  ASSERT_TRUE(WriteFileAtomically(reports + "/SUPPORT.md", "# edited\n").ok());
  ASSERT_EQ(::unlink((reports + "/support.json").c_str()), 0);
  std::vector<CheckProblem> p = CheckReports(*configs, reports);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].kind, ProblemKind::kReports);
  EXPECT_EQ(p[0].location, reports + "/SUPPORT.md");
  EXPECT_NE(p[0].message.find("differs from what the configs' metadata and history render to"), std::string::npos);
  EXPECT_EQ(p[0].fix, "tune-matrix report --reports-dir " + reports);
  EXPECT_EQ(p[1].message, "is missing");
}

TEST_F(CheckTest, ThePageMustBeWhatConfigsAndHistoryRenderToAndHistoryMustHoldTheJournal) {
  const std::string reports = co_.dir() + "/reports";
  std::string journal = reports + "/journal.jsonl";
  CellResult recorded = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_);
  ASSERT_TRUE(MakeDirs(reports).ok());
  ASSERT_TRUE(AppendToJournal(journal, recorded).ok());
  StatusOr<JournalSet> set = LoadJournals({journal}, co_.registry);
  ASSERT_TRUE(set.ok());
  MergeOptions o;
  o.journal_out = journal;
  o.reports_dir = reports;
  std::ostringstream log;
  ASSERT_TRUE(MergeJournals(*set, co_.registry, o, log).ok());
  StatusOr<std::vector<ConfigSupport>> configs = ReadBuiltinClaims(co_.registry);
  ASSERT_TRUE(configs.ok());
  EXPECT_TRUE(CheckReports(*configs, reports).empty());

  // A measurement in the journal that history lacks (a journal edited, or written with --no-write-back).
  CellResult unpublished = co_.Observe("tiny/full", "cpu", CellStatus::kRuns, old_);
  ASSERT_TRUE(AppendToJournal(journal, unpublished).ok());
  std::vector<CheckProblem> p = CheckReports(*configs, reports);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].kind, ProblemKind::kReports);
  EXPECT_EQ(p[0].location, journal + ":2");
  EXPECT_EQ(p[0].message, "the record of tiny/full on cpu (" + old_ + ") is not in " + reports + "/history");
  EXPECT_EQ(p[0].fix, "add the journal's records to history: tune-matrix merge " + journal);

  // History changed by hand: the page no longer matches it.
  ASSERT_TRUE(AddToHistory(reports + "/history", {unpublished, co_.Observe("tiny/lora", "cpu", CellStatus::kFails,
                                                                             "2026-11-30T00:00:00Z")},
                           nullptr)
                  .ok());
  p = CheckReports(*configs, reports);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].location, reports + "/index.html");
  EXPECT_EQ(p[0].fix, "tune-matrix report --reports-dir " + reports);

  // A history file that is not a journal is named.
  ASSERT_TRUE(WriteFileAtomically(reports + "/history/tiny/lora/cpu.jsonl", "oops\n").ok());
  p = CheckReports(*configs, reports);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].message.find("history/tiny/lora/cpu.jsonl:1: not a JSON record"), std::string::npos)
      << p[0].message;
}

// A generation cell (decode tokens/s, a prefill, no loss) merges into the config's block with its prefill,
// its reports check clean, an agreeing observation passes and a slower decode is flagged like any speed.
TEST_F(CheckTest, AGenerationCellWithoutLossesIsPublishedWithItsPrefillAndChecked) {
  auto generation = [&](const std::string& verified_at, double tps) {
    CellResult r = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, verified_at, tps);
    r.time_to_first_token_s = 0.25;
    r.prefill_tokens_per_second = 2048;
    return r;
  };
  Record({generation(old_, 1000)});
  EXPECT_NE(co_.Read("tiny/lora").find("      tokens_per_second: 1000.0\n      time_to_first_token_s: 0.25\n"
                                       "      prefill_tokens_per_second: 2048.0\n"),
            std::string::npos)
      << co_.Read("tiny/lora");
  StatusOr<std::vector<ConfigSupport>> configs = ReadBuiltinClaims(co_.registry);
  ASSERT_TRUE(configs.ok()) << configs.status().ToString();
  for (const ConfigSupport& c : *configs) {
    if (c.config == "tiny/lora")
      EXPECT_EQ(c.entries.at("cpu (amx, torch 2.11.0)").time_to_first_token_s, std::optional<double>(0.25));
  }
  EXPECT_TRUE(CheckReports(*configs, co_.dir() + "/reports").empty());
  EXPECT_TRUE(Check({generation("2026-12-02T12:00:00Z", 990)}).empty()) << printed_;
  std::vector<CheckProblem> p = Check({generation("2026-12-02T12:00:00Z", 850)});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kSlower);
}

// Check passed what merge now refuses: an entry at 10^14 % of the peak, a config its readers refuse for its
// size, a history record that contradicts itself.
TEST_F(CheckTest, WhatAMergeWouldRefuseFailsTheCheck) {
  CellResult measured = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, old_);
  measured.flops_per_second = 2e10;
  measured.peak_flops = 1e11;
  measured.flops_dtype = "bf16";
  Record({measured});
  std::string text = co_.Read("tiny/lora");
  const size_t at = text.find("peak_share: 0.2");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, std::string("peak_share: 0.2").size(), "peak_share: 1000000000000.0");
  co_.Write("tiny/lora", text);
  std::vector<CheckProblem> p = Check({});
  ASSERT_EQ(p.size(), 1u) << printed_;
  EXPECT_EQ(p[0].kind, ProblemKind::kDisagrees);
  EXPECT_EQ(p[0].message.rfind("cpu (amx, torch 2.11.0): the support entry contradicts itself: peak_share "
                               "1000000000000.000, outside 0 to 1.250",
                               0),
            0u)
      << p[0].message;

  const std::string full = co_.Read("tiny/full");
  co_.Write("tiny/full", full + "# " + std::string(5 << 20, 'p') + "\n");
  StatusOr<std::vector<ConfigSupport>> claims = ReadBuiltinClaims(co_.registry);
  ASSERT_FALSE(claims.ok());
  EXPECT_NE(claims.status().message().find("full.yaml: "), std::string::npos) << claims.status().message();
  EXPECT_NE(claims.status().message().find("limit for a config"), std::string::npos) << claims.status().message();
  co_.Write("tiny/full", full);

  const std::string reports = co_.dir() + "/reports";
  CellResult crashed = co_.Observe("tiny/lora", "cpu", CellStatus::kRuns, "2026-11-30T00:00:00Z");
  crashed.exit_code = 139;
  crashed.term_signal = 11;
  const std::string history = reports + "/history/tiny/lora/cpu.jsonl";
  ASSERT_TRUE(WriteFileAtomically(history, JournalLine(crashed) + "\n" + ReadFile(history).value()).ok());
  claims = ReadBuiltinClaims(co_.registry);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  p = CheckReports(*claims, reports);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].message.find("cpu.jsonl:1: cell record breaks rule status_vs_exit"), std::string::npos)
      << p[0].message;
}

TEST_F(CheckTest, ADamagedBlockIsAnErrorNamingTheLine) {
  co_.Write("tiny/full", std::string("lr: 1\n") + kSupportBlockBegin + "\nmetadata: [\n" + kSupportBlockEnd + "\n");
  StatusOr<std::vector<ConfigSupport>> claims = ReadBuiltinClaims(co_.registry);
  ASSERT_FALSE(claims.ok());
  EXPECT_NE(claims.status().message().find("full.yaml:"), std::string::npos) << claims.status().message();
}

}  // namespace
}  // namespace tmx::matrix
