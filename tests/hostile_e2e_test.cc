// End-to-end: hostile and careless input to `tune` and `tune-matrix` gives one clear error and exit 2, fast,
// and changes no file. Each case used to crash (SIGSEGV), hang, abort or succeed wrongly.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/clock.h"
#include "base/file_util.h"
#include "base/lock.h"
#include "matrix/cell.h"
#include "matrix/journal.h"
#include "tests/cli_exec.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

constexpr double kQuick = 60;  // seconds: a hang is killed and fails the test instead of stalling it

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

void ExpectRefused(const test::Result& r, const std::string& expect) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(expect), std::string::npos) << "expected: " << expect << "\ngot: " << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

class HostileTest : public ::testing::Test {
 protected:
  // The checkout's configs in a scratch folder, so nothing a failed case might write touches the real ones.
  void SetUp() override {
    ASSERT_EQ(test::Exec({"cp", "-R", std::string(TM_SOURCE_DIR) + "/configs", configs_}).code, 0);
  }
  test::Result Run(const std::string& program, std::vector<std::string> args) {
    args.insert(args.begin(), program);
    return test::Exec(args, {{"TUNE_MATRIX_CONFIG_DIR", configs_}}, kQuick);
  }
  std::string Write(const std::string& name, const std::string& text) {
    EXPECT_TRUE(WriteFileAtomically(dir_ + "/" + name, text).ok());
    return dir_ + "/" + name;
  }
  // A record of a built-in config as `tune-matrix run` writes it.
  std::string Record(const std::string& device, const std::string& device_type,
                     const std::string& config = "tiny/lora_single_device",
                     const std::string& recipe = "lora_finetune_single_device") {
    matrix::CellResult r;
    r.key = {config, device};
    r.recipe = recipe;
    r.device_type = device_type;
    r.status = matrix::CellStatus::kRuns;
    r.provenance.verified_at = FormatUtc(UnixNow() - 60);
    return matrix::ToJson(r).dump() + "\n";
  }

  test::ScratchDir scratch_{"hostile_test"};
  const std::string dir_ = scratch_.path();
  const std::string configs_ = dir_ + "/configs";
};

TEST_F(HostileTest, TuneValidateRefusesUnboundedYamlInFilesAndOverrides) {
  std::string bomb = "l0: &a0 [lol]\n";
  for (int i = 1; i < 10; ++i) {
    std::string ref = "*a" + std::to_string(i - 1);
    bomb += "l" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + ref + Repeat(", " + ref, 9) + "]\n";
  }
  std::string fanout = "k0: xxxxxxxxxx\n";
  for (int i = 1; i <= 10; ++i)
    fanout += "k" + std::to_string(i) + ": " + Repeat("${k" + std::to_string(i - 1) + "}", 10) + "\n";
  std::string loop = Write("loop.yaml", "output_dir: /tmp/x\nmodel: &m [*m]\n");
  ExpectRefused(Run(test::kTune, {"validate", loop}), loop + ":2:12: alias *m refers to the node &m that contains it");
  ExpectRefused(Run(test::kTune, {"validate", Write("bomb.yaml", bomb)}), "more than 100000 values");
  ExpectRefused(Run(test::kTune, {"validate", Write("fanout.yaml", fanout)}), "more than 1048576 bytes");
  ExpectRefused(Run(test::kTune, {"validate", "tiny/lora_single_device", "batch_size=&x [1, *x]"}),
                "override 'batch_size=&x [1, *x]' at column 19: alias *x refers to the node &x that contains it");
}

