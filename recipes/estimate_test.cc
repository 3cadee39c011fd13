// The fine-tuning recipes' cell estimate: how the configuration moves the prediction.
#include "recipes/estimate.h"

#include <gtest/gtest.h>

#include "harness/config_store.h"
#include "recipes/builtin.h"

namespace tmx::recipes {
namespace {

DeviceInfo Cpu() {
  DeviceInfo d;
  d.id = d.type = "cpu";
  return d;
}

CellEstimate Estimate(const std::string& config, std::vector<std::string> overrides, const DeviceInfo& device = Cpu()) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<LocatedConfig> located = LocateConfig(config, registry);
  EXPECT_TRUE(located.ok());
  StatusOr<Config> c = LoadResolvedConfig(*located, overrides, located->recipe, &registry);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<CellEstimate> e = located->recipe->estimate(*c, registry, device);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : CellEstimate();
}

// torchtune's 1B full config steps a paged 8-bit AdamW inside backward (CUDA only): swapped for AdamW.
std::vector<std::string> Full(std::vector<std::string> more) {
  std::vector<std::string> o = {"optimizer=torch.optim.AdamW", "optimizer_in_bwd=False"};
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

TEST(EstimateTest, TheConfigMovesThePrediction) {
  CellEstimate lora = Estimate("llama3_2/1B_lora_single_device", {});
  CellEstimate full = Estimate("llama3_2/1B_full_single_device", Full({"enable_activation_checkpointing=False"}));
  EXPECT_EQ(full.parameters, 1235814400);
  EXPECT_GT(lora.parameters, full.parameters);  // the adapters
  EXPECT_LT(lora.trainable_parameters, full.parameters / 20);
  EXPECT_LT(lora.peak_memory_bytes, full.peak_memory_bytes);
  EXPECT_LT(lora.work, full.work);  // no weight gradients for the frozen base

  CellEstimate checkpointed = Estimate("llama3_2/1B_full_single_device", Full({"enable_activation_checkpointing=True"}));
  EXPECT_LT(checkpointed.peak_memory_bytes, full.peak_memory_bytes);
  CellEstimate sgd = Estimate("llama3_2/1B_full_single_device",
                              {"enable_activation_checkpointing=False", "optimizer=torch.optim.SGD", "optimizer_in_bwd=False"});
  // AdamW keeps two bf16 states per trained parameter, plain SGD none.
  EXPECT_EQ(full.peak_memory_bytes - sgd.peak_memory_bytes, 2 * 2 * full.parameters);
  CellEstimate fp32 = Estimate("llama3_2/1B_full_single_device", Full({"enable_activation_checkpointing=False", "dtype=fp32"}));
  EXPECT_GT(fp32.peak_memory_bytes, full.peak_memory_bytes);
  CellEstimate batch8 = Estimate("llama3_2/1B_full_single_device", Full({"enable_activation_checkpointing=False", "batch_size=8"}));
  EXPECT_GT(batch8.peak_memory_bytes, full.peak_memory_bytes);
  EXPECT_DOUBLE_EQ(batch8.work, 2 * full.work);  // batch 4 in the config
}

TEST(EstimateTest, AcceleratorsDoNotCountTheHostRuntime) {
  DeviceInfo cuda;
  cuda.id = "cuda:0";
  cuda.type = "cuda";
  cuda.index = 0;
  EXPECT_EQ(Estimate("tiny/lora_single_device", {}).peak_memory_bytes -
                Estimate("tiny/lora_single_device", {}, cuda).peak_memory_bytes,
            int64_t{1} << 29);
}

}  // namespace
}  // namespace tmx::recipes
