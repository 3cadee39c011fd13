// End-to-end tests of the `tune` and `tune-matrix` binaries: exit codes, messages, files left untouched.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/cpu_usage.h"
#include "base/file_util.h"
#include "base/folder.h"
#include "base/subprocess.h"
#include "harness/config_block.h"
#include "harness/run_summary.h"
#include "tests/cli_exec.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

using test::CpuColumn;
using test::Exec;
using test::kMatrix;
using test::kTune;
using test::Result;

class CliTest : public ::testing::Test {
 protected:
  test::ScratchDir scratch_{"cli_test"};
  const std::string dir_ = scratch_.path();
};

TEST_F(CliTest, LsListsEveryRecipeAndConfig) {
  Result r = Exec({kTune, "ls"});
  EXPECT_EQ(r.code, 0);
  // The recipe column is as wide as the longest recipe name (knowledge_distillation_single_device).
  EXPECT_NE(r.output.find("lora_finetune_single_device            llama2/7B_lora_single_device"), std::string::npos)
      << r.output;
  for (const char* c : {"llama3_2/1B_lora_single_device", "qwen2_5/0.5B_full_single_device",
                        "gemma2/2B_lora_single_device", "tiny/full_single_device", "tiny/phi3_lora_single_device"}) {
    EXPECT_NE(r.output.find(std::string("  ") + c + "\n"), std::string::npos) << c;
  }
}

// `tune ls --json`: each recipe with what it is (what scripts/make_builtin_configs.py reads) and its configs.
TEST_F(CliTest, LsJsonSaysWhatEachRecipeIs) {
  Result r = Exec({kTune, "ls", "--json"});
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json listed = nlohmann::json::parse(r.output);
  std::map<std::string, nlohmann::json> by_name;
  for (const nlohmann::json& recipe : listed) by_name[recipe["recipe"].get<std::string>()] = recipe;
  ASSERT_TRUE(by_name.count("lora_dpo_distributed")) << r.output;
  const nlohmann::json& dpo = by_name["lora_dpo_distributed"];
  EXPECT_EQ(dpo["distributed"], true);
  EXPECT_EQ(dpo["task"], "train");
  EXPECT_EQ(dpo["trains"], "lora");
  EXPECT_EQ(dpo["data"], "preference_pairs");
  EXPECT_EQ(dpo["objective"], "dpo");
  const nlohmann::json& generate = by_name["generate"];
  EXPECT_EQ(generate["task"], "generate");
  EXPECT_EQ(generate["objective"], "");
  // Its top-level keys: generate's own enable_kv_cache, which dev/generate_v2 lacks.
  auto has = [](const nlohmann::json& list, const char* key) { return std::find(list.begin(), list.end(), key) != list.end(); };
  EXPECT_TRUE(has(generate["fields"], "enable_kv_cache")) << generate.dump();
  EXPECT_FALSE(has(by_name["dev/generate_v2"]["fields"], "enable_kv_cache"));
  EXPECT_TRUE(has(dpo["fields"], "output_dir"));
  EXPECT_NE(std::find(generate["configs"].begin(), generate["configs"].end(), "tiny/llama3_generation"),
            generate["configs"].end())
      << generate.dump();
}

TEST_F(CliTest, ValidateBuiltinConfigsOnCpu) {
  for (const char* c : {"tiny/lora_single_device", "tiny/full_single_device", "tiny/gemma2_lora_single_device",
                        "llama3_2/1B_lora_single_device", "llama3_1/8B_lora_single_device",
                        "qwen2_5/0.5B_full_single_device", "qwen3/4B_lora_single_device"}) {
    Result r = Exec({kTune, "validate", c, "device=cpu"});
    EXPECT_EQ(r.code, 0) << c << "\n" << r.output;
  }
  // torchtune's 1B full config steps bitsandbytes' paged 8-bit AdamW: its state lives in CUDA unified memory,
  // so on cpu it is refused with the override that runs it there.
  Result paged = Exec({kTune, "validate", "llama3_2/1B_full_single_device", "device=cpu"});
  EXPECT_EQ(paged.code, 2) << paged.output;
  EXPECT_NE(paged.output.find("a paged optimizer needs a cuda device (its state lives in CUDA unified memory), not "
                              "cpu; use optimizer._component_=bitsandbytes.optim.AdamW8bit"),
            std::string::npos)
      << paged.output;
}

// A config invalid only on its device, each problem with a known override: validate and run name the repair and
// what tune-matrix recorded of it (from the config's support entry); --repair applies it.
TEST_F(CliTest, ARepairIsNamedWithItsRecordAndAppliedByRepair) {
  Result paged = Exec({kTune, "validate", "llama3_2/1B_full_single_device", "device=cpu"});
  EXPECT_EQ(paged.code, 2) << paged.output;
  EXPECT_NE(paged.output.find("repair: with optimizer._component_=bitsandbytes.optim.AdamW8bit it is valid on cpu\n"),
            std::string::npos)
      << paged.output;
  EXPECT_NE(paged.output.find("pass --repair to `tune validate` or `tune run` to apply it"), std::string::npos) << paged.output;
  Result applied = Exec({kTune, "validate", "llama3_2/1B_full_single_device", "device=cpu", "--repair"});
  EXPECT_EQ(applied.code, 0) << applied.output;
  EXPECT_NE(applied.output.find("note: --repair: applied optimizer._component_=bitsandbytes.optim.AdamW8bit for cpu"),
            std::string::npos)
      << applied.output;
  EXPECT_NE(applied.output.find("is valid for recipe full_finetune_single_device on cpu"), std::string::npos)
      << applied.output;
  // A problem without a repair (a device that cannot train) leaves the config unrepaired.
  Result meta = Exec({kTune, "validate", "tiny/full_single_device", "device=meta", "--repair"});
  EXPECT_EQ(meta.code, 2) << meta.output;
  EXPECT_NE(meta.output.find("note: --repair: no repair is known for every problem below"), std::string::npos)
      << meta.output;

  // The tiny config with a support entry recording a run with the repair in this machine's column, and a paged
  // optimizer given on the command line: the record of that repair is named, and the repaired run trains.
  StatusOr<std::string> text = ReadFile(std::string(TM_SOURCE_DIR) + "/configs/tiny/full_single_device.yaml");
  ASSERT_TRUE(text.ok());
  const CpuColumn here = test::RunningCpuColumn();
  const std::string config = dir_ + "/paged.yaml";
  const std::string repair = "optimizer._component_=torch.optim.AdamW optimizer.fused=True";
  ASSERT_TRUE(WriteFileAtomically(config, text->substr(0, text->find("# --- BEGIN tune-matrix")) +
                                              "metadata:\n  support:\n" +
                                              here.Entry("invalid", "      repair: \"" + repair +
                                                                        "\"\n      repaired_status: runs\n"
                                                                        "      tokens_per_second: 812.5\n"
                                                                        "      device_name: \"AMD EPYC\"\n"
                                                                        "      verified_at: \"2026-12-05T09:00:00Z\"\n"
                                                                        "      host: vm\n"
                                                                        "      commit: 0123456789abcdef0123\n"))
                  .ok());
  const std::vector<std::string> args = {"optimizer=bitsandbytes.optim.PagedAdamW", "device=cpu",
                                         "output_dir=" + dir_ + "/out", "max_steps_per_epoch=1", "save_checkpoints=False"};
  std::vector<std::string> validate = {kTune, "validate", config};
  validate.insert(validate.end(), args.begin(), args.end());
  Result named = Exec(validate);
  EXPECT_EQ(named.code, 2) << named.output;
  EXPECT_NE(named.output.find("repair: with " + repair +
                              " it is valid on cpu\n  tune-matrix ran it with this repair "
                              "on " +
                              here.Key() +
                              " (AMD EPYC): runs · 812.5 tok/s (2026-12-05T09:00:00Z, vm, "
                              "0123456789ab)"),
            std::string::npos)
      << named.output;
  std::vector<std::string> run = {kTune, "run", "full_finetune_single_device", "--config", config, "--repair"};
  run.insert(run.end(), args.begin(), args.end());
  Result ran = Exec(run);
  EXPECT_EQ(ran.code, 0) << ran.output;
  EXPECT_NE(ran.output.find("note: --repair: applied " + repair + " for cpu; tune-matrix ran it with this repair"),
            std::string::npos)
      << ran.output;
  EXPECT_TRUE(PathExists(dir_ + "/out/summary.json")) << ran.output;
}

