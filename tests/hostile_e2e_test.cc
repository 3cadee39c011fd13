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
  std::string Record(const std::string& device, const std::string& device_type) {
    matrix::CellResult r;
    r.key = {"tiny/lora_single_device", device};
    r.recipe = "lora_finetune_single_device";
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

}  // namespace
}  // namespace tmx