TEST_F(HostileTest, MergeAndCheckRefuseWhatIsNotAJournalWithRecords) {
  std::string good = Write("good.jsonl", Record("cpu", "cpu"));
  std::string huge = Record("cpu", "cpu");
  huge.replace(huge.find("\"wall_time_s\":0.0"), 17, "\"wall_time_s\":1e999");
  ASSERT_EQ(::mkfifo((dir_ + "/fifo.jsonl").c_str(), 0644), 0);
  ASSERT_TRUE(MakeDirs(dir_ + "/folder.jsonl").ok());
  struct Case {
    std::string path, expect;
  } cases[] = {
      {"/dev/null", "/dev/null: is a character device, not a journal file"},
      {Write("empty.jsonl", ""), "empty.jsonl: the journal holds no complete record"},
      {dir_ + "/fifo.jsonl", "fifo.jsonl: is a FIFO, not a journal file"},
      {dir_ + "/folder.jsonl", "folder.jsonl: is a folder, not a journal file"},
      {Write("huge.jsonl", huge), "huge.jsonl:1: not a JSON record ([json.exception.out_of_range.406]"},
  };
  std::string config_before = ReadFile(configs_ + "/tiny/lora_single_device.yaml").value();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    ExpectRefused(Run(test::kMatrix, {"merge", good, c.path, "--journal-out", dir_ + "/merged.jsonl", "--reports-dir",
                                      dir_ + "/reports"}),
                  c.expect);
    EXPECT_FALSE(PathExists(dir_ + "/merged.jsonl"));
    EXPECT_FALSE(PathExists(dir_ + "/reports"));
    ExpectRefused(Run(test::kMatrix, {"check", c.path, "--reports-dir", dir_ + "/reports"}), c.expect);
  }
  EXPECT_EQ(ReadFile(configs_ + "/tiny/lora_single_device.yaml").value(), config_before);
}

TEST_F(HostileTest, ASecondWriterIsRefusedWhileAnotherHoldsTheCheckout) {
  std::string good = Write("good.jsonl", Record("cpu", "cpu"));
  std::string config_before = ReadFile(configs_ + "/tiny/lora_single_device.yaml").value();
  StatusOr<std::unique_ptr<CheckoutLock>> held =
      CheckoutLock::Acquire(dir_ + "/" + kCheckoutLockName, "tune-matrix run (the first one)", nullptr);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  const std::vector<std::string> merge = {"merge", good, "--journal-out", dir_ + "/merged.jsonl", "--reports-dir",
                                          dir_ + "/reports"};
  for (const std::vector<std::string>& args :
       {merge, {"report", "--reports-dir", dir_ + "/reports"}, {"run", "--configs", "tiny/lora_single_device"}}) {
    SCOPED_TRACE(args[0]);
    test::Result r = Run(test::kMatrix, args);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("tune-matrix run (the first one)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("Nothing was written"), std::string::npos) << r.output;
    EXPECT_FALSE(PathExists(dir_ + "/merged.jsonl"));
    EXPECT_FALSE(PathExists(dir_ + "/reports"));
  }
  EXPECT_EQ(ReadFile(configs_ + "/tiny/lora_single_device.yaml").value(), config_before);
  held->reset();  // the first command ends: the next one may write
  test::Result r = Run(test::kMatrix, merge);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(PathExists(dir_ + "/merged.jsonl"));
}

TEST_F(HostileTest, AFifoAmongTheConfigsIsAnErrorNotAHang) {
  std::string config = configs_ + "/tiny/full_single_device.yaml";
  ASSERT_EQ(::unlink(config.c_str()), 0);
  ASSERT_EQ(::mkfifo(config.c_str(), 0644), 0);
  std::string expect = config + ": is a FIFO, not a regular file";
  ExpectRefused(Run(test::kMatrix, {"report", "--reports-dir", dir_ + "/reports"}), expect);
  ExpectRefused(Run(test::kMatrix, {"check", "--reports-dir", dir_ + "/reports"}), expect);
  ExpectRefused(Run(test::kMatrix, {"merge", Write("good.jsonl", Record("cpu", "cpu")), "--journal-out",
                                    dir_ + "/merged.jsonl", "--reports-dir", dir_ + "/reports"}),
                expect);
  EXPECT_FALSE(PathExists(dir_ + "/merged.jsonl"));
}

// A config of 5 MiB (a hole, so nothing is written): refused from its size before a byte is read or parsed.
TEST_F(HostileTest, AConfigOverItsSizeLimitIsRefusedUnread) {
  std::string huge = dir_ + "/huge.yaml";
  ASSERT_EQ(::truncate(Write("huge.yaml", "").c_str(), off_t{5} << 20), 0);
  ExpectRefused(Run(test::kTune, {"validate", huge}),
                huge + ": 5242880 bytes, over the 4.00 MiB limit for a config; fix: pass the config file itself");
}

TEST_F(HostileTest, ResumeRefusesARecordThatMergeRefuses) {
  // A cpu device id recorded as a cuda cell: --resume used to take it and write a false `runs` claim.
  std::string journal = Write("journal.jsonl", Record("cpu", "cuda"));
  ExpectRefused(
      Run(test::kMatrix, {"run", "--resume", "--configs", "tiny/*", "--devices", "cpu", "--journal", journal,
                          "--work-dir", dir_ + "/runs", "--reports-dir", dir_ + "/reports", "--no-write-back"}),
      journal + ":1: cell record device type \"cuda\" does not match device \"cpu\"");
  EXPECT_FALSE(PathExists(dir_ + "/reports/SUPPORT.md"));
}

TEST_F(HostileTest, ARunWithoutWriteBackHoldsItsJournal) {
  // It used to append without any lock beside a write-back run that compacts the same journal, and its
  // record vanished. Now every journal writer holds the journal's lock, so the second one is refused.
  std::string journal = Write("journal.jsonl", Record("cpu", "cpu"));
  std::string journal_before = ReadFile(journal).value();
  StatusOr<std::unique_ptr<CheckoutLock>> held =
      CheckoutLock::Acquire(matrix::JournalLockPath(journal), "tune-matrix run (the write-back one)", nullptr);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--no-write-back", "--configs", "tiny/lora_single_device", "--journal", journal,
                                 "--work-dir", dir_ + "/runs", "--reports-dir", dir_ + "/reports"},
        std::vector<std::string>{"merge", Write("more.jsonl", Record("cpu", "cpu")), "--journal-out", journal,
                                 "--reports-dir", dir_ + "/reports"}}) {
    SCOPED_TRACE(args[0]);
    test::Result r = Run(test::kMatrix, args);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("tune-matrix run (the write-back one)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("Nothing was written"), std::string::npos) << r.output;
    EXPECT_EQ(ReadFile(journal).value(), journal_before);
  }
  EXPECT_EQ(matrix::JournalLockPath(dir_ + "/j.jsonl"), dir_ + "/.j.jsonl.lock");
}

