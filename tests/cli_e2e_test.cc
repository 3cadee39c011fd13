// End-to-end tests of the `tune` and `tune-matrix` binaries: exit codes, messages, files left untouched.
#include <sys/stat.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/file_util.h"
#include "matrix/subprocess.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

struct Result {
  int code = -1;
  std::string output;
};

Result Exec(std::vector<std::string> argv) {
  matrix::SubprocessSet set;
  matrix::SubprocessOptions o;
  o.argv = std::move(argv);
  o.timeout_s = 120;
  o.env = {{"OMP_NUM_THREADS", "1"}};
  StatusOr<matrix::Subprocess*> child = set.Add(o);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  while (set.running() > 0) set.DoWork(1000);
  std::unique_ptr<matrix::Subprocess> done = set.NextFinished();
  Result r;
  r.code = done->result().exit_code.value_or(-1);
  r.output = done->result().output_tail;
  return r;
}

const std::string kTune = std::string(TM_BINARY_DIR) + "/bin/tune";
const std::string kMatrix = std::string(TM_BINARY_DIR) + "/bin/tune-matrix";

class CliTest : public ::testing::Test {
 protected:
  test::ScratchDir scratch_{"cli_test"};
  const std::string dir_ = scratch_.path();
};

TEST_F(CliTest, LsListsEveryRecipeAndConfig) {
  Result r = Exec({kTune, "ls"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("lora_finetune_single_device   llama3_2/1B_lora_single_device"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("tiny/full_single_device"), std::string::npos);
}

TEST_F(CliTest, ValidateEveryBuiltinConfigOnCpu) {
  for (const char* c : {"tiny/lora_single_device", "tiny/full_single_device", "llama3_2/1B_lora_single_device",
                        "llama3_2/1B_full_single_device", "llama3_1/8B_lora_single_device"}) {
    Result r = Exec({kTune, "validate", c, "device=cpu"});
    EXPECT_EQ(r.code, 0) << c << "\n" << r.output;
  }
}

TEST_F(CliTest, UnavailableDeviceNamesWhatIsThereAndHowToOverride) {
  Result r = Exec({kTune, "validate", "llama3_2/1B_lora_single_device", "device=xpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("device 'xpu' is not available on this machine (available: cpu"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("override it with device=cpu"), std::string::npos);
}

TEST_F(CliTest, BadInputsExitTwoWithOneClearMessageAndChangeNoFile) {
  std::string bad = dir_ + "/bad.yaml";
  const std::string text = "output_dir: /tmp/x\nmodel: [unclosed\n";
  ASSERT_TRUE(WriteFileAtomically(bad, text).ok());
  struct Case {
    std::vector<std::string> argv;
    std::string expect;
  } cases[] = {
      {{kTune, "validate", bad}, bad + ":3:1: malformed YAML"},
      {{kTune, "validate", "tiny/lora_single_device", "model.lora_rnk=4"},
       "model.lora_rnk: unknown key for component 'tune_matrix.models.lora_llama_tiny'; did you mean 'lora_rank'?"},
      {{kTune, "validate", "tiny/lora_single_device", "batch_size=many"}, "batch_size: expected an integer, got 'many'"},
      {{kTune, "validate", "tiny/lora_single_device", "device=gpu0"}, "unknown device 'gpu0'"},
      {{kTune, "validate", "tiny/lora_single_device", "optimizer=torch.optim.Adamw"},
       "unknown component 'torch.optim.Adamw'; did you mean 'torch.optim.AdamW'?"},
      {{kTune, "validate", "tiny/lora_single_device", "dtype=fp16"}, "fp16 training is not supported"},
      {{kTune, "cat", "tiny/lora_single_device", "nokey"}, "override 'nokey': expected key=value"},
      {{kTune, "run", "lora_finetune_single_devise", "--config", "tiny/lora_single_device"},
       "unknown recipe 'lora_finetune_single_devise'; did you mean 'lora_finetune_single_device'?"},
      {{kTune, "valdate"}, "unknown command 'valdate', did you mean 'validate'?"},
      {{kTune, "cp", "tiny/lora_single_device", bad}, bad + ": already exists; pass --force to overwrite it"},
  };
  for (const Case& c : cases) {
    Result r = Exec(c.argv);
    EXPECT_EQ(r.code, 2) << c.argv[1] << " " << c.argv.back() << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << "expected: " << c.expect << "\ngot: " << r.output;
    EXPECT_EQ(r.output.find("terminate called"), std::string::npos);
    EXPECT_EQ(r.output.find("YAML::"), std::string::npos);
  }
  EXPECT_EQ(*ReadFile(bad), text);
}

TEST_F(CliTest, CopyThenCatWithOverrides) {
  std::string dest = dir_ + "/mine.yaml";
  Result cp = Exec({kTune, "cp", "tiny/lora_single_device", dest});
  ASSERT_EQ(cp.code, 0) << cp.output;
  Result cat = Exec({kTune, "cat", dest, "batch_size=3", "output_dir=/data/run"});
  ASSERT_EQ(cat.code, 0) << cat.output;
  EXPECT_NE(cat.output.find("batch_size: 3"), std::string::npos) << cat.output;
  EXPECT_NE(cat.output.find("log_dir: /data/run/logs"), std::string::npos) << cat.output;
}

TEST_F(CliTest, RunTinyConfigLogsStepsWithMemory) {
  Result r = Exec({kTune, "run", "lora_finetune_single_device", "--config", "tiny/lora_single_device",
                  "max_steps_per_epoch=2", "log_every_n_steps=1", "save_checkpoints=False", "output_dir=" + dir_ + "/run",
                  "--force"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("epoch 1 step 2 | loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("peak_mem "), std::string::npos);
  struct stat st;
  EXPECT_EQ(::stat((dir_ + "/run/logs/metrics.jsonl").c_str(), &st), 0);
}

TEST_F(CliTest, MatrixRejectsBadOptions) {
  Result r = Exec({kMatrix, "run", "--devices", "tpu"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--devices: device 'tpu' is not available on this machine (available: cpu"), std::string::npos)
      << r.output;
  Result steps = Exec({kMatrix, "run", "--steps", "1"});
  EXPECT_EQ(steps.code, 2);
  Result unknown = Exec({kMatrix, "rnu"});
  EXPECT_NE(unknown.output.find("did you mean 'run'?"), std::string::npos);
}

}  // namespace
}  // namespace tmx
