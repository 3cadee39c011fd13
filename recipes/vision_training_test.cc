#include "recipes/vision_training.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <fstream>

#include "recipes/checkpoint/hf_vision.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/data/image_collate.h"
#include "recipes/data/samples.h"
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
  InProcessRun run = Run({"enable_activation_checkpointing=True"});
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
  // Started from that checkpoint (Hugging Face's checkpointer), the next run's first loss is the trained model's.
  InProcessRun again = Run({"max_steps_per_epoch=2", "save_checkpoints=False",
                            "checkpointer._component_=torchtune.training.FullModelHFCheckpointer",
                            "checkpointer.checkpoint_dir=" + run.output_dir + "/epoch_0",
                            "checkpointer.checkpoint_files=[model.safetensors]", "checkpointer.model_type=LLAMA3_VISION",
                            "checkpointer.output_dir=" + run.output_dir + "/again"});
  ASSERT_TRUE(again.status.ok()) << again.status.ToString() << "\n" << again.printed;
  EXPECT_LT(again.summary["losses"][0].get<double>(), losses.front() - 0.5);
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

// The Cauldron's shipped sample (three records, four PPM images) through llama3_2_vision_transform (the byte-level
// tiktoken sample with Llama 3's special tokens at 256..512, so <|image|> is the tiny model's first fusion token)
// and the tiled collate into LoRA on every part.
TEST_F(VisionTrainingTest, TheTinyModelLearnsFromImagesAndText) {
  const std::string samples = data::SamplesDir();
  std::string yaml = kTinyVision;
  const std::string text_data = yaml.substr(yaml.find("tokenizer:"), yaml.find("seed:") - yaml.find("tokenizer:"));
  yaml.replace(yaml.find(text_data), text_data.size(),
               "tokenizer:\n  _component_: torchtune.models.llama3_2_vision.llama3_2_vision_transform\n"
               "  path: " + samples + "/tokenizers/tiktoken_bytes.model\n"
               "  special_tokens_path: " + samples + "/tokenizers/tiny_vision_special_tokens.json\n"
               "  image_size: 28\n  max_seq_len: 256\n"
               "dataset:\n  _component_: torchtune.datasets.multimodal.the_cauldron_dataset\n  source: json\n"
               "  data_files: " + samples + "/datasets/cauldron_sample.json\n");
  std::ofstream(config_) << yaml;
  InProcessRun run = Run({"model=tune_matrix.models.lora_tiny_llama3_2_vision", "model.decoder_trainable=lora",
                          "model.encoder_trainable=lora", "model.fusion_trainable=lora",
                          "model.lora_attn_modules=[q_proj,v_proj,output_proj]", "model.apply_lora_to_mlp=True",
                          "batch_size=2", "epochs=10", "max_steps_per_epoch=null", "optimizer.lr=1e-2",
                          "lr_scheduler=null", "save_checkpoints=False"},
                         TrainKind::kLora);
  ASSERT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
  const std::vector<double> losses = run.summary["losses"].get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 20u);
  std::cout << "tiny vision on images: first " << losses.front() << ", last " << losses.back() << "\n";
  EXPECT_LT(Mean(losses, 16, 4), Mean(losses, 0, 4) - 1.0);
}

TEST_F(VisionTrainingTest, WhatIsNotBuiltIsRefusedBeforeAnythingRuns) {
  InProcessRun run = Run({"enable_activation_offloading=True"}, TrainKind::kFull, RecipeLaunch::kRanks);
  ASSERT_EQ(run.status.code(), Status::Code::kFailedPrecondition) << run.status.ToString();
  EXPECT_NE(run.status.message().find("full_finetune_distributed with a Llama 3.2 Vision model is not built"),
            std::string::npos)
      << run.status.message();
  EXPECT_NE(run.status.message().find("enable_activation_offloading: activation offloading is not built"),
            std::string::npos);
  EXPECT_TRUE(run.summary.is_null());  // nothing written
}

// The image path end to end below the recipe: the shipped PPM images through the transform and the collate into
// the tiny model, trained to say which image it saw: it learns to tell them apart, through the
// fusion gates.
TEST(VisionImagePathTest, ImageBatchesTrainTheEncoderAndTheFusionLayers) {
  const models::VisionModelArgs& args = models::FindVisionPreset("tiny_llama3_2_vision")->args;
  const std::string dir = std::string(TM_SOURCE_DIR) + "/recipes/data/testdata/mllama_image/";
  data::ImageTransformOptions options;
  options.tile_size = args.encoder.tile_size;
  options.max_num_tiles = args.encoder.max_num_tiles;
  std::vector<data::SampleImages> samples;
  std::vector<int64_t> answers = {65, 66, 67, 68};
  const char* names[] = {"image0_28x56", "image1_20x13", "image2_150x30", "image3_33x101"};
  for (size_t i = 0; i < 4; ++i) {
    StatusOr<data::Image> image = data::ReadPpm(dir + names[i] + ".ppm");
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    // <|image|> "?" answer
    samples.push_back({{args.image_token_id(), 63, answers[i]}, {data::TileImage(*image, options)}});
  }
  data::ImageBatch batch = data::CollateImages(samples, args.image_token_id(), args.encoder.tokens_per_tile(), 3);
  torch::Tensor tokens = torch::tensor({args.image_token_id(), int64_t{63}}).repeat({4, 1});
  torch::Tensor targets = torch::tensor(answers);
  torch::manual_seed(7);
  models::VisionModel model(args, std::nullopt, models::VisionTrainable{models::Trainable::kFull, models::Trainable::kFull,
                                                 models::Trainable::kFull});
  std::vector<torch::Tensor> trained;
  for (const auto& p : model->parameters()) {
    if (p.requires_grad()) trained.push_back(p);
  }
  torch::optim::AdamW adam(trained, torch::optim::AdamWOptions(1e-2));
  std::vector<double> losses;
  for (int step = 0; step < 60; ++step) {
    adam.zero_grad();
    torch::Tensor logits = model(tokens, batch.images, batch.aspect_ratio, batch.encoder_mask.narrow(1, 0, 2));
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits.select(1, 1), targets);
    loss.backward();
    adam.step();
    losses.push_back(loss.item<double>());
  }
  std::cout << "image path: loss " << losses.front() << " -> " << losses.back() << "\n";
  // The four samples' text is the same: below ln 4 the model tells their images apart.
  EXPECT_LT(losses.back(), std::log(4.0));
  EXPECT_NE(model->named_parameters()["decoder.layers.1.fusion_layer.ca_scale.scale"].item<float>(), 0.f);
}

}  // namespace
}  // namespace tmx::recipes
