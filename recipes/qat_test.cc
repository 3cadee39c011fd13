// The quantisation-aware training recipes (QatRecipe in qat.h) end to end on the tiny configs, in-process on
// the CPU: fake quantisation changes training exactly where it is on, and its settings are checked against the
// model before anything runs.
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "harness/config_store.h"
#include "harness/device_hooks.h"
#include "recipes/builtin.h"
#include "recipes/estimate.h"
#include "recipes/finetune.h"
#include "recipes/qat.h"
#include "tests/in_process_run.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

class QatTest : public ::testing::Test {
 protected:
  StatusOr<Config> Load(const std::string& name, std::vector<std::string> overrides) {
    const Registry& registry = BuiltinRegistry();
    StatusOr<LocatedConfig> located = LocateConfig(name, registry);
    if (!located.ok()) return located.status();
    return LoadResolvedConfig(*located, overrides, located->recipe, &registry);
  }

  // Runs a tiny config for 4 steps in fp32 on the cpu, in one process; returns summary.json (and what it printed).
  nlohmann::json Run(const std::string& name, bool lora, std::vector<std::string> overrides,
                     std::string* printed = nullptr) {
    overrides.insert(overrides.begin(), {"device=cpu", "dtype=fp32", "max_steps_per_epoch=4", "save_checkpoints=False",
                                         "output_dir=" + scratch_.path() + "/" + std::to_string(runs_++)});
    // In one process: a QAT config through its QAT recipe, any other through plain fine-tuning.
    const TrainKind kind = lora ? TrainKind::kLora : TrainKind::kFull;
    const bool qat = name.find("qat") != std::string::npos;
    const InProcessRun run = RunInProcess(name, overrides,
                                          RecipeRun(qat ? QatRecipe(kind, RecipeLaunch::kOneProcess)
                                                        : FinetuneRecipe(kind, RecipeLaunch::kOneProcess)));
    EXPECT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
    if (printed != nullptr) *printed = run.printed;
    return run.summary;
  }

  std::vector<Problem> Problems(const std::string& name, const std::vector<std::string>& overrides) {
    StatusOr<Config> c = Load(name, overrides);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return {};
    const Registry& registry = BuiltinRegistry();
    const RecipeSpec* recipe = registry.FindRecipe(LocateConfig(name, registry)->recipe->name);
    return ValidateConfig(*c, *recipe, registry, nullptr);
  }

  test::ScratchDir scratch_{"tm_qat_test"};
  int runs_ = 0;
};

