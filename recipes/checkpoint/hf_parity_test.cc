// Logits parity with Hugging Face transformers, one test per model family.
//
// How the fixtures were made (once, committed under recipes/checkpoint/testdata/hf_parity/<family>/):
//   scripts/make_parity_fixtures.py, with torch 2.11.0 and transformers 4.57.6 (pinned and checked by the script),
//   builds a small random model per family with the family's transformers config class (LlamaConfig,
//   MistralConfig, Qwen2Config, Qwen3Config, GemmaConfig, Gemma2Config, Phi3Config, Llama4TextConfig: experts,
//   a NoPE layer, 4-token chunks, temperature tuning from position 3): 2 layers, width 32, 4 query
//   heads, vocab 96, with the family's options switched on and set small (5-token sliding windows on 12 tokens,
//   Gemma 2 caps of 5 and 8 with a score scale of 6^-0.5, Llama 3 scaling with an original context of 256...).
//   Every parameter, norm weights and biases included, is redrawn so that each tensor matters. The model is saved
//   with save_pretrained as safetensors (llama3_1 sharded, with model.safetensors.index.json), and fixed token ids
//   [2, 12] are run through it in float32 with eager attention; expected.safetensors holds the ids and the logits.
// Here each folder goes through the Hugging Face checkpoint loader (config.json -> DecoderArgs, safetensors ->
// names, q/k permutation, fused-projection splitting, tied embeddings) into the decoder, whose float32 logits must
// match within 1e-4 (max absolute difference).
// Greedy decoding: scripts/make_generation_fixtures.py (same pins) loads each committed model and runs
// transformers' generate (greedy, its KV cache, no stop token) for 20 new tokens from a 7-token prompt, chosen so
// that every step's top two logits differ by at least 1e-3; generated.safetensors holds the prompt and the tokens.
// Here the decoder's KV-cached greedy generation (models/generation.h) must pick the same 20 tokens. (Gemma and
// Gemma 2's random models repeat one token from every prompt tried, so their fixtures check less.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>
#include <map>

#include "recipes/checkpoint/hf_checkpoint.h"
#include "recipes/checkpoint/hf_config.h"
#include "recipes/models/generation.h"
#include "recipes/models/presets.h"

namespace tmx::checkpoint {
namespace {

std::string FixtureDir(const std::string& family) {
  return std::string(TM_SOURCE_DIR) + "/recipes/checkpoint/testdata/hf_parity/" + family;
}

// The family's features, tying aside (a fixture may tie where the family's first size does not).
std::vector<std::string> Features(const models::DecoderArgs& args) {
  std::vector<std::string> out;
  for (const std::string& f : models::DecoderFeatures(args)) {
    if (f != "tied embeddings") out.push_back(f);
  }
  return out;
}

class HfParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfParityTest, LogitsMatchTransformers) {
  const std::string family = GetParam();
  const std::string dir = FixtureDir(family);
  StatusOr<HfModelConfig> config = ReadHfConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().message();
  // The fixture performs the operations of the family's tiny preset (so of its published sizes).
  const models::ModelPreset* tiny = models::FindModelPreset("tiny_" + family);
  ASSERT_NE(tiny, nullptr);
  EXPECT_EQ(config->model_type, tiny->hf_model_type);
  EXPECT_EQ(Features(config->args), Features(tiny->args));

  torch::manual_seed(0);
  models::Decoder model(config->args);
  const Status loaded = LoadHfCheckpoint(dir, config->model_type, *model);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  StatusOr<LoadedSafetensors> expected = LoadSafetensors(dir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  std::map<std::string, at::Tensor> e(expected->tensors.begin(), expected->tensors.end());
  ASSERT_EQ(e.count("input_ids") + e.count("logits"), 2u);
  EXPECT_EQ(expected->metadata.at("transformers"), "4.57.6");

  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model(e["input_ids"]);
  ASSERT_EQ(logits.sizes(), e["logits"].sizes());
  const double max_abs_diff = (logits - e["logits"]).abs().max().item<double>();
  const double scale = e["logits"].abs().max().item<double>();
  std::cout << family << ": max |logits - transformers| = " << max_abs_diff << " (|logits| up to " << scale << ")\n";
  RecordProperty("max_abs_diff", std::to_string(max_abs_diff));
  EXPECT_LT(max_abs_diff, 1e-4);
  EXPECT_GT(scale, 1.0) << "logits this small would hide differences";
}

TEST_P(HfParityTest, GreedyGenerationMatchesTransformers) {
  const std::string dir = FixtureDir(GetParam());
  StatusOr<HfModelConfig> config = ReadHfConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().message();
  models::Decoder model(config->args);
  const Status loaded = LoadHfCheckpoint(dir, config->model_type, *model);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  StatusOr<LoadedSafetensors> expected = LoadSafetensors(dir + "/generated.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  std::map<std::string, at::Tensor> e(expected->tensors.begin(), expected->tensors.end());
  ASSERT_EQ(e.count("prompt") + e.count("tokens"), 2u);
  models::GenerationOptions options;
  options.max_new_tokens = e["tokens"].size(1);
  options.sampling.temperature = 0;
  const models::Generated generated = models::Generate(*model, e["prompt"], options);
  EXPECT_TRUE(torch::equal(generated.tokens, e["tokens"])) << "generated " << generated.tokens << "\ntransformers "
                                                           << e["tokens"];
}

const std::vector<std::string> kFamilies = {"llama2",   "code_llama2", "llama3", "llama3_1", "llama3_2",
                                            "llama3_3", "mistral",     "qwen2",  "qwen2_5",  "qwen3",
                                            "gemma",    "gemma2",      "phi3",   "phi4",     "llama4"};

INSTANTIATE_TEST_SUITE_P(Families, HfParityTest, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// A family added to the preset table needs a fixture here.
TEST(HfParityFamiliesTest, CoverEveryFamilyOfThePresetTable) { EXPECT_EQ(kFamilies, models::ModelFamilies()); }

}  // namespace
}  // namespace tmx::checkpoint
