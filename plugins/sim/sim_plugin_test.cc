// The simulated accelerator: in this process (loaded as `tune` loads it) its tensors, copies, statistics and the
// loud wrong-device failure; through `tune` its listing, a tiny config's losses against cpu's, and each switch.
#include <cstdlib>
#include <map>
#include <regex>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <gtest/gtest.h>

#include "harness/device_plugin.h"
#include "harness/run_summary.h"
#include "tests/cli_exec.h"

namespace tmx {
namespace {

using test::Exec;
using test::Result;

const at::Device kSim("privateuseone:0");

void LoadSim() {
  StatusOr<std::string> type = LoadDevicePlugin(TM_SIM_PLUGIN);
  ASSERT_TRUE(type.ok()) << type.status().message();
  ASSERT_EQ(*type, "sim");
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(SimPluginTest, ACpuTensorBesideSimTensorsFailsNamingTheOpButAScalarIsFine) {
  LoadSim();
  at::Tensor on_sim = at::ones({2, 3}).to(kSim);
  at::Tensor on_cpu = at::ones({2, 3});
  // The device's gate names the op; structured ops outside its native set (maximum, cat: PyTorch's wrapper runs
  // their meta function first) fail in PyTorch's own device check, naming both devices.
  const std::string added = ErrorOf([&] { (void)(on_sim + on_cpu); });
  EXPECT_NE(added.find("sim: aten::add.Tensor got a cpu tensor of shape [2, 3] beside sim tensors"),
            std::string::npos)
      << added;
  const std::string joined = ErrorOf([&] { (void)at::cat({on_sim, on_cpu}); });
  EXPECT_NE(joined.find("sim: aten::cat.out got a cpu tensor of shape [2, 3] beside sim tensors"), std::string::npos)
      << joined;
  const std::string maxed = ErrorOf([&] { (void)at::maximum(on_sim, on_cpu); });
  EXPECT_NE(maxed.find("found at least two devices, sim:0 and cpu"), std::string::npos) << maxed;
  EXPECT_NE(ErrorOf([&] { (void)at::mm(on_sim, on_cpu.t()); }).find("sim: aten::mm got a cpu tensor"),
            std::string::npos);
  at::Tensor sum = on_sim + at::scalar_tensor(2.0);
  EXPECT_EQ(sum.device().type(), c10::DeviceType::PrivateUse1);
  EXPECT_TRUE(at::equal(sum.cpu(), at::full({2, 3}, 3.0)));
}

TEST(SimPluginTest, CopiesGoBothWaysAndTheAllocatorCountsTheBytes) {
  LoadSim();
  c10::DeviceAllocator* allocator = c10::getDeviceAllocator(c10::DeviceType::PrivateUse1);
  const size_t aggregate = 0;
  const int64_t before = allocator->getDeviceStats(0).allocated_bytes[aggregate].current;
  at::Tensor host = at::randn({1000});
  {
    at::Tensor device = host.to(kSim);
    EXPECT_EQ(allocator->getDeviceStats(0).allocated_bytes[aggregate].current, before + 4000);
    EXPECT_TRUE(at::equal(device.cpu(), host));
    at::Tensor product = at::mm(device.view({10, 100}), device.view({100, 10}));  // the native mm
    EXPECT_TRUE(at::allclose(product.cpu(), at::mm(host.view({10, 100}), host.view({100, 10}))));
  }
  c10::CachingDeviceAllocator::DeviceStats stats = allocator->getDeviceStats(0);
  EXPECT_EQ(stats.allocated_bytes[aggregate].current, before);
  EXPECT_GE(stats.allocated_bytes[aggregate].peak, before + 4400);
  EXPECT_EQ(stats.reserved_bytes[aggregate].current, stats.allocated_bytes[aggregate].current);
  EXPECT_EQ(allocator->getMemoryInfo(0).second, size_t{8} << 30);
}

Result TuneSim(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
  args.insert(args.begin(), {test::kTune, "--device-plugin", TM_SIM_PLUGIN});
  return Exec(args, env);
}

TEST(SimPluginTest, TuneDevicesListsSimWithItsCapacity) {
  Result listed = TuneSim({"devices"});
  EXPECT_EQ(listed.code, 0) << listed.output;
  EXPECT_NE(listed.output.find("sim:0  tune-matrix simulated accelerator  memory 8.00 GiB  bf16 yes  fp16 yes  "
                               "memory-stats yes"),
            std::string::npos)
      << listed.output;
  Result smaller = TuneSim({"devices"}, {{"TM_SIM_MEMORY", "512MiB"}, {"TM_SIM_BF16", "0"}});
  EXPECT_NE(smaller.output.find("sim:0  tune-matrix simulated accelerator  memory 512.00 MiB  bf16 no"),
            std::string::npos)
      << smaller.output;
  Result bad = TuneSim({"devices"}, {{"TM_SIM_MEMORY", "lots"}});
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("TM_SIM_MEMORY='lots' is not a size"), std::string::npos) << bad.output;
}

// The memory bandwidth is measured on sim as on any device type (harness/memory_bandwidth.h), its buffers within
// an eighth of the device's capacity (here 4 MiB each); the matmul peak's products do not fit in 32 MiB and are
// skipped with a note instead of ending the program (they used to abort it with sim's out-of-memory error).
TEST(SimPluginTest, TheMemoryBandwidthIsMeasuredOnSim) {
  Result measured = TuneSim({"devices", "--device", "sim:0", "--matmul-peak"}, {{"TM_SIM_MEMORY", "32MiB"}});
  EXPECT_EQ(measured.code, 0) << measured.output;
  EXPECT_NE(measured.output.find("note: matmul peak bf16 not measured: sim: out of memory"), std::string::npos)
      << measured.output;
  for (const char* kernel : {"copy", "triad"}) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(measured.output, m,
                                  std::regex(std::string("memory bandwidth ") + kernel + ": ([0-9.]+) GB/s")))
        << measured.output;
    EXPECT_GT(std::stod(m[1]), 0.1) << kernel;  // host memory behind the simulated device: GB/s, not MB/s
  }
}

