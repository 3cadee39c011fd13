#include "recipes/models/vision_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

namespace tmx::models {
namespace {

const c10::TensorOptions kMeta = c10::TensorOptions().device(torch::kMeta);

const VisionPreset& Tiny() { return *FindVisionPreset("tiny_llama3_2_vision"); }

TEST(VisionModelTest, FusionLayersSitBeforeEveryIntervalthLayer) {
  EXPECT_EQ(Tiny().args.fusion_layers(), (std::vector<int64_t>{1, 3}));
  const VisionPreset* p = FindVisionPreset("torchtune.models.llama3_2_vision.lora_llama3_2_vision_11b");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->args.fusion_layers(), (std::vector<int64_t>{3, 7, 11, 15, 19, 23, 27, 31}));
  EXPECT_EQ(FindVisionPreset("llama3_2_vision_90b")->args.fusion_layers().size(), 20u);
  EXPECT_EQ(SupportedAspectRatios(4).size(), 8u);
}

TEST(VisionModelTest, ZeroGatesGiveTheTextDecodersLogits) {
  torch::manual_seed(4);
  VisionModel model(Tiny().args);
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, 512, {2, 9});
  tokens.index_put_({torch::indexing::Slice(), 0}, Tiny().args.image_token_id());
  torch::Tensor images = torch::randn({2, 1, 4, 3, 28, 28});
  torch::Tensor ratio = torch::tensor({{{2, 2}}, {{1, 2}}});
  torch::Tensor text_only = model(tokens);
  EXPECT_TRUE(torch::equal(model(tokens, images, ratio), text_only));
  // Opened gates let the image in; rows the mask keeps from every image token stay text-only.
  for (auto& item : model->named_parameters()) {
    if (item.key().find("fusion_layer.") != std::string::npos && item.key().find("_scale.scale") != std::string::npos) {
      item.value().fill_(0.7);
    }
  }
  torch::Tensor mask = torch::ones({2, 9, 4 * 17}, torch::kBool);
  mask.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, 3)}, false);
  torch::Tensor fused = model(tokens, images, ratio, mask);
  EXPECT_TRUE(torch::allclose(fused.narrow(1, 0, 3), text_only.narrow(1, 0, 3)));
  EXPECT_FALSE(torch::allclose(fused.narrow(1, 3, 6), text_only.narrow(1, 3, 6)));
}

TEST(VisionModelTest, TheImageTokenReadsTheFusionEmbedding) {
  torch::manual_seed(5);
  VisionModel model(Tiny().args);
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::tensor({{Tiny().args.image_token_id(), int64_t{5}}});
  torch::Tensor text = torch::tensor({{int64_t{5}}});
  torch::Tensor before = model(tokens), text_before = model(text);
  model->named_parameters()["decoder.tok_embeddings.fusion_embedding.weight"][0].add_(1);
  EXPECT_FALSE(torch::allclose(model(tokens), before));
  EXPECT_TRUE(torch::equal(model(text), text_before));
}

TEST(VisionModelTest, ParameterCountsAreTransformersLessItsRepeatedTileTables) {
  for (const VisionPreset& p : VisionPresets()) {
    if (p.tiny) continue;
    VisionModel model(p.args, std::nullopt, VisionTrainable{}, kMeta);
    EXPECT_EQ(CountParameters(*model), p.published_params - RedundantTileParameters(p.args.encoder)) << p.builder;
  }
}

TEST(VisionModelTest, StateDictNamesAreTorchtunes) {
  VisionModel model(Tiny().args, std::nullopt, VisionTrainable{}, kMeta);
  auto params = model->named_parameters();
  for (const char* name :
       {"decoder.tok_embeddings.weight", "decoder.tok_embeddings.fusion_embedding.weight",
        "decoder.layers.0.attn.q_proj.weight", "decoder.layers.1.sa_norm.scale", "decoder.layers.1.fusion_layer.ca_norm.scale",
        "decoder.layers.1.fusion_layer.attn.k_norm.scale", "decoder.layers.3.fusion_layer.ca_scale.scale",
        "decoder.layers.3.fusion_layer.mlp.w3.weight", "decoder.layers.3.fusion_layer.mlp_scale.scale",
        "decoder.norm.scale", "decoder.output.weight", "encoder.clip.conv.weight", "encoder.projection.output.bias"}) {
    EXPECT_TRUE(params.contains(name)) << name;
  }
  EXPECT_FALSE(params.contains("decoder.layers.0.fusion_layer.ca_norm.scale"));
  EXPECT_EQ(VisionPartOf("decoder.layers.1.fusion_layer.attn.q_proj.weight"), "fusion");
  EXPECT_EQ(VisionPartOf("encoder.projection.layers.0.attn.q_proj.weight"), "fusion");
  EXPECT_EQ(VisionPartOf("encoder.clip.conv.weight"), "encoder");
  EXPECT_EQ(VisionPartOf("decoder.layers.1.attn.q_proj.weight"), "decoder");
}

