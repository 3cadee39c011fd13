#include "recipes/models/vision_encoder.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "recipes/models/vision_model.h"

namespace tmx::models {
namespace {

VisionEncoderArgs TinyEncoder() { return FindVisionPreset("tiny_llama3_2_vision")->args.encoder; }

TEST(VisionEncoderTest, TileEmbeddingAddsTheGridTileOfEachRealTileTimesTanhOfItsGate) {
  torch::manual_seed(1);
  TilePositionalEmbedding embed(3, 4);
  torch::NoGradGuard no_grad;
  embed->named_parameters()["gate"].fill_(0.5);
  const torch::Tensor table = embed->named_parameters()["embedding"];
  torch::Tensor x = torch::zeros({1, 3, 2, 4});
  // A 1 x 2 image: tiles 0 and 1 are grid (0, 0) and (0, 1); tile 2 is padding.
  torch::Tensor out = embed(x, torch::tensor({{1, 2}}));
  const double g = std::tanh(0.5);
  EXPECT_TRUE(torch::allclose(out[0][0][1], table[0][0][0] * g));
  EXPECT_TRUE(torch::allclose(out[0][1][0], table[0][1][0] * g));
  EXPECT_EQ(out[0][2].abs().sum().item<float>(), 0.0f);
  // A 2 x 1 image: tile 1 is grid (1, 0).
  out = embed(x, torch::tensor({{2, 1}}));
  EXPECT_TRUE(torch::allclose(out[0][1][0], table[1][0][0] * g));
}

TEST(VisionEncoderTest, TokenEmbeddingSplitsLocalAndGlobalByTheGate) {
  torch::manual_seed(2);
  TiledTokenPositionalEmbedding embed(2, 3, 4);
  auto params = embed->named_parameters();
  torch::Tensor x = torch::zeros({1, 2, 3, 4});
  // Gate 0: the local table alone, on every tile (padding included).
  torch::Tensor out = embed(x, torch::tensor({{1, 1}}));
  EXPECT_TRUE(torch::allclose(out[0][1], params["local_token_positional_embedding"]));
  torch::NoGradGuard no_grad;
  params["gate"].fill_(1.0);
  out = embed(x, torch::tensor({{1, 2}}));
  const double g = std::tanh(1.0);
  EXPECT_TRUE(torch::allclose(
      out[0][1], params["local_token_positional_embedding"] * (1 - g) + params["global_token_positional_embedding"][0][1] * g,
      1e-6, 1e-6));
}

TEST(VisionEncoderTest, OnlyPairsOfPaddingTokensAreMasked) {
  // One image of 2 tiles, only the first real; 3 tokens padded to 4.
  torch::Tensor allowed = VisionAttentionAllowed(torch::tensor({{1, 1}}), 2, 3, 4);
  ASSERT_EQ(allowed.sizes(), torch::IntArrayRef({1, 1, 8, 8}));
  const bool pad[8] = {false, false, false, true, true, true, true, true};
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(allowed[0][0][i][j].item<bool>(), !(pad[i] && pad[j])) << i << "," << j;
    }
  }
  EXPECT_FALSE(VisionAttentionAllowed(torch::tensor({{1, 2}}), 2, 4, 4).defined());
}

TEST(VisionEncoderTest, EncodesImagesIntoOneDecoderWidthTokenPerTileToken) {
  torch::manual_seed(3);
  const VisionEncoderArgs args = TinyEncoder();
  VisionEncoder encoder(args);
  torch::NoGradGuard no_grad;
  torch::Tensor images = torch::randn({2, 1, 4, 3, 28, 28});
  torch::Tensor out = encoder(images, torch::tensor({{{2, 2}}, {{1, 3}}}));
  EXPECT_EQ(out.sizes(), torch::IntArrayRef({2, 4 * 17, 32}));
  EXPECT_TRUE(out.isfinite().all().item<bool>());
  // A padding tile's pixels change the real tiles' tokens only through attention: the first image has none.
  torch::Tensor changed = images.clone();
  changed[1][0][3].fill_(5);
  torch::Tensor again = encoder(changed, torch::tensor({{{2, 2}}, {{1, 3}}}));
  EXPECT_TRUE(torch::equal(again[0], out[0]));
  EXPECT_FALSE(torch::allclose(again[1], out[1]));
}

TEST(VisionEncoderTest, StateDictNamesAreTorchtunes) {
  VisionEncoder encoder(TinyEncoder(), std::nullopt, c10::TensorOptions().device(torch::kMeta));
  auto params = encoder->named_parameters();
  for (const char* name :
       {"clip.conv.weight", "clip.cls_token_embedding.weight", "clip.token_pos_embedding.local_token_positional_embedding",
        "clip.token_pos_embedding.global_token_positional_embedding", "clip.token_pos_embedding.gate",
        "clip.pre_tile_pos_embed.embedding", "clip.post_tile_pos_embed.gate", "clip.ln_pre.weight", "clip.ln_post.bias",
        "clip.layers.2.attn.q_proj.weight", "clip.layers.0.mlp.w1.bias", "clip.layers.0.sa_norm.bias",
        "projection.layers.1.sa_scale.scale", "projection.layers.0.mlp_scale.scale", "projection.output.weight",
        "projection.output.bias"}) {
    EXPECT_TRUE(params.contains(name)) << name;
  }
  EXPECT_EQ(params["projection.output.weight"].sizes(), torch::IntArrayRef({32, 16 * 3}));
  EXPECT_EQ(params["clip.token_pos_embedding.global_token_positional_embedding"].sizes(),
            torch::IntArrayRef({4, 4, 17, 16}));
}

TEST(VisionEncoderTest, BadArgsNameTheField) {
  VisionEncoderArgs args = TinyEncoder();
  args.patch_size = 5;
  EXPECT_NE(ValidateVisionEncoderArgs(args).message().find("patch_size: must divide tile_size"), std::string::npos);
  args = TinyEncoder();
  args.hidden_states = {2, 1};
  EXPECT_NE(ValidateVisionEncoderArgs(args).message().find("hidden_states"), std::string::npos);
}

}  // namespace
}  // namespace tmx::models