// tiny/qat_distributed and tiny/qat_lora_distributed are tiny/full_distributed and tiny/lora_distributed plus the
// quantizer; here each runs as one process.
TEST_F(QatTest, TrainsAsFullFineTuningUntilFakeQuantisationStartsThenDiffers) {
  const nlohmann::json full = Run("tiny/full_distributed", false, {});
  std::string printed;
  const nlohmann::json delayed = Run("tiny/qat_distributed", false, {"fake_quant_after_n_steps=2"}, &printed);
  ASSERT_EQ(full["losses"].size(), 4u);
  ASSERT_EQ(delayed["losses"].size(), 4u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(delayed["losses"][i], full["losses"][i]) << i;
  EXPECT_GT(std::abs(delayed["losses"][2].get<double>() - full["losses"][2].get<double>()), 1e-4)
      << delayed["losses"] << " " << full["losses"];
  EXPECT_EQ(delayed["recipe"], "qat_single_device");
  EXPECT_NE(printed.find("Quantisation-aware training: 14 linears compute with int8 per-token activations and int4 "
                         "weights in groups of 32"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("step 1: fake quantisation off until step 3 (fake_quant_after_n_steps=2)"), std::string::npos);
  EXPECT_NE(printed.find("step 3: fake quantisation on (fake_quant_after_n_steps=2)"), std::string::npos);

  // From the first step: the quantised forward's loss is near the plain one's, not equal, and training lowers it.
  const nlohmann::json qat = Run("tiny/qat_distributed", false, {"max_steps_per_epoch=12"});
  const double first = qat["losses"][0].get<double>(), plain = full["losses"][0].get<double>();
  EXPECT_GT(std::abs(first - plain), 1e-4);
  EXPECT_LT(std::abs(first - plain), 0.05 * plain);
  EXPECT_LT(qat["losses"][11].get<double>(), first);
}

TEST_F(QatTest, LoraQatFakeQuantisesTheAdaptedLinearsOnly) {
  std::string printed;
  const nlohmann::json qat = Run("tiny/qat_lora_distributed", true, {}, &printed);
  ASSERT_EQ(qat["losses"].size(), 4u);
  // q_proj, v_proj, output_proj and the three MLP projections of 2 layers; k_proj stays plain.
  EXPECT_NE(printed.find("Quantisation-aware training: 12 linears"), std::string::npos) << printed;
  const nlohmann::json lora = Run("tiny/lora_distributed", true, {});
  EXPECT_EQ(qat["trainable_parameters"], lora["trainable_parameters"]);
  EXPECT_GT(std::abs(qat["losses"][0].get<double>() - lora["losses"][0].get<double>()), 1e-4);
  // Never switched on: LoRA fine-tuning, loss for loss.
  const nlohmann::json off = Run("tiny/qat_lora_distributed", true, {"fake_quant_after_n_steps=4"});
  EXPECT_EQ(off["losses"], lora["losses"]);
}

TEST_F(QatTest, AGroupSizeTheModelCannotTakeIsRefusedBeforeRunning) {
  // LoRA: an adapted linear whose inputs the group size does not divide is an error (torchtune raises too).
  std::vector<Problem> lora = Problems("tiny/qat_lora_distributed", {"quantizer.groupsize=48"});
  ASSERT_EQ(lora.size(), 1u);
  EXPECT_EQ(lora[0].key, "quantizer.groupsize");
  EXPECT_EQ(lora[0].message.rfind("48 does not divide layers.0.attn.q_proj's 64 inputs; choose a group size", 0), 0u)
      << lora[0].message;
  // Full: torchao skips what it cannot group, but a size that fits no linear at all would quantise nothing.
  std::vector<Problem> full = Problems("tiny/qat_single_device", {"quantizer.groupsize=96"});
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(full[0].key, "quantizer.groupsize");
  EXPECT_NE(full[0].message.find("96 divides the inputs of no linear"), std::string::npos) << full[0].message;
  // The schema's own bound, and an unknown quantizer.
  std::vector<Problem> tiny = Problems("tiny/qat_single_device", {"quantizer.groupsize=1"});
  ASSERT_EQ(tiny.size(), 1u);
  EXPECT_EQ(tiny[0].key, "quantizer.groupsize");
  std::vector<Problem> other =
      Problems("tiny/qat_single_device", {"quantizer._component_=torchtune.training.quantization.Int4WeightOnlyQuantizer"});
  ASSERT_FALSE(other.empty());
  EXPECT_EQ(other[0].key, "quantizer._component_");
  EXPECT_TRUE(Problems("tiny/qat_single_device", {"quantizer.groupsize=64"}).empty());
}

TEST_F(QatTest, TheEstimateAddsTheFakeQuantisedCopies) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<Config> c = Load("llama3_2/3B_qat_full", {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const DeviceInfo device = *ProbeDevice(*ParseDeviceSelector("cpu"));
  StatusOr<CellEstimate> qat = registry.FindRecipe("qat_distributed")->estimate(*c, registry, device);
  StatusOr<CellEstimate> full = registry.FindRecipe("full_finetune_distributed")->estimate(*c, registry, device);
  StatusOr<double> extra = EstimateFakeQuantizationBytes(*c, registry, device, TrainKind::kFull,
                                                         device.traits().matrix_ranks);
  ASSERT_TRUE(qat.ok() && full.ok() && extra.ok());
  // Llama 3.2 3B, bf16, activation checkpointing: one layer's fake-quantised weights (~100M, 2 bytes) and inputs,
  // per rank on the host.
  EXPECT_GT(*extra, 2.0 * 100e6);
  EXPECT_EQ(qat->peak_memory_bytes, full->peak_memory_bytes + static_cast<int64_t>(*extra));
  EXPECT_EQ(qat->work, full->work);
  // fp16 has no one-pass loop on cpu: its operations' float32 temporaries for the largest weight come on top (at
  // least an MLP matrix's, 3072 x 8192, 12 bytes each).
  StatusOr<Config> half = Load("llama3_2/3B_qat_full", {"dtype=fp16"});
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  StatusOr<double> with_temporaries = EstimateFakeQuantizationBytes(*half, registry, device, TrainKind::kFull,
                                                                    device.traits().matrix_ranks);
  ASSERT_TRUE(with_temporaries.ok());
  EXPECT_GE(*with_temporaries - *extra, 12.0 * 3072 * 8192);
}

}  // namespace
}  // namespace tmx::recipes