TEST(VisionModelTest, TrainableChoosesThePartsAsTorchtune) {
  LoraArgs lora;
  lora.attn_modules = {"q_proj", "v_proj"};
  // torchtune's LoRA defaults: decoder frozen, encoder and fusion through adapters.
  VisionModel model(Tiny().args, lora, VisionTrainable{Trainable::kFrozen, Trainable::kLora, Trainable::kLora}, kMeta);
  int64_t adapters = 0;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const bool adapter = name.find("lora_") != std::string::npos;
    EXPECT_EQ(item.value().requires_grad(), adapter) << name;
    if (adapter) EXPECT_NE(VisionPartOf(name), "decoder") << name;
    adapters += adapter;
  }
  // q and v of 3 CLIP layers, 2 projection layers and 2 fusion layers, two matrices each.
  EXPECT_EQ(adapters, 2 * 2 * (3 + 2 + 2));
  model->SetTrainable({Trainable::kFull, Trainable::kFrozen, Trainable::kFull});
  EXPECT_TRUE(model->named_parameters()["decoder.layers.0.attn.q_proj.weight"].requires_grad());
  EXPECT_FALSE(model->named_parameters()["encoder.clip.conv.weight"].requires_grad());
  EXPECT_TRUE(model->named_parameters()["encoder.projection.output.weight"].requires_grad());
}

TEST(VisionModelTest, ATextOnlyBatchTrainsTheDecoder) {
  torch::manual_seed(6);
  VisionModel model(Tiny().args, std::nullopt, VisionTrainable{Trainable::kFull, Trainable::kFull, Trainable::kFull});
  torch::Tensor tokens = torch::randint(0, 512, {1, 6});
  torch::Tensor images = torch::randn({1, 1, 1, 3, 28, 28});
  torch::Tensor loss = model(tokens, images, torch::tensor({{{1, 1}}})).logsumexp(-1).mean();
  loss.backward();
  EXPECT_TRUE(model->named_parameters()["decoder.layers.1.fusion_layer.ca_scale.scale"].grad().defined());
  EXPECT_GT(model->named_parameters()["decoder.output.weight"].grad().abs().sum().item<float>(), 0);
}

TEST(VisionModelTest, ActivationCheckpointingKeepsTheGradients) {
  auto grads = [](bool checkpointing) {
    torch::manual_seed(8);
    VisionModel model(Tiny().args, std::nullopt, VisionTrainable{Trainable::kFull, Trainable::kFull, Trainable::kFull});
    for (auto& item : model->named_parameters()) {
      if (item.key().find("scale.scale") != std::string::npos || item.key().find(".gate") != std::string::npos) {
        torch::NoGradGuard no_grad;
        item.value().fill_(0.5);  // open every gate, so every part gets a gradient
      }
    }
    model->set_activation_checkpointing(checkpointing);
    torch::manual_seed(9);
    torch::Tensor tokens = torch::randint(0, 512, {2, 7});
    tokens.index_put_({torch::indexing::Slice(), 0}, Tiny().args.image_token_id());
    model(tokens, torch::randn({2, 1, 2, 3, 28, 28}), torch::tensor({{{1, 2}}, {{2, 1}}})).logsumexp(-1).mean().backward();
    std::map<std::string, torch::Tensor> out;
    for (const auto& item : model->named_parameters()) out[item.key()] = item.value().grad().clone();
    return out;
  };
  std::map<std::string, torch::Tensor> plain = grads(false), checkpointed = grads(true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (const auto& [name, g] : plain) {
    ASSERT_TRUE(g.defined()) << name;
    EXPECT_TRUE(torch::allclose(g, checkpointed[name], 1e-5, 1e-6)) << name;
  }
  EXPECT_GT(plain["encoder.clip.conv.weight"].abs().sum().item<float>(), 0);
}

}  // namespace
}  // namespace tmx::models