// The torch axis of a config's records: validate and run warn when this torch is older than the config's
// min_torch in this machine's device column, or when it was never measured in that column at all.
TEST_F(CliTest, ValidateAndRunWarnOfAnOlderTorchOrAnUnmeasuredColumn) {
  StatusOr<std::string> text = ReadFile(std::string(TM_SOURCE_DIR) + "/configs/tiny/full_single_device.yaml");
  ASSERT_TRUE(text.ok());
  const std::string plain = text->substr(0, text->find("# --- BEGIN tune-matrix"));
  const CpuColumn here = test::RunningCpuColumn();
  auto entry = [](const std::string& cpu_class, const std::string& torch) {
    return "    \"cpu (" + cpu_class + ", torch " + torch + ")\":\n      status: runs\n      cpu_class: \"" +
           cpu_class + "\"\n      torch_version: \"" + torch + "\"\n      torch_versions: \"" + torch +
           " runs\"\n"
           "      min_torch: \"" +
           torch + "\"\n";
  };
  const std::string newer = dir_ + "/newer.yaml", other = dir_ + "/other.yaml";
  ASSERT_TRUE(WriteFileAtomically(newer, plain + "metadata:\n  support:\n" + entry(here.cpu_class, "99.0.0")).ok());
  ASSERT_TRUE(WriteFileAtomically(other, plain + "metadata:\n  support:\n" + entry(here.Other(), here.torch)).ok());

  Result older = Exec({kTune, "validate", newer, "device=cpu"});
  EXPECT_EQ(older.code, 0) << older.output;
  EXPECT_NE(older.output.find("warning: " + newer + " runs on " + here.Device() +
                              " from torch 99.0.0 (its min_torch; measured there: 99.0.0 runs), and this is torch " +
                              here.torch + "\n"),
            std::string::npos)
      << older.output;
  Result unmeasured = Exec({kTune, "validate", other, "device=cpu"});
  EXPECT_EQ(unmeasured.code, 0) << unmeasured.output;
  EXPECT_NE(unmeasured.output.find("warning: tune-matrix never measured " + other + " on " + here.Device() +
                                   ": its records are of cpu (" + here.Other() + ", torch " + here.torch +
                                   ") (runs), another CPU class or device, and say nothing of this one\n"),
            std::string::npos)
      << unmeasured.output;
  // `tune run` says it before it trains.
  Result ran = Exec({kTune, "run", "full_finetune_single_device", "--config", newer, "device=cpu",
                     "output_dir=" + dir_ + "/out", "max_steps_per_epoch=1", "save_checkpoints=False"});
  EXPECT_EQ(ran.code, 0) << ran.output;
  EXPECT_NE(ran.output.find("warning: " + newer + " runs on " + here.Device() + " from torch 99.0.0"),
            std::string::npos)
      << ran.output;
}

// The numeric check's own test: a wrong attention kernel on the checked path (bf16 on cpu; the float32
// reference is left alone) makes the cell `wrong`, while the same cell without it agrees with its reference.
TEST_F(CliTest, AnInjectedWrongKernelMakesTheCellWrong) {
  const std::vector<std::string> cell = {kMatrix, "cell", "tiny/llama3_1_full_single_device", "--device", "cpu",
                                         "--work-dir", dir_};
  Result fault = Exec(cell, {{"TUNE_MATRIX_FAULT", "attention=4"}});
  EXPECT_EQ(fault.code, 1) << fault.output;
  EXPECT_NE(fault.output.find("FAILED tiny/llama3_1_full_single_device on cpu: wrong: its numbers disagree with the "
                              "reference: bf16 on cpu against float32 on cpu"),
            std::string::npos)
      << fault.output;
  Result clean = Exec(cell);
  EXPECT_EQ(clean.code, 0) << clean.output;
  EXPECT_NE(clean.output.find("  runs  "), std::string::npos) << clean.output;
  EXPECT_NE(clean.output.find("numbers: loss "), std::string::npos) << clean.output;
}

// Issue 53: a CTest cell's shares of the device's peaks come from the peaks a quiet `tune-matrix run` kept on
// this machine at the cell's threads (measuring them beside the other cells would read them low); without them it
// says so and records no share.
TEST_F(CliTest, ACellTakesThePeaksAQuietRunKeptAtItsThreads) {
  const std::vector<std::pair<std::string, std::string>> env = {{"TUNE_MATRIX_PEAK_CACHE", dir_ + "/peaks"}};
  auto cell = [&](const std::string& work) {
    return Exec({kMatrix, "cell", "tiny/full_single_device", "--device", "cpu", "--work-dir", dir_ + "/" + work}, env);
  };
  auto record = [&](const std::string& work) {
    StatusOr<std::string> text = ReadFile(dir_ + "/" + work + "/tiny_full_single_device__cpu.jsonl");
    return text.ok() ? nlohmann::json::parse(text->substr(0, text->find('\n'))) : nlohmann::json();
  };
  Result none = cell("none");
  ASSERT_EQ(none.code, 0) << none.output;
  const std::string said = "matmul peaks: none kept at 1 thread by a quiet run (";
  const size_t at = none.output.find(said);
  ASSERT_NE(at, std::string::npos) << none.output;
  const std::string path = none.output.substr(at + said.size(), none.output.find(')', at) - at - said.size());
  EXPECT_EQ(path.rfind(dir_ + "/peaks/", 0), 0u) << path;
  EXPECT_FALSE(record("none").contains("peak_flops")) << record("none").dump();

  ASSERT_TRUE(MakeDirs(dir_ + "/peaks").ok());
  ASSERT_TRUE(WriteFileAtomically(path, R"({"cpu": {"matmul_peak_flops": {"bf16": 1e12, "fp32": 5e11},
                                           "matmul_peak_threads": 1}})")
                  .ok());
  Result kept = cell("kept");
  ASSERT_EQ(kept.code, 0) << kept.output;
  EXPECT_NE(kept.output.find("matmul peaks: those a quiet run kept at 1 thread (" + path + ")"), std::string::npos)
      << kept.output;
  const nlohmann::json r = record("kept");
  ASSERT_TRUE(r.contains("peak_flops") && r.contains("flops_dtype")) << r.dump();
  EXPECT_DOUBLE_EQ(r["peak_flops"].get<double>(), r["flops_dtype"] == "bf16" ? 1e12 : 5e11) << r.dump();
}