TEST_F(HostileTest, AMergeAddsToTheJournalItWritesAndNeverShrinksIt) {
  // Merging a one-record journal used to cut the combined journal down to that one record.
  std::string out = Write("combined.jsonl", Record("cpu", "cpu", "tiny/full_single_device", "full_finetune_single_device") +
                                                Record("cpu", "cpu"));
  std::string one = Write("one.jsonl", Record("cpu", "cpu"));
  auto merge = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"merge", one, "--journal-out", out, "--reports-dir", dir_ + "/reports"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Run(test::kMatrix, args);
  };
  auto cells = [&]() {
    std::vector<std::string> configs;
    StatusOr<std::vector<matrix::CellResult>> records = matrix::ReadJournal(out, nullptr);
    EXPECT_TRUE(records.ok()) << records.status().ToString();
    for (const matrix::CellResult& r : records.value()) configs.push_back(r.key.config);
    return configs;
  };
  test::Result r = merge({});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("its records are kept"), std::string::npos) << r.output;
  EXPECT_EQ(cells(), (std::vector<std::string>{"tiny/full_single_device", "tiny/lora_single_device"}));
  r = merge({"--replace-journal"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(cells(), (std::vector<std::string>{"tiny/lora_single_device"}));
}

TEST_F(HostileTest, WriteBackNeverWritesThroughASymlinkedConfig) {
  // git stores symbolic links: a config that is one used to get its block appended to the file it names,
  // anywhere on the machine.
  std::string outside = Write("outside.yaml", ReadFile(configs_ + "/tiny/lora_single_device.yaml").value());
  std::string link = configs_ + "/tiny/lora_single_device.yaml";
  ASSERT_EQ(::unlink(link.c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), link.c_str()), 0);
  std::string before = ReadFile(outside).value();
  test::Result r = Run(test::kMatrix, {"merge", Write("good.jsonl", Record("cpu", "cpu", "tiny/lora_single_device")),
                                       "--journal-out", dir_ + "/merged.jsonl", "--reports-dir", dir_ + "/reports"});
  ExpectRefused(r, link + ": is a symbolic link to " + outside);
  EXPECT_NE(r.output.find("fix: replace the link by a copy"), std::string::npos) << r.output;
  EXPECT_EQ(ReadFile(outside).value(), before);
  EXPECT_FALSE(PathExists(dir_ + "/merged.jsonl"));
}