// `tune run` of the tiny LoRA config for 3 steps on `device`; the first and last loss it prints.
struct Losses {
  Result result;
  double first = 0, last = 0;
};
Losses RunTiny(const std::string& device, const std::string& dtype,
               std::vector<std::pair<std::string, std::string>> env = {}) {
  const char* tmp = std::getenv("TMPDIR");
  Losses losses;
  losses.result = TuneSim({"run", "lora_finetune_single_device", "--config", "tiny/lora_single_device",
                           "device=" + device, "dtype=" + dtype, "max_steps_per_epoch=3",
                           std::string("output_dir=") + (tmp ? tmp : "/tmp") + "/tm_sim_test_" + device},
                          env);
  std::smatch m;
  if (std::regex_search(losses.result.output, m, std::regex("first loss ([0-9.]+), last loss ([0-9.]+)"))) {
    losses.first = std::stod(m[1]);
    losses.last = std::stod(m[2]);
  }
  return losses;
}

TEST(SimPluginTest, ATinyConfigTrainsOnSimAsOnCpu) {
  for (const std::string dtype : {"fp32", "bf16"}) {
    Losses cpu = RunTiny("cpu", dtype);
    Losses sim = RunTiny("sim", dtype);
    ASSERT_EQ(cpu.result.code, 0) << cpu.result.output;
    ASSERT_EQ(sim.result.code, 0) << sim.result.output;
    EXPECT_NE(sim.result.output.find("(sim_allocator)"), std::string::npos) << sim.result.output;
    // fp32: the same CPU kernels on the same bits; bf16: measured 7.04144 against cpu's 7.04214 (1e-4).
    const double tolerance = dtype == "fp32" ? 1e-6 : 2e-3;
    EXPECT_NEAR(sim.first, cpu.first, tolerance * cpu.first) << dtype;
    EXPECT_NEAR(sim.last, cpu.last, tolerance * cpu.last) << dtype;
    EXPECT_GT(sim.first, 1.0) << sim.result.output;
  }
}

// The same model evaluated on two devices scores the same (recipes/eleuther_eval.h): a second, independent check of
// an evaluation cell's numbers. fp32: measured 5e-8 apart (the log-likelihoods 9e-6: sim takes ATen's kernels where
// cpu takes the fused ones); bf16: 0.0016 of 0.23 apart (log-likelihoods up to 0.09 of about 600).
TEST(SimPluginTest, AnEvaluationScoresOnSimAsOnCpu) {
  const char* tmp = std::getenv("TMPDIR");
  for (const std::string dtype : {"fp32", "bf16"}) {
    std::map<std::string, double> acc;
    for (const std::string device : {"cpu", "sim"}) {
      const std::string out = std::string(tmp ? tmp : "/tmp") + "/tm_sim_eval_" + device + "_" + dtype;
      Result run = TuneSim({"run", "eleuther_eval", "--config", "tiny/eleuther_evaluation", "device=" + device,
                            "dtype=" + dtype, "output_dir=" + out});
      ASSERT_EQ(run.code, 0) << run.output;
      StatusOr<RunSummary> summary = ReadRunSummary(out);
      ASSERT_TRUE(summary.ok()) << summary.status().ToString();
      ASSERT_EQ(summary->scores.count("truthfulqa_mc2/acc"), 1u) << run.output;
      acc[device] = summary->scores.at("truthfulqa_mc2/acc");
    }
    EXPECT_NEAR(acc["sim"], acc["cpu"], dtype == "fp32" ? 1e-6 : 1e-2) << dtype;
    EXPECT_GT(acc["cpu"], 0) << dtype;
  }
}

