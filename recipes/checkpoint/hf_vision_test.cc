// Llama 3.2 Vision logits parity with transformers' MllamaForConditionalGeneration.
//
// The fixture (recipes/checkpoint/testdata/mllama_parity/, made once by scripts/make_mllama_parity_fixtures.py
// with torch 2.11.0 and transformers 4.57.6) is a random model at the tiny preset's sizes, every parameter redrawn
// and every gate away from zero, saved with save_pretrained, and two samples (a 2 x 2 image, a 1 x 2 image with two
// padding tiles, the image token first) run through it in float32 with eager attention. Here its tensors go
// through MllamaHfToTune into the vision model, whose float32 logits must match within 1e-4, as the text
// families' (hf_parity_test.cc).
#include "recipes/checkpoint/hf_vision.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "recipes/models/generation.h"

namespace tmx::checkpoint {
namespace {

const std::string kFixture = std::string(TM_SOURCE_DIR) + "/recipes/checkpoint/testdata/mllama_parity/";

const models::VisionModelArgs& TinyArgs() { return models::FindVisionPreset("tiny_llama3_2_vision")->args; }

std::map<std::string, torch::Tensor> Expected() {
  auto loaded = LoadSafetensors(kFixture + "expected.safetensors");
  TORCH_CHECK(loaded.ok(), loaded.status().message());
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, t] : loaded->tensors) out[name] = t;
  return out;
}

models::VisionModel LoadedModel() {
  auto hf = LoadSafetensors(kFixture + "model.safetensors");
  TORCH_CHECK(hf.ok(), hf.status().message());
  auto tune = MllamaHfToTune(hf->tensors, TinyArgs(), "mllama_parity");
  TORCH_CHECK(tune.ok(), tune.status().message());
  models::VisionModel model(TinyArgs());
  const Status loaded = LoadIntoModule(*model, *tune);
  TORCH_CHECK(loaded.ok(), loaded.message());
  return model;
}

TEST(HfVisionTest, LogitsMatchTransformersMllama) {
  models::VisionModel model = LoadedModel();
  auto e = Expected();
  torch::NoGradGuard no_grad;
  torch::Tensor logits = model(e["input_ids"], e["images"], e["aspect_ratio"], e["encoder_mask"].to(torch::kBool));
  ASSERT_EQ(logits.sizes(), e["logits"].sizes());
  const double diff = (logits - e["logits"]).abs().max().item<double>();
  std::cout << "Mllama logits: max |difference| " << diff << " (|logits| <= " << e["logits"].abs().max().item<double>()
            << ")\n";
  EXPECT_LT(diff, 1e-4);
  // Without the image (and its token) the text decoder alone.
  torch::Tensor text = model(e["input_ids"].narrow(1, 1, e["input_ids"].size(1) - 1));
  EXPECT_LT((text - e["text_only_logits"]).abs().max().item<double>(), 1e-4);
}