TEST_F(HostileTest, ValidateRefusesValuesNoRunCanUse) {
  // Each was accepted as valid: a run would write into /, step with an infinite learning rate, or allocate
  // adapters larger than the model.
  ExpectRefused(Run(test::kTune, {"validate", "tiny/lora_single_device", "output_dir=/"}),
                "output_dir: '/' is a system folder");
  ExpectRefused(Run(test::kTune, {"validate", "tiny/lora_single_device", "optimizer.lr=.inf"}),
                "optimizer.lr: '.inf' is not a finite number");
  ExpectRefused(Run(test::kTune, {"validate", "tiny/lora_single_device", "model.lora_rank=1000000"}),
                "lora.rank 1000000 is above");
  test::Result fine = Run(test::kTune, {"validate", "tiny/lora_single_device", "output_dir=/tmp/x/", "optimizer.lr=1e-4"});
  EXPECT_EQ(fine.code, 0) << fine.output;
  // No warning but the torch axis's, which a machine of another CPU class than the committed records' gets.
  std::string warnings = fine.output;
  const std::string axis = "warning: tune-matrix never measured tiny/lora_single_device on ";
  if (warnings.find(axis) != std::string::npos) warnings.erase(warnings.find(axis));
  EXPECT_EQ(warnings.find("warning"), std::string::npos) << fine.output;
  // A batch no device holds, but some machine might: valid, and the prediction says it will not fit here.
  test::Result large = Run(test::kTune, {"validate", "tiny/lora_single_device", "batch_size=1000000"});
  EXPECT_EQ(large.code, 0) << large.output;
  EXPECT_NE(large.output.find("warning: predicted peak memory"), std::string::npos) << large.output;
}

TEST_F(HostileTest, ValidateRefusesNumbersAndFoldersNoRunCanUse) {
  // Each validated: a batch no machine can address (a warning only), NaN decay rates (NaN moments from the first
  // step), a folder among the system's programs.
  ExpectRefused(Run(test::kTune, {"validate", "tiny/lora_single_device", "batch_size=1000000000000"}),
                "batch_size: the predicted peak memory, 4194304.00 TiB, is more than any 64-bit machine addresses");
  ExpectRefused(Run(test::kTune, {"validate", "tiny/lora_single_device", "optimizer.betas=[.nan, 0.999]"}),
                "optimizer.betas: expected two numbers in [0, 1), e.g. [0.9, 0.999]");
  ExpectRefused(Run(test::kTune, {"validate", "tiny/lora_single_device", "output_dir=/usr/bin"}),
                "output_dir: '/usr/bin' is inside the system folder /usr");
  ExpectRefused(Run(test::kTune, {"run", "lora_finetune_single_device", "--config", "tiny/lora_single_device",
                                  "batch_size=1000000000000", "output_dir=" + dir_ + "/out"}),
                "is more than any 64-bit machine addresses");
  EXPECT_FALSE(PathExists(dir_ + "/out"));
}

