#include "recipes/vision_training.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <fstream>

#include "recipes/checkpoint/hf_vision.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/finetune.h"
#include "tests/in_process_run.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

// The tiny vision model on the shipped instructions (text only), 20 steps on the cpu in float32.
constexpr const char* kTinyVision = R"(# Config for full_finetune_single_device with the tiny Llama 3.2 Vision model.
#   tune run full_finetune_single_device --config tiny_vision.yaml
output_dir: /tmp/unused
model:
  _component_: tune_matrix.models.tiny_llama3_2_vision
  decoder_trainable: True
tokenizer:
  _component_: tune_matrix.data.byte_tokenizer
  max_seq_len: 256
dataset:
  _component_: torchtune.datasets.alpaca_dataset
  source: tune-matrix/tiny_instruct
  train_on_input: False
seed: 1234
batch_size: 4
collate_fn: torchtune.data.padded_collate_tiled_images_and_mask
optimizer:
  _component_: torch.optim.AdamW
  lr: 3e-3
lr_scheduler:
  _component_: torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup
  num_warmup_steps: 2
loss:
  _component_: torchtune.modules.loss.LinearCrossEntropyLoss
max_steps_per_epoch: 20
device: cpu
dtype: fp32
)";

class VisionTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(config_) << kTinyVision;
  }

  // The config file through `kind` and `launch`'s recipe (its schema defaults applied), in this process.
  InProcessRun Run(std::vector<std::string> overrides, TrainKind kind = TrainKind::kFull,
                   RecipeLaunch launch = RecipeLaunch::kOneProcess) {
    overrides.push_back("output_dir=" + scratch_.path() + "/" + std::to_string(runs_++));
    const RecipeSpec recipe = FinetuneRecipe(kind, launch);
    InProcessRun run;
    StatusOr<LocatedConfig> located = LocateConfig(config_, BuiltinRegistry());
    EXPECT_TRUE(located.ok()) << located.status().ToString();
    StatusOr<Config> config = LoadResolvedConfig(*located, overrides, &recipe, &BuiltinRegistry());
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    RunContext context;
    context.registry = &BuiltinRegistry();
    context.device = *ProbeDevice(*ParseDeviceSelector("cpu"));
    std::ostringstream out;
    context.out = &out;
    run.status = recipe.run(*config, context);
    run.printed = out.str();
    run.output_dir = config->Find("output_dir").Scalar();
    StatusOr<std::string> text = ReadFile(run.output_dir + "/summary.json");
    if (text.ok()) run.summary = nlohmann::json::parse(*text);
    return run;
  }

  static double Mean(const std::vector<double>& v, size_t from, size_t n) {
    double s = 0;
    for (size_t i = from; i < from + n; ++i) s += v[i];
    return s / static_cast<double>(n);
  }

  test::ScratchDir scratch_{"vision_training_test"};
  const std::string config_ = scratch_.path() + "/tiny_vision.yaml";
  int runs_ = 0;
};

TEST_F(VisionTrainingTest, TheTinyModelLearnsAndSavesAHuggingFaceCheckpoint) {
  InProcessRun run = Run({});
  ASSERT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
  const std::vector<double> losses = run.summary["losses"].get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 20u);
  std::cout << "tiny vision losses: first " << losses.front() << ", last " << losses.back() << "\n";
  EXPECT_LT(Mean(losses, 17, 3), Mean(losses, 0, 3) - 0.5);
  EXPECT_EQ(run.summary["trainable_parameters"], run.summary["total_parameters"]);
  auto saved = checkpoint::LoadSafetensors(run.output_dir + "/epoch_0/model.safetensors");
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  const models::VisionModelArgs& args = models::FindVisionPreset("tiny_llama3_2_vision")->args;
  auto tune = checkpoint::MllamaHfToTune(saved->tensors, args, "epoch_0");
  ASSERT_TRUE(tune.ok()) << tune.status().ToString();
}

TEST_F(VisionTrainingTest, ALoraDecoderTrainsOnlyItsAdapters) {
  std::ofstream(config_) << std::string(kTinyVision)
                                .replace(std::string(kTinyVision).find("tiny_llama3_2_vision\n  decoder_trainable: True"),
                                         std::string("tiny_llama3_2_vision\n  decoder_trainable: True").size(),
                                         "lora_tiny_llama3_2_vision\n  decoder_trainable: lora\n"
                                         "  lora_attn_modules: [q_proj, v_proj]\n  apply_lora_to_mlp: True");
  InProcessRun run = Run({"save_checkpoints=False"}, TrainKind::kLora);
  ASSERT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
  const std::vector<double> losses = run.summary["losses"].get<std::vector<double>>();
  EXPECT_LT(Mean(losses, 17, 3), Mean(losses, 0, 3));
  // Only adapters train (of the decoder's layers, and of the encoder and fusion layers, lora by default).
  const int64_t trained = run.summary["trainable_parameters"].get<int64_t>();
  EXPECT_GT(trained, 0);
  EXPECT_LT(trained, run.summary["total_parameters"].get<int64_t>() / 2);
}

TEST_F(VisionTrainingTest, WhatIsNotBuiltIsRefusedBeforeAnythingRuns) {
  InProcessRun run = Run({"enable_activation_checkpointing=True"}, TrainKind::kFull, RecipeLaunch::kRanks);
  ASSERT_EQ(run.status.code(), Status::Code::kFailedPrecondition) << run.status.ToString();
  EXPECT_NE(run.status.message().find("full_finetune_distributed with a Llama 3.2 Vision model is not built"),
            std::string::npos)
      << run.status.message();
  EXPECT_NE(run.status.message().find("enable_activation_checkpointing: activation checkpointing is not built"),
            std::string::npos);
  EXPECT_TRUE(run.summary.is_null());  // nothing written
}

}  // namespace
}  // namespace tmx::recipes