TEST(SimPluginTest, EachSwitchMakesTheRunFailOrGoWrongAsItSays) {
  Losses oom = RunTiny("sim", "fp32", {{"TM_SIM_MEMORY", "1M"}});
  EXPECT_NE(oom.result.code, 0);
  EXPECT_NE(oom.result.output.find("sim: out of memory: tried to allocate"), std::string::npos) << oom.result.output;
  EXPECT_NE(oom.result.output.find("of the device's 1.00 MiB allocated"), std::string::npos) << oom.result.output;
  Losses removed = RunTiny("sim", "fp32", {{"TM_SIM_REMOVE_OPS", "aten::mm"}});
  EXPECT_NE(removed.result.code, 0);
  EXPECT_NE(removed.result.output.find("sim: aten::mm is removed from the simulated device"), std::string::npos)
      << removed.result.output;
  Losses wrong = RunTiny("sim", "fp32", {{"TM_SIM_WRONG_OP", "mm"}});
  Losses right = RunTiny("sim", "fp32");
  ASSERT_EQ(wrong.result.code, 0) << wrong.result.output;
  EXPECT_GT(std::abs(wrong.first - right.first), 0.01 * right.first) << wrong.first << " vs " << right.first;
  Losses no_bf16 = RunTiny("sim", "bf16", {{"TM_SIM_BF16", "0"}});
  EXPECT_NE(no_bf16.result.code, 0);
  EXPECT_NE(no_bf16.result.output.find("with dtype=fp32 it is valid on sim:0"), std::string::npos)
      << no_bf16.result.output;
}

TEST(SimPluginTest, ThePlanHasASimColumn) {
  Result plan = Exec({test::kMatrix, "plan", "--device-plugin", TM_SIM_PLUGIN, "--devices", "cpu,sim", "--configs",
                      "tiny/lora_single_device"});
  EXPECT_EQ(plan.code, 0) << plan.output;
  EXPECT_NE(plan.output.find("run        sim:0 (torch "), std::string::npos) << plan.output;
  EXPECT_NE(plan.output.find("run        cpu ("), std::string::npos) << plan.output;
}

// A matrix cell on sim (`tune-matrix cell`, which writes neither configs nor reports): the numeric check compares
// it with cpu's float32 reference, so a wrong kernel makes it `wrong` and a removed one `fails` naming the op.
TEST(SimPluginTest, AMatrixCellOnSimRunsGoesWrongOrFailsAsTheSwitchesSay) {
  const char* tmp = std::getenv("TMPDIR");
  auto cell = [&](const std::string& name, std::vector<std::pair<std::string, std::string>> env) {
    return Exec({test::kMatrix, "cell", "tiny/lora_single_device", "--device", "sim", "--device-plugin", TM_SIM_PLUGIN,
                 "--work-dir", std::string(tmp ? tmp : "/tmp") + "/tm_sim_cell_" + name},
                env);
  };
  Result runs = cell("runs", {});
  EXPECT_EQ(runs.code, 0) << runs.output;
  EXPECT_NE(runs.output.find("tiny/lora_single_device  elapsed"), std::string::npos) << runs.output;
  EXPECT_NE(runs.output.find("runs  "), std::string::npos) << runs.output;
  EXPECT_NE(runs.output.find("numbers: loss 0.00% off float32, grad norm 0.00%"), std::string::npos) << runs.output;
  Result wrong = cell("wrong", {{"TM_SIM_WRONG_OP", "mm"}});
  EXPECT_EQ(wrong.code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("FAILED tiny/lora_single_device on sim:0: wrong: its numbers disagree with the "
                              "reference: fp32 on sim:0 against float32 on cpu"),
            std::string::npos)
      << wrong.output;
  Result fails = cell("fails", {{"TM_SIM_REMOVE_OPS", "mm"}});
  EXPECT_EQ(fails.code, 1) << fails.output;
  EXPECT_NE(fails.output.find("FAILED tiny/lora_single_device on sim:0: fails: lora_finetune_single_device failed "
                              "on sim:0: sim: aten::mm is removed from the simulated device"),
            std::string::npos)
      << fails.output;
}

}  // namespace
}  // namespace tmx