TEST_F(HostileTest, FlagsAndEnvironmentThatWouldBeIgnoredAreRefused) {
  // RANK left in the shell: two ranks asked for, one silent rank ran.
  test::Result r = test::Exec({test::kTune, "run", "--nproc_per_node", "2", "full_finetune_distributed", "--config",
                               "tiny/full_distributed", "device=cpu", "output_dir=" + dir_ + "/out"},
                              {{"TUNE_MATRIX_CONFIG_DIR", configs_}, {"RANK", "0"}, {"WORLD_SIZE", "1"}}, kQuick);
  ExpectRefused(r, "RANK=0 and WORLD_SIZE=1 are already set in the environment");
  EXPECT_FALSE(PathExists(dir_ + "/out"));
  // The second --devices was dropped without a word.
  ExpectRefused(Run(test::kMatrix, {"plan", "--devices", "cpu", "--devices", "cuda"}),
                "--devices is given twice ('cpu' and 'cuda'), and only one would count; fix: give it once");
  ExpectRefused(Run(test::kTune, {"validate", "tiny/lora_single_device", "--recipe", "--repair"}),
                "--recipe needs a value, and the next argument is the option '--repair'");
}

TEST_F(HostileTest, ACommaInsideAConfigsPathDoesNotSplitIt) {
  ASSERT_EQ(test::Exec({"mkdir", "-p", dir_ + "/team,a"}).code, 0);
  const std::string mine = Write("team,a/mine.yaml", ReadFile(configs_ + "/tiny/lora_single_device.yaml").value());
  test::Result r = Run(test::kMatrix, {"plan", "--configs", mine, "--devices", "cpu"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("mine"), std::string::npos) << r.output;
}

TEST_F(HostileTest, ResourcesTheMachineCannotGiveAreRefusedBeforeAnythingStarts) {
  test::Result r = Run(test::kTune, {"run", "--nproc_per_node", "1024", "full_finetune_distributed", "--config",
                                     "tiny/full_distributed", "device=cpu", "output_dir=" + dir_ + "/out"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--nproc_per_node 1024 is more ranks than this machine's"), std::string::npos) << r.output;
  EXPECT_FALSE(PathExists(dir_ + "/out"));
  for (const std::string& bad : {"nan", "inf", "-inf"}) {
    ExpectRefused(Run(test::kMatrix, {"plan", "--memory-fraction", bad}),
                  "--memory-fraction takes a finite number, not '" + bad + "'");
  }
  ExpectRefused(Run(test::kMatrix, {"plan", "--steps", "1e30"}), "--steps takes a whole number, not '1e30'");
}

TEST_F(HostileTest, ARecordedStatusStandsForTheConfigAsWrittenOnly) {
  // A record said 'invalid' for the config as written, in the column this machine runs in; overrides that change
  // it used to be refused too.
  const std::string path = configs_ + "/tiny/lora_single_device.yaml";
  std::string text = ReadFile(path).value();
  text = text.substr(0, text.find("# --- BEGIN tune-matrix")) + "metadata:\n  support:\n" +
         test::RunningCpuColumn().Entry("invalid", "      reason: \"stand-in record\"\n");
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  const std::vector<std::string> run = {"run", "lora_finetune_single_device", "--config", "tiny/lora_single_device",
                                        "device=cpu", "output_dir=" + dir_ + "/out"};
  test::Result as_written = Run(test::kTune, run);
  EXPECT_EQ(as_written.code, 2) << as_written.output;
  EXPECT_NE(as_written.output.find("recorded tiny/lora_single_device as 'invalid' on cpu"), std::string::npos)
      << as_written.output;
  std::vector<std::string> changed = run;
  changed.insert(changed.end(), {"max_steps_per_epoch=1", "batch_size=8"});  // batch_size=8 is as written
  test::Result afresh = Run(test::kTune, changed);
  EXPECT_EQ(afresh.code, 0) << afresh.output;
  EXPECT_NE(afresh.output.find("as written; the overrides change max_steps_per_epoch, so this run is judged afresh"),
            std::string::npos)
      << afresh.output;
}

}  // namespace
}  // namespace tmx