// generation.safetensors (the same script, --generation): a prompt whose first token is the image's, greedily
// continued by 8 tokens through transformers' generate (its KV caches, the cross-attention mask's last row
// repeated), and the prompt without the image. The same tokens here, through the KV caches (the fusion layers'
// too) and by recomputing the sequence; the image changes them.
TEST(HfVisionTest, GreedyTokensMatchTransformersGenerate) {
  models::VisionModel model = LoadedModel();
  auto loaded = LoadSafetensors(kFixture + "generation.safetensors");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  std::map<std::string, torch::Tensor> g;
  for (auto& [name, t] : loaded->tensors) g[name] = t;
  torch::NoGradGuard no_grad;
  const torch::Tensor image = model->encoder().forward(g["images"], g["aspect_ratio"]);
  const int64_t tiles = g["aspect_ratio"][0][0][0].item<int64_t>() * g["aspect_ratio"][0][0][1].item<int64_t>();
  const int64_t per_tile = TinyArgs().encoder.tokens_per_tile(), length = g["input_ids"].size(1);
  torch::Tensor mask = torch::zeros({1, length, image.size(1)}, torch::kBool);
  mask.narrow(2, 0, tiles * per_tile).fill_(true);
  models::GenerationOptions options;
  options.max_new_tokens = g["image_tokens"].size(1);
  options.sampling.temperature = 0;
  for (bool cache : {true, false}) {
    SCOPED_TRACE(cache ? "KV cache" : "recomputed");
    options.kv_cache = cache;
    models::Generated with_image = models::Generate(*model, g["input_ids"], image, mask, options);
    EXPECT_TRUE(torch::equal(with_image.tokens, g["image_tokens"])) << with_image.tokens << g["image_tokens"];
    models::Generated text = models::Generate(*model, g["input_ids"].narrow(1, 1, length - 1), {}, {}, options);
    EXPECT_TRUE(torch::equal(text.tokens, g["text_tokens"])) << text.tokens << g["text_tokens"];
    EXPECT_FALSE(torch::equal(with_image.tokens, text.tokens));
  }
}

TEST(HfVisionTest, SavingGivesBackTheCheckpointsTensors) {
  auto hf = LoadSafetensors(kFixture + "model.safetensors");
  ASSERT_TRUE(hf.ok());
  auto tune = MllamaHfToTune(hf->tensors, TinyArgs(), "mllama_parity");
  ASSERT_TRUE(tune.ok()) << tune.status().message();
  auto back = MllamaTuneToHf(*tune, TinyArgs());
  ASSERT_TRUE(back.ok()) << back.status().message();
  std::map<std::string, torch::Tensor> original;
  for (auto& [name, t] : hf->tensors) original[HubMllamaName(name)] = t;
  ASSERT_EQ(back->size(), original.size());
  for (const auto& [name, t] : *back) {
    ASSERT_TRUE(original.count(name)) << name;
    EXPECT_TRUE(torch::equal(t, original[name])) << name;
  }
}

TEST(HfVisionTest, NamesAreReadInBothSpellings) {
  EXPECT_EQ(HubMllamaName("model.language_model.layers.0.self_attn.q_proj.weight"),
            "language_model.model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(HubMllamaName("lm_head.weight"), "language_model.lm_head.weight");
  EXPECT_EQ(HubMllamaName("model.vision_model.class_embedding"), "vision_model.class_embedding");
  // The 11B's decoder: cross-attention layers 3, 8, ... of 40 hang on torchtune's layers 3, 7, ...
  const auto maps = MllamaTensorMaps(models::FindVisionPreset("llama3_2_vision_11b")->args);
  std::map<std::string, std::string> by_hf;
  for (const auto& m : maps) by_hf[m.hf_name] = m.tune_name;
  EXPECT_EQ(by_hf["language_model.model.layers.8.cross_attn_attn_gate"], "decoder.layers.7.fusion_layer.ca_scale.scale");
  EXPECT_EQ(by_hf["language_model.model.layers.9.self_attn.o_proj.weight"], "decoder.layers.7.attn.output_proj.weight");
  EXPECT_EQ(by_hf["language_model.model.layers.39.mlp.up_proj.weight"], "decoder.layers.31.mlp.w3.weight");
}

TEST(HfVisionTest, AMissingOrForeignTensorIsNamed) {
  auto hf = LoadSafetensors(kFixture + "model.safetensors");
  ASSERT_TRUE(hf.ok());
  NamedTensors tensors = hf->tensors;
  tensors.emplace_back("vision_model.extra", torch::zeros({1}));
  auto r = MllamaHfToTune(tensors, TinyArgs(), "ckpt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ckpt: vision_model.extra: in the checkpoint, but"), std::string::npos);
  tensors.pop_back();
  tensors.erase(tensors.begin());
  r = MllamaHfToTune(tensors, TinyArgs(), "ckpt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing from the checkpoint"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace tmx::checkpoint