TEST_F(CliTest, ValidateTellsWhichRecipeAConfigIsFor) {
  // A torchtune config of a recipe tune-matrix lacks is named as such, not checked against another recipe.
  std::string early = dir_ + "/7B_full_early_exit.yaml";
  ASSERT_TRUE(WriteFileAtomically(early,
                                  "# To launch, run the following command from root:\n"
                                  "#   tune run --nproc_per_node 8 dev/early_exit_finetune_distributed --config "
                                  "llama2/7B_full_early_exit\noutput_dir: /tmp/x\n")
                  .ok());
  Result r = Exec({kTune, "validate", early});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("this config is for torchtune's recipe 'dev/early_exit_finetune_distributed' (from its "
                          "comment `#   tune run --nproc_per_node 8 dev/early_exit_finetune_distributed"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("which tune-matrix does not implement (implemented: full_finetune_single_device, "
                          "lora_finetune_single_device, knowledge_distillation_single_device, qat_single_device, "
                          "lora_dpo_single_device, full_finetune_distributed, lora_finetune_distributed, "
                          "knowledge_distillation_distributed, qat_distributed, lora_dpo_distributed, "
                          "full_dpo_distributed, qat_lora_finetune_distributed, ppo_full_finetune_single_device, "
                          "generate, dev/generate_v2, dev/generate_v2_distributed, quantize, eleuther_eval)"),
            std::string::npos)
      << r.output;
  r = Exec({kTune, "validate", early, "--recipe", "dev/early_exit_finetune_distributed"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("recipe 'dev/early_exit_finetune_distributed' is torchtune's, but tune-matrix does not "
                          "implement it"),
            std::string::npos)
      << r.output;
  // A copied config is checked against the recipe its comment names, and says so.
  std::string copy = dir_ + "/qwen2_5/0.5B_full_single_device.yaml";
  ASSERT_EQ(Exec({kTune, "cp", "tiny/full_single_device", copy, "--make-parents"}).code, 0);
  r = Exec({kTune, "validate", copy, "device=cpu"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("note: recipe full_finetune_single_device from its comment `#   tune run "
                          "full_finetune_single_device --config tiny/full_single_device`"),
            std::string::npos)
      << r.output;
  // An interpolation resolver runs code: named as unsupported, not as a missing key.
  r = Exec({kTune, "validate", "tiny/full_single_device", "device=cpu", "batch_size=${eval:'1+1'}"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("uses the ${eval:...} interpolation resolver, which tune-matrix does not support"),
            std::string::npos)
      << r.output;
}

TEST_F(CliTest, LsVerboseShowsEachConfigsModelAndParameterCount) {
  Result r = Exec({kTune, "ls", "--verbose"});
  EXPECT_EQ(r.code, 0);
  size_t line = r.output.find("llama3_2/1B_lora_single_device ");
  ASSERT_NE(line, std::string::npos) << r.output;
  std::string row = r.output.substr(line, r.output.find('\n', line) - line);
  EXPECT_NE(row.find(" torchtune.models.llama3_2.lora_llama3_2_1b "), std::string::npos) << row;
  EXPECT_NE(r.output.find("1,235,814,400"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("8,030,261,248"), std::string::npos) << r.output;
}

TEST_F(CliTest, LsComponentsListsWhatAConfigCanNameByKind) {
  Result r = Exec({kTune, "ls", "--components", "optimizer"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("optimizer  tune_matrix.optim.AdamW  (torch.optim.AdamW)\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("optimizer  bitsandbytes.optim.PagedAdamW8bit\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("model  "), std::string::npos) << r.output;
  Result typo = Exec({kTune, "ls", "--components", "optimiser"});
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.output.find("no component kind 'optimiser'; did you mean 'optimizer'?"), std::string::npos)
      << typo.output;
}

TEST_F(CliTest, UnavailableDeviceNamesWhatIsThereAndHowToOverride) {
  // `run` needs the device; `validate` judges the config for the device type by the table's traits, and says so.
  Result run = Exec({kTune, "run", "lora_finetune_single_device", "--config", "tiny/lora_single_device", "device=xpu"});
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.output.find("device 'xpu' is not available on this machine (available: cpu"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("override it with device=cpu"), std::string::npos);
  // Where the matrix recorded it running, by column, with an override that works (a device type, not a column).
  EXPECT_NE(run.output.find("tune-matrix recorded this config as running on: cpu ("), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("(for example device=cpu)\n"), std::string::npos) << run.output;
  Result r = Exec({kTune, "validate", "llama3_2/1B_lora_single_device", "device=xpu"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("note: device 'xpu' is not available on this machine (available: cpu"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("was checked against what the device table knows of xpu (trains, bf16 and fp16, collectives "
                          "over xccl), not a probed device"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("is valid for recipe lora_finetune_single_device on xpu (xpu by its traits; not on this "
                          "machine)"),
            std::string::npos)
      << r.output;
  // What the type cannot do is still found: a paged optimizer on mps.
  Result paged = Exec({kTune, "validate", "llama3_2/1B_full_single_device", "device=mps"});
  EXPECT_EQ(paged.code, 2) << paged.output;
  EXPECT_NE(paged.output.find("a paged optimizer needs a cuda device"), std::string::npos) << paged.output;
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
       "model.lora_rnk: unknown key for component 'tune_matrix.models.lora_tiny_llama3_2'; did you mean 'lora_rank'?"},
      {{kTune, "validate", "tiny/lora_single_device", "batch_size=many"}, "batch_size: expected an integer, got 'many'"},
      {{kTune, "validate", "tiny/lora_single_device", "device=gpu0"}, "unknown device 'gpu0'"},
      {{kTune, "validate", "tiny/lora_single_device", "optimizer=torch.optim.Adamw"},
       "unknown component 'torch.optim.Adamw'; did you mean 'torch.optim.AdamW'?"},
      {{kTune, "validate", "tiny/lora_single_device", "dtype=fp16"}, "fp16 training is not supported"},
      // A component's key written at the top is found where it belongs.
      {{kTune, "validate", "tiny/lora_single_device", "lr=1e-4"},
       "lr: unknown key for recipe 'lora_finetune_single_device'; did you mean 'optimizer.lr' or 'lr_scheduler'?"},
      {{kTune, "validate", "tiny/lora_single_device", "optimizer.foo=1"},
       "optimizer.foo: unknown key for component 'tune_matrix.optim.AdamW' (it takes lr, weight_decay, eps, betas, "
       "amsgrad, fused and foreach)"},
      // Never the whole catalogue: a few close names and where the rest are listed; a family not implemented is
      // said to be one, not answered with another family's models.
      {{kTune, "validate", "tiny/lora_single_device", "model=torchtune.models.llama3_2.lora_llama3_2_1bb"},
       "; did you mean 'torchtune.models.llama3_2.lora_llama3_2_1b'"},
      {{kTune, "validate", "tiny/lora_single_device", "model=torchtune.models.flux.flux_1_autoencoder"},
       "; tune-matrix implements nothing of torchtune.models.flux yet (`tune ls --components model` lists all "},
      {{kTune, "cat", "tiny/lora_single_device", "nokey"}, "override 'nokey': expected key=value"},
      {{kTune, "run", "lora_finetune_single_devise", "--config", "tiny/lora_single_device"},
       "unknown recipe 'lora_finetune_single_devise'; did you mean 'lora_finetune_single_device'?"},
      {{kTune, "run", "dev/grpo_full_finetune_distributed", "--config", "tiny/lora_single_device"},
       "recipe 'dev/grpo_full_finetune_distributed' is torchtune's, but tune-matrix does not implement it"},
      {{kTune, "validate", "tiny/lora_single_device", "device=gpu"},
       "tiny/lora_single_device is not valid for recipe lora_finetune_single_device on device 'gpu' (1 problem)"},
      {{kTune, "validate", "tiny/lora_single_device", "device=gpu"}, "unknown device 'gpu'; did you mean 'cuda'?"},
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
  EXPECT_NE(r.output.find("Writing to " + dir_ + "/run: metrics " + dir_ + "/run/logs/metrics.jsonl, no checkpoints "
                          "(save_checkpoints=False), summary " + dir_ + "/run/summary.json\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Running 2 steps (1 epoch x 2 steps per epoch): max_steps_per_epoch=2 (the data gives "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" | 2/2 steps, elapsed "), std::string::npos) << r.output;
  struct stat st;
  EXPECT_EQ(::stat((dir_ + "/run/logs/metrics.jsonl").c_str(), &st), 0);
}

// Beside other work (here: a spinning thread per core) `tune run` on cpu says once that the machine is busy and
// trains with the cores it leaves free, one thread here, recorded in its summary (issue 56: 60 tiny steps took
// 2.26 s with 1 thread and 5.17 s with 2 beside a busy process). OMP_NUM_THREADS empty: ATen's threads unchosen.
TEST_F(CliTest, RunBesideOtherWorkWarnsOnceAndTrainsOnTheFreeCores) {
  const int cores = ReadUsableCores().count;
  if (cores < 2) GTEST_SKIP() << "one usable core: there is no thread count to choose";
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < cores; ++i) {
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  Result r = Exec({kTune, "run", "lora_finetune_single_device", "--config", "tiny/lora_single_device",
                   "max_steps_per_epoch=1", "save_checkpoints=False", "output_dir=" + dir_ + "/run", "--force"},
                  {{"OMP_NUM_THREADS", ""}});
  stop = true;
  for (std::thread& t : spinners) t.join();
  ASSERT_EQ(r.code, 0) << r.output;
  size_t warnings = 0;
  for (size_t at = r.output.find("the machine is busy"); at != std::string::npos;
       at = r.output.find("the machine is busy", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << r.output;
  EXPECT_NE(r.output.find("Threads: 1. warning: the machine is busy: other processes used "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("running with 1 thread of " + std::to_string(cores) +
                          " (the cores other work leaves free; OMP_NUM_THREADS=N chooses)"),
            std::string::npos)
      << r.output;
  StatusOr<RunSummary> summary = ReadRunSummary(dir_ + "/run");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->threads, 1);
}

// Issue 56: threads that would spin beside other work (here the user's 2 beside a spinning thread per core) wait
// passively: `tune run` starts itself again with OMP_WAIT_POLICY=PASSIVE, which GNU OpenMP itself then reports
// (OMP_DISPLAY_ENV=VERBOSE prints each process's spin count as libgomp loads: 300000 by default, 0 when passive;
// its OMP_WAIT_POLICY line reads PASSIVE even when unset), and says so. A policy the user set is kept.
TEST_F(CliTest, ThreadsThatWouldSpinBesideOtherWorkWaitPassivelyUnlessTheUserChose) {
  const int cores = ReadUsableCores().count;
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < std::max(cores, 1); ++i) {
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  const std::vector<std::string> run = {kTune, "run", "full_finetune_single_device", "--config",
                                        "tiny/full_single_device", "max_steps_per_epoch=1", "save_checkpoints=False",
                                        "output_dir=" + dir_ + "/run", "--force"};
  Result chosen = Exec(run, {{"OMP_NUM_THREADS", "2"}, {"OMP_WAIT_POLICY", ""}, {"OMP_DISPLAY_ENV", "VERBOSE"}});
  Result users = Exec(run, {{"OMP_NUM_THREADS", "2"}, {"OMP_WAIT_POLICY", "ACTIVE"}, {"OMP_DISPLAY_ENV", "VERBOSE"}});
  stop = true;
  for (std::thread& t : spinners) t.join();
  ASSERT_EQ(chosen.code, 0) << chosen.output;
  // The process that trains is the last one libgomp loaded in.
  const size_t spin = chosen.output.rfind("GOMP_SPINCOUNT = '");
  ASSERT_NE(spin, std::string::npos) << chosen.output;
  EXPECT_EQ(chosen.output.compare(spin, 21, "GOMP_SPINCOUNT = '0'\n"), 0) << chosen.output;
  EXPECT_NE(chosen.output.find("Threads: 2 (OMP_NUM_THREADS=2); waiting threads sleep (OMP_WAIT_POLICY=PASSIVE: "
                               "spinning ones would take the cores other work uses)"),
            std::string::npos)
      << chosen.output;
  EXPECT_EQ(chosen.output.find("TM_STARTUP_LOAD"), std::string::npos) << chosen.output;
  ASSERT_EQ(users.code, 0) << users.output;
  EXPECT_NE(users.output.find("OMP_WAIT_POLICY = 'ACTIVE'"), std::string::npos) << users.output;
  EXPECT_EQ(users.output.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << users.output;
  EXPECT_EQ(users.output.find("waiting threads sleep"), std::string::npos) << users.output;
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
  Result shard = Exec({kMatrix, "run", "--shard", "3/2"});
  EXPECT_EQ(shard.code, 2);
  EXPECT_NE(shard.output.find("--shard: '3/2' is not a shard; fix: write i/n with 1 <= i <= n"), std::string::npos)
      << shard.output;
  Result no_journal = Exec({kMatrix, "merge"});
  EXPECT_EQ(no_journal.code, 2);
  EXPECT_NE(no_journal.output.find("name at least one journal to merge"), std::string::npos) << no_journal.output;
  Result slowdown = Exec({kMatrix, "check", "--max-slowdown", "2"});
  EXPECT_EQ(slowdown.code, 2);
  Result unit = Exec({kMatrix, "check", "--min-step-time", "0.5s"});
  EXPECT_EQ(unit.code, 2);
  EXPECT_NE(unit.output.find("--min-step-time takes a finite number, not '0.5s'"), std::string::npos) << unit.output;
  Result fraction = Exec({kMatrix, "run", "--steps", "2.5"});
  EXPECT_EQ(fraction.code, 2);
  EXPECT_NE(fraction.output.find("--steps takes a whole number, not '2.5'"), std::string::npos) << fraction.output;
  Result expect = Exec({kMatrix, "check", "--expect-devices", "gpu"});
  EXPECT_EQ(expect.code, 2);
  EXPECT_NE(expect.output.find("--expect-devices:"), std::string::npos) << expect.output;
  Result limit = Exec({kMatrix, "run", "--time-limit", "-60"});
  EXPECT_EQ(limit.code, 2);
  EXPECT_NE(limit.output.find("--time-limit must be 0 (no limit) or a number of seconds, e.g. 3600"), std::string::npos)
      << limit.output;
  Result share = Exec({kMatrix, "plan", "--startup-share", "1"});
  EXPECT_EQ(share.code, 2);
  EXPECT_NE(share.output.find("--startup-share must be 0 (every cell trains --steps) or a share below 1"),
            std::string::npos)
      << share.output;
}

// `plan` says how many steps each cell will train: with --startup-share 0 exactly --steps.
TEST_F(CliTest, MatrixPlanShowsEachCellsSteps) {
  Result r = Exec({kMatrix, "plan", "--devices", "cpu", "--configs", "qwen*_single_device", "--startup-share", "0",
                   "--steps", "5"});
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string out = "\n" + r.output;
  size_t runnable = 0;
  // A cell too large or too slow runs proxies, each of the same steps.
  for (const std::string& start : {"\nrun ", "\nproxy "}) {
    for (size_t pos = 0; (pos = out.find(start, pos)) != std::string::npos;) {
      size_t end = out.find('\n', pos + 1);
      std::string line = out.substr(pos + 1, end - pos - 1);
      EXPECT_NE(line.find(start == "\nrun " ? ", 5 steps, about " : ", 5 steps each, about "), std::string::npos) << line;
      ++runnable;
      pos = end;
    }
  }
  EXPECT_GT(runnable, 0u) << r.output;
  // The last line totals the plan.
  EXPECT_NE(r.output.find(" cells: " + std::to_string(runnable) + " to run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("predicted to take about"), std::string::npos) << r.output;

  // --calibrate: a real-size cell that runs in full runs its proxies first, and the line says so (its status
  // stays the full run's to come, not a proxied one's).
  Result cal = Exec({kMatrix, "plan", "--devices", "cpu", "--configs", "qwen2/0.5B_lora_single_device", "--calibrate",
                     "--startup-share", "0", "--steps", "5"});
  ASSERT_EQ(cal.code, 0) << cal.output;
  const CpuColumn here = test::RunningCpuColumn();  // the column this machine plans and records in
  EXPECT_NE(("\n" + cal.output).find("\ncalibrate  " + here.Key() + "  qwen2/0.5B_lora_single_device  predicted "),
            std::string::npos)
      << cal.output;
  EXPECT_NE(cal.output.find(", 5 steps in full after proxies of 1 layer "), std::string::npos) << cal.output;
  EXPECT_EQ(cal.output.find("(fails)"), std::string::npos) << cal.output;
  EXPECT_NE(cal.output.find("1 cell: 1 to run (1 in full after their proxies)"), std::string::npos) << cal.output;

  // --time-limit: what does not fit is left for a later run, each such line and the total say so.
  Result limited = Exec({kMatrix, "plan", "--devices", "cpu", "--configs", "qwen*_single_device", "--time-limit", "1"});
  ASSERT_EQ(limited.code, 0) << limited.output;
  EXPECT_NE(("\n" + limited.output).find("\nlater      " + here.Key() + "  qwen"), std::string::npos) << limited.output;
  EXPECT_NE(limited.output.find("(left for a later run by --time-limit: "), std::string::npos) << limited.output;
  EXPECT_NE(limited.output.find(" left for a later run by --time-limit (about "), std::string::npos) << limited.output;
  EXPECT_NE(limited.output.find(": 1 to run"), std::string::npos) << limited.output;  // the oldest, whatever its time
}

// `tune run` names every input it lacks at once, before building a model or writing anything; `tune validate`
// lists them as warnings.
TEST_F(CliTest, RunNamesEveryMissingInputBeforeBuildingAnything) {
  const std::string weights = dir_ + "/Llama-3.2-1B-Instruct";
  const std::vector<std::string> overrides = {"device=cpu", "output_dir=" + dir_ + "/out",
                                              "checkpointer.checkpoint_dir=" + weights,
                                              "tokenizer.path=" + weights + "/original/tokenizer.model",
                                              "dataset.source=" + dir_ + "/no-such-hub/alpaca"};
  std::vector<std::string> run = {kTune, "run", "lora_finetune_single_device", "--config",
                                  "llama3_2/1B_lora_single_device"};
  run.insert(run.end(), overrides.begin(), overrides.end());
  Result r = Exec(run);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("llama3_2/1B_lora_single_device cannot run on this machine: 3 problems with the files it "
                          "reads or writes:"),
            std::string::npos)
      << r.output;
  for (const std::string& missing : std::vector<std::string>{
           "checkpointer.checkpoint_dir " + weights + " does not exist; fix: put the weights of meta-llama/Llama-3.2-1B",
        "tokenizer.path " + weights + "/original/tokenizer.model does not exist",
        "--output-dir " + weights + "`), set checkpointer.checkpoint_dir to where they are",
        std::string("dataset: alpaca_cleaned_dataset: ")}) {
    EXPECT_NE(r.output.find(missing), std::string::npos) << missing << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("Nothing was built or written"), std::string::npos) << r.output;
  // Before any start-up phase: no model built (a 1B model takes minutes here; the refusal takes under a second).
  EXPECT_EQ(r.output.find("Building model"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Loading"), std::string::npos) << r.output;
  EXPECT_FALSE(PathExists(dir_ + "/out"));  // the trainer makes it before building the model

  std::vector<std::string> validate = {kTune, "validate", "llama3_2/1B_lora_single_device"};
  validate.insert(validate.end(), overrides.begin(), overrides.end());
  Result v = Exec(validate);
  EXPECT_EQ(v.code, 0) << v.output;
  EXPECT_NE(v.output.find("warning: "), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("tokenizer.path " + weights + "/original/tokenizer.model does not exist"), std::string::npos)
      << v.output;
}

// An output folder that cannot be made fails like a missing input: at once, exit 2, naming the folder and the
// fix, with the inputs' problems in the same list; `tune validate` warns. A path under a regular file cannot be
// made even by root.
TEST_F(CliTest, RunNamesAnOutputFolderItCannotWriteBeforeBuildingAnything) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/notes.txt", "x").ok());
  const std::string out = dir_ + "/notes.txt/run";
  const std::string problem = "output_dir: output_dir " + out + " cannot be created or written: " + dir_ +
                              "/notes.txt is a regular file, not a folder (Not a directory); fix: pass another "
                              "output_dir=... (a folder this user may write)";
  Result r = Exec({kTune, "run", "lora_finetune_single_device", "--config", "tiny/lora_single_device", "device=cpu",
                   "output_dir=" + out, "dataset.source=" + dir_ + "/no-such-hub/alpaca"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("tiny/lora_single_device cannot run on this machine: 2 problems with the files it reads "
                          "or writes:"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(dir_ + "/no-such-hub/alpaca"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  override 'output_dir=" + out + "': " + problem + "\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Nothing was built or written."), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Building model"), std::string::npos) << r.output;

  // With stand-ins the inputs are not checked, but the outputs still are, before the model is built.
  Result stand_ins = Exec({kTune, "run", "lora_finetune_single_device", "--config", "tiny/lora_single_device",
                           "device=cpu", "output_dir=" + out, "--allow-stand-ins"});
  EXPECT_EQ(stand_ins.code, 2) << stand_ins.output;
  EXPECT_NE(stand_ins.output.find("error: cannot write this run's outputs:\n  override 'output_dir=" + out + "': " +
                                  problem),
            std::string::npos)
      << stand_ins.output;
  EXPECT_EQ(stand_ins.output.find("Building model"), std::string::npos) << stand_ins.output;

  Result v = Exec({kTune, "validate", "tiny/lora_single_device", "device=cpu", "output_dir=" + out});
  EXPECT_EQ(v.code, 0) << v.output;
  EXPECT_NE(v.output.find("warning: override 'output_dir=" + out + "': " + problem), std::string::npos) << v.output;
}

// A pattern that selects nothing is a mistake: exit 2 naming it, and a run writes nothing.
TEST_F(CliTest, AConfigPatternThatSelectsNothingIsAnError) {
  for (const std::string& command : {"plan", "run"}) {
    Result r = Exec({kMatrix, command, "--configs", "lama3*", "--journal", dir_ + "/j.jsonl", "--work-dir",
                     dir_ + "/runs", "--reports-dir", dir_ + "/reports", "--no-write-back"});
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("--configs 'lama3*' selects no built-in config"), std::string::npos) << r.output;
    EXPECT_FALSE(PathExists(dir_ + "/j.jsonl"));
    EXPECT_FALSE(PathExists(dir_ + "/runs"));
  }
}

// A checkout's configs copied to a scratch folder, so runs, merges and checks can write into them.
class MatrixCiTest : public CliTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(Exec({"cp", "-R", std::string(TM_SOURCE_DIR) + "/configs", configs_}).code, 0);
  }
  Result Matrix(std::vector<std::string> args) {
    // ctest keeps the machine busy: a disturbed cell is measured again at once, not after --quiet-wait.
    if (args.front() == "run") args.insert(args.begin() + 1, {"--quiet-wait", "0"});
    args.insert(args.begin(), kMatrix);
    return Exec(args, {{"TUNE_MATRIX_CONFIG_DIR", configs_}});
  }
  std::string Config(const std::string& name) { return ReadFile(configs_ + "/" + name + ".yaml").value(); }
  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  const std::string configs_ = dir_ + "/configs";
};

// A user's own config goes through plan, cell and run: its records go to matrix-results/ beside it (or where
// the flags say), never into the built-in configs or the checkout's journal and reports.
TEST_F(MatrixCiTest, AUserConfigGoesThroughPlanCellAndRunWithoutTouchingTheBuiltIns) {
  const std::string work = dir_ + "/work";
  const std::string mine = work + "/mine/my_lora.yaml";
  ASSERT_EQ(Exec({kTune, "cp", "tiny/lora_single_device", mine, "--make-parents"}).code, 0);
  const std::string written = ReadFile(mine).value();
  StatusOr<std::vector<std::string>> builtins = ListRegularFiles(configs_, ".yaml", nullptr);
  ASSERT_TRUE(builtins.ok());
  std::vector<std::string> before;
  for (const std::string& f : *builtins) before.push_back(ReadFile(f).value());
  const std::vector<std::pair<std::string, std::string>> env = {{"TUNE_MATRIX_CONFIG_DIR", configs_}};
  auto in_work = [&](std::vector<std::string> args) {
    // ctest keeps the machine busy: a disturbed cell is measured again at once, not after --quiet-wait.
    if (args.front() == "run") args.insert(args.begin() + 1, {"--quiet-wait", "0"});
    args.insert(args.begin(), {"env", "-C", work, kMatrix});
    return Exec(args, env);
  };

  Result plan = in_work({"plan", "--configs", "mine/my_lora.yaml", "--devices", "cpu"});
  EXPECT_EQ(plan.code, 0) << plan.output;
  EXPECT_NE(plan.output.find(test::RunningCpuColumn().Key() + "  my_lora  predicted"), std::string::npos)
      << plan.output;
  EXPECT_NE(plan.output.find("1 cell: 1 to run"), std::string::npos) << plan.output;

  Result cell = in_work({"cell", "mine/my_lora.yaml", "--device", "cpu"});
  EXPECT_EQ(cell.code, 0) << cell.output;
  // One peak memory: the matrix records what the run printed (not the tune-matrix image the cell was forked
  // from, which getrusage would count).
  StatusOr<std::string> record = ReadFile(work + "/runs/cells/my_lora__cpu.jsonl");
  ASSERT_TRUE(record.ok()) << cell.output;
  const size_t recorded_at = record->find("\"peak_memory_bytes\":");
  const size_t printed_at = record->find("peak memory ");
  ASSERT_NE(recorded_at, std::string::npos) << *record;
  ASSERT_NE(printed_at, std::string::npos) << *record;
  const double recorded = std::stod(record->substr(recorded_at + 20)) / (1 << 30);
  const double printed = std::stod(record->substr(printed_at + 12));
  EXPECT_NEAR(recorded, printed, 0.02 * printed) << *record;

  Result run = in_work({"run", "--configs", "mine", "--devices", "cpu"});
  EXPECT_EQ(run.code, 0) << run.output;
  StatusOr<std::string> journal = ReadFile(work + "/matrix-results/journal.jsonl");
  ASSERT_TRUE(journal.ok()) << run.output;
  EXPECT_NE(journal->find("\"config\":\"my_lora\""), std::string::npos) << *journal;
  StatusOr<std::string> support = ReadFile(work + "/matrix-results/SUPPORT.md");
  ASSERT_TRUE(support.ok()) << run.output;
  EXPECT_NE(support->find("| `my_lora` | `lora_finetune_single_device` | ✅ runs"), std::string::npos) << *support;

  // The checkout's journal is not the place for them; built-in names and files do not mix.
  ASSERT_TRUE(MakeDirs(dir_ + "/reports").ok());
  Result into = Matrix({"run", "--configs", mine, "--journal", dir_ + "/reports/journal.jsonl"});
  EXPECT_EQ(into.code, 2) << into.output;
  EXPECT_NE(into.output.find("a run of your own configs keeps its records apart from the built-in configs'"),
            std::string::npos)
      << into.output;
  EXPECT_FALSE(PathExists(dir_ + "/reports/journal.jsonl"));
  Result mixed = in_work({"run", "--configs", "tiny/*,mine/my_lora.yaml"});
  EXPECT_EQ(mixed.code, 2) << mixed.output;
  EXPECT_NE(mixed.output.find("--configs mixes built-in names (tiny/*) with config files"), std::string::npos)
      << mixed.output;

  EXPECT_EQ(ReadFile(mine).value(), written);
  for (size_t i = 0; i < builtins->size(); ++i) EXPECT_EQ(ReadFile((*builtins)[i]).value(), before[i]) << (*builtins)[i];
  EXPECT_FALSE(PathExists(dir_ + "/reports/SUPPORT.md"));
}

// `tune validate` of a user's file that is a built-in config as written shows what the matrix recorded for the
// built-in; an edited copy is a config of its own.
TEST_F(MatrixCiTest, ValidateOfACopyShowsTheBuiltInsRecordedSupport) {
  const std::string builtin = configs_ + "/tiny/lora_single_device.yaml";
  std::string text = ReadFile(builtin).value();
  const size_t at = text.find("tokens_per_second: ");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, text.find('\n', at) - at, "tokens_per_second: 1234.5");
  ASSERT_TRUE(WriteFileAtomically(builtin, text).ok());
  const std::vector<std::pair<std::string, std::string>> env = {{"TUNE_MATRIX_CONFIG_DIR", configs_}};
  const std::string copy = dir_ + "/mine.yaml";
  ASSERT_EQ(Exec({kTune, "cp", "tiny/lora_single_device", copy}, env).code, 0);

  Result r = Exec({kTune, "validate", copy, "device=cpu"}, env);
  EXPECT_EQ(r.code, 0) << r.output;
  // The committed record is the AMX machine's: named by its column whatever this machine's class and torch.
  EXPECT_NE(r.output.find("note: this file is the built-in config tiny/lora_single_device (the same values outside "
                          "its support block); tune-matrix "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("cpu (amx, torch 2.11.0): runs · 1234.5 tok/s · "), std::string::npos) << r.output;
  r = Exec({kTune, "validate", copy, "device=cpu", "batch_size=2"}, env);
  EXPECT_NE(r.output.find("that is the config as written, and your overrides change batch_size"), std::string::npos)
      << r.output;

  // Overrides of paths and logging cannot matter for the device: the record stands for them.
  r = Exec({kTune, "validate", copy, "device=cpu", "tokenizer.path=" + dir_ + "/tok.model", "log_every_n_steps=7"}, env);
  EXPECT_EQ(r.output.find("your overrides change"), std::string::npos) << r.output;

  // torchtune's own file of a mirrored config differs in layout, comments, quoting and order, not in values:
  // it is the built-in still. Without its support block, keys moved, a comment added, a flow list quoted.
  std::string text_only = StripGeneratedBlock(ReadFile(copy).value());
  const size_t device_line = text_only.find("\ndevice: ");
  ASSERT_NE(device_line, std::string::npos) << text_only;
  const size_t device_end = text_only.find('\n', device_line + 1);
  const std::string device = text_only.substr(device_line + 1, device_end - device_line);
  text_only.erase(device_line + 1, device_end - device_line);
  text_only = "# torchtune's layout\n" + device + text_only + "# tried with a larger batch\n";
  ASSERT_TRUE(WriteFileAtomically(copy, text_only).ok());
  r = Exec({kTune, "validate", copy, "device=cpu"}, env);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("is the built-in config tiny/lora_single_device (the same values"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("cpu (amx, torch 2.11.0): runs · 1234.5 tok/s · "), std::string::npos) << r.output;

  // The built-in's record of a repair speaks for the file too (it used to read "has not run it with this repair").
  const CpuColumn here = test::RunningCpuColumn();
  const std::string repair = "optimizer._component_=torch.optim.AdamW optimizer.fused=True";
  const std::string full = configs_ + "/tiny/full_single_device.yaml";
  const std::string full_text = StripGeneratedBlock(ReadFile(full).value());
  ASSERT_TRUE(WriteFileAtomically(full, full_text + "metadata:\n  support:\n" +
                                            here.Entry("invalid", "      repair: \"" + repair +
                                                                      "\"\n      repaired_status: runs\n"
                                                                      "      tokens_per_second: 812.5\n"
                                                                      "      verified_at: \"2026-12-05T09:00:00Z\"\n"))
                  .ok());
  const std::string twin = dir_ + "/full_as_torchtune_has_it.yaml";
  ASSERT_TRUE(WriteFileAtomically(twin, "# no support block here\n" + full_text).ok());
  r = Exec({kTune, "validate", twin, "device=cpu", "optimizer=bitsandbytes.optim.PagedAdamW"}, env);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("repair: with " + repair + " it is valid on cpu\n  tune-matrix ran it with this repair on " +
                          here.Key() + ": runs · 812.5 tok/s"),
            std::string::npos)
      << r.output;

  // A changed value is another config.
  const size_t rank = text_only.find("lora_rank: ");
  ASSERT_NE(rank, std::string::npos) << text_only;
  text_only.insert(rank + std::string("lora_rank: ").size(), "1");
  ASSERT_TRUE(WriteFileAtomically(copy, text_only).ok());
  r = Exec({kTune, "validate", copy, "device=cpu"}, env);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("is the built-in config"), std::string::npos) << r.output;
}

// The CI flow on one machine: two shards run separately, their journals merge, and check passes on the
// result; a corrupt journal is refused without touching any file.
// Issue 56: on a machine kept busy by other work (a spinning thread per core) every cell of a run still ends with
// a speed: measured again after waiting for quiet (--quiet-wait), and where still disturbed recorded as accepted
// (--accept-disturbed), which a merge publishes marked in the config's block.
TEST_F(MatrixCiTest, OnABusyMachineEveryCellEndsWithASpeedWaitedRetriedOrMarked) {
  const int cores = ReadUsableCores().count;
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < cores; ++i) {
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  const std::string journal = dir_ + "/busy.jsonl";
  Result run = Exec({kMatrix, "run", "--configs", "tiny/[fl][uo][lr][la]_single_device", "--devices", "cpu",
                     "--quiet-wait", "2", "--accept-disturbed", "--no-numeric-check", "--journal", journal,
                     "--work-dir", dir_ + "/runs", "--no-write-back"},
                    {{"TUNE_MATRIX_CONFIG_DIR", configs_}});
  stop = true;
  for (std::thread& t : spinners) t.join();
  ASSERT_EQ(run.code, 0) << run.output;
  const std::string text = ReadFile(journal).value();
  size_t records = 0, disturbed = 0;
  for (size_t start = 0, end; start < text.size(); start = end + 1) {
    end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    ++records;
    EXPECT_NE(line.find("\"tokens_per_second\":"), std::string::npos) << line;
    if (line.find("\"disturbed\":\"") != std::string::npos && line.find("\"disturbed\":\"\"") == std::string::npos) {
      ++disturbed;
      EXPECT_NE(line.find("\"disturbed_accepted\":true"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(records, 2u) << text;
  // Beside a spinning thread per core a cell is disturbed: it waited, was measured again, and was accepted.
  EXPECT_GT(disturbed, 0u) << text;
  EXPECT_NE(run.output.find("for it to be quiet before measuring"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("its speed is published marked where no undisturbed one stands"), std::string::npos)
      << run.output;
  Result merged = Matrix({"merge", journal, "--journal-out", dir_ + "/merged.jsonl", "--reports-dir",
                          dir_ + "/reports"});
  ASSERT_EQ(merged.code, 0) << merged.output;
  const std::string lora = Config("tiny/lora_single_device");
  const size_t here = lora.find("\"" + test::RunningCpuColumn().Key() + "\":");
  ASSERT_NE(here, std::string::npos) << lora;
  const std::string entry = lora.substr(here, lora.find("verified_at", here) - here);
  EXPECT_NE(entry.find("tokens_per_second: "), std::string::npos) << entry;
  EXPECT_NE(entry.find("speeds_disturbed: \"other processes used "), std::string::npos) << entry;
}

TEST_F(MatrixCiTest, ShardsMergeAndCheckLikeTheCiJobs) {
  std::vector<std::string> journal_text;
  for (const char* shard : {"1/2", "2/2"}) {
    std::string n = std::string(1, shard[0]);
    Result run = Matrix({"run", "--configs", "tiny/[fl][uo][lr][la]_single_device", "--devices", "cpu", "--shard",
                         shard, "--journal",
                         dir_ + "/journal-" + n + ".jsonl", "--junit", dir_ + "/junit-" + n + ".xml", "--job",
                         "cpu-shard-" + n, "--work-dir", dir_ + "/runs", "--no-write-back"});
    ASSERT_EQ(run.code, 0) << run.output;
    EXPECT_NE(run.output.find("1 cell in shard " + std::string(shard)), std::string::npos) << run.output;
    journal_text.push_back(ReadFile(dir_ + "/journal-" + n + ".jsonl").value());
    std::string junit = ReadFile(dir_ + "/junit-" + n + ".xml").value();
    EXPECT_EQ(Count(junit, "<testcase "), 1u) << junit;
    EXPECT_NE(junit.find("<testsuite name=\"tune-matrix.cpu\" tests=\"1\" failures=\"0\""), std::string::npos)
        << junit;
  }
  // The two tiny configs, one in each shard.
  for (const char* config : {"tiny/lora_single_device", "tiny/full_single_device"}) {
    std::string key = std::string("\"config\":\"") + config + "\"";
    EXPECT_EQ(Count(journal_text[0], key) + Count(journal_text[1], key), 1u) << config;
  }
  std::string untouched = Config("llama3_2/1B_lora_single_device");
  std::string lora_before = Config("tiny/lora_single_device");

  Result merged = Matrix({"merge", dir_ + "/journal-1.jsonl", dir_ + "/journal-2.jsonl", "--journal-out",
                          dir_ + "/merged.jsonl", "--reports-dir", dir_ + "/reports"});
  ASSERT_EQ(merged.code, 0) << merged.output;
  std::string lora = Config("tiny/lora_single_device");
  EXPECT_NE(lora, lora_before);
  // This machine's column runs; the committed records' column (another class, where this is no AMX machine) stays.
  const CpuColumn here = test::RunningCpuColumn();
  const size_t listed = lora.find("supported_devices: [");
  ASSERT_NE(listed, std::string::npos) << lora;
  EXPECT_NE(lora.substr(listed, lora.find('\n', listed) - listed).find("\"" + here.Key() + "\""), std::string::npos)
      << lora;
  EXPECT_NE(lora.find("job: \"cpu-shard-"), std::string::npos) << lora;
  EXPECT_EQ(Config("llama3_2/1B_lora_single_device"), untouched);
  EXPECT_NE(ReadFile(dir_ + "/reports/SUPPORT.md").value().find("tiny/full_single_device"), std::string::npos);

  Result ok = Matrix({"check", dir_ + "/merged.jsonl", "--expect-devices", "cpu", "--reports-dir", dir_ + "/reports"});
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find("tune-matrix check: OK"), std::string::npos) << ok.output;
  Result uncovered = Matrix({"check", dir_ + "/merged.jsonl", "--expect-devices", "cpu,cuda", "--reports-dir",
                             dir_ + "/reports"});
  EXPECT_EQ(uncovered.code, 1) << uncovered.output;
  EXPECT_NE(uncovered.output.find("no coverage (1):"), std::string::npos) << uncovered.output;
  EXPECT_NE(uncovered.output.find("fix: make sure the runner has the device (tune devices)"), std::string::npos);

  // A later observation in which the LoRA cell fails is newly broken; an edited config is stale.
  std::string merged_text = ReadFile(dir_ + "/merged.jsonl").value();
  std::string broken;
  for (size_t start = 0, end; start < merged_text.size(); start = end + 1) {
    end = merged_text.find('\n', start);
    std::string line = merged_text.substr(start, end - start);
    if (line.find("\"config\":\"tiny/lora_single_device\"") != std::string::npos) {
      line.replace(line.find("\"status\":\"runs\""), 15, "\"status\":\"fails\"");
      size_t at = line.find("\"verified_at\":\"") + 15;
      line.replace(at, 20, FormatUtc(UnixNow() + 60));  // after the run, within the clock skew readers allow
      broken += line + "\n";
    }
  }
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/broken.jsonl", broken).ok());
  // A value edited (a comment line in the first column would not count: it is prose, outside the hash).
  std::string edited = Config("tiny/full_single_device");
  ASSERT_NE(edited.find("\nbatch_size: 8\n"), std::string::npos);
  edited.replace(edited.find("\nbatch_size: 8\n"), 15, "\nbatch_size: 4\n");
  ASSERT_TRUE(WriteFileAtomically(configs_ + "/tiny/full_single_device.yaml", edited).ok());
  Result failing = Matrix({"check", dir_ + "/merged.jsonl", dir_ + "/broken.jsonl", "--reports-dir", dir_ + "/reports"});
  EXPECT_EQ(failing.code, 1) << failing.output;
  EXPECT_NE(failing.output.find("newly broken (1):\n  " + configs_ + "/tiny/lora_single_device.yaml:"),
            std::string::npos)
      << failing.output;
  // (The accept command also names reports/journal.jsonl first when the working folder has one.)
  EXPECT_NE(failing.output.find("fix: if expected, record it: tune-matrix merge "), std::string::npos) << failing.output;
  EXPECT_NE(failing.output.find(dir_ + "/merged.jsonl " + dir_ + "/broken.jsonl  (it writes supported_devices: ["),
            std::string::npos)
      << failing.output;
  EXPECT_NE(failing.output.find("] and support.\"" + here.Key() + "\".status: fails"), std::string::npos)
      << failing.output;
  // Stale in each column it has (this machine's, and the committed records' where that is another).
  EXPECT_NE(failing.output.find("stale (config changed since verified) ("), std::string::npos) << failing.output;
  EXPECT_NE(failing.output.find("\n  " + configs_ + "/tiny/full_single_device.yaml:"), std::string::npos)
      << failing.output;
  ASSERT_TRUE(WriteFileAtomically(configs_ + "/tiny/full_single_device.yaml",
                                  Config("tiny/full_single_device").substr(9)).ok());

  ASSERT_TRUE(WriteFileAtomically(dir_ + "/bad.jsonl", journal_text[0] + "{\"config\": oops\n").ok());
  Result refused = Matrix({"merge", dir_ + "/journal-2.jsonl", dir_ + "/bad.jsonl", "--journal-out",
                           dir_ + "/merged2.jsonl", "--reports-dir", dir_ + "/reports2"});
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_NE(refused.output.find(dir_ + "/bad.jsonl:2: not a JSON record"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("nothing was written"), std::string::npos) << refused.output;
  EXPECT_EQ(Config("tiny/lora_single_device"), lora);
  EXPECT_FALSE(PathExists(dir_ + "/merged2.jsonl"));
  EXPECT_FALSE(PathExists(dir_ + "/reports2"));
}

// The real binary stopped (SIGTERM, as CI cancelling a job sends) after its first cell: it exits 130 with
// that cell in the journal, and --resume runs only the rest.
TEST_F(CliTest, MatrixKilledMidRunKeepsFinishedCellsAndResumeFinishesTheRest) {
  const std::string journal = dir_ + "/journal.jsonl";
  // tiny/full_single_device and tiny/lora_single_device.
  std::vector<std::string> argv = {kMatrix, "run", "--configs", "tiny/[fl][uo][lr][la]_single_device", "--devices",
                                   "cpu", "--steps", "100", "--quiet-wait", "0",
                                   "--journal", journal, "--work-dir", dir_ + "/runs", "--no-write-back"};
  SubprocessSet set;
  SubprocessOptions o;
  o.argv = argv;
  o.env = {{"OMP_NUM_THREADS", "1"}};
  o.timeout_s = 300;
  ASSERT_TRUE(set.Add(o).ok());
  auto records = [&] {
    StatusOr<std::string> text = ReadFile(journal);
    return text.ok() ? std::count(text->begin(), text->end(), '\n') : 0;
  };
  while (set.running() > 0 && records() == 0) set.DoWork(100);
  ASSERT_EQ(set.running(), 1u) << "both cells finished before the kill; raise --steps";
  set.TerminateAll();
  std::unique_ptr<Subprocess> stopped = set.NextFinished();
  ASSERT_TRUE(stopped != nullptr);
  EXPECT_EQ(stopped->result().exit_code.value_or(-1), 130) << stopped->result().Describe() << "\n"
                                                           << stopped->result().output_tail;
  EXPECT_NE(stopped->result().output_tail.find("Run again with --resume"), std::string::npos)
      << stopped->result().output_tail;
  EXPECT_EQ(records(), 1);

  argv.push_back("--resume");
  Result resumed = Exec(argv);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("1 already in the journal"), std::string::npos) << resumed.output;
  std::string text = ReadFile(journal).value();
  EXPECT_EQ(records(), 2) << text;
  for (const char* config : {"tiny/lora_single_device", "tiny/full_single_device"}) {
    EXPECT_NE(text.find(std::string("\"config\":\"") + config + "\""), std::string::npos) << config;
  }
}

TEST_F(CliTest, CellSkipsADeviceThisMachineLacksAndResourceSpecListsItsGpus) {
  Result cell = Exec({kMatrix, "cell", "tiny/lora_single_device", "--device", "xpu", "--work-dir", dir_});
  EXPECT_EQ(cell.code, 77) << cell.output;
  EXPECT_NE(cell.output.find("SKIPPED tiny/lora_single_device on xpu: no xpu device on this machine"),
            std::string::npos)
      << cell.output;
  // Under `ctest --resource-spec-file`, the GPU CTest allots becomes the device.
  Result allotted = Exec({kMatrix, "cell", "tiny/lora_single_device", "--device", "cuda", "--work-dir", dir_},
                         {{"CTEST_RESOURCE_GROUP_0_GPUS", "id:3,slots:1"}});
  EXPECT_EQ(allotted.code, 77) << allotted.output;
  EXPECT_NE(allotted.output.find("on cuda:3: no cuda:3 device on this machine"), std::string::npos)
      << allotted.output;
  Result unknown = Exec({kMatrix, "cell", "tiny/lora", "--device", "cpu"});
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  Result spec = Exec({kMatrix, "resource-spec"});
  ASSERT_EQ(spec.code, 0) << spec.output;
  EXPECT_NE(spec.output.find("\"version\": {\n    \"major\": 1,\n    \"minor\": 0\n  }"), std::string::npos)
      << spec.output;
  EXPECT_NE(spec.output.find("\"gpus\": ["), std::string::npos) << spec.output;
}

}  // namespace
}  // namespace tmx
