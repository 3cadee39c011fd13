#include "recipes/models/moe.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "recipes/models/adapters_off.h"
#include "recipes/models/decoder.h"
#include "recipes/models/lora.h"
#include "recipes/models/presets.h"

namespace tmx::models {
namespace {

DecoderArgs SmallMoeArgs() {
  DecoderArgs a = FindModelPreset("tiny_llama4")->args;
  a.num_layers = 2;
  a.experts_per_token = 2;
  return a;
}

// The parameter of `model` named `name`.
torch::Tensor Param(const torch::nn::Module& model, const std::string& name) {
  const torch::Tensor* p = model.named_parameters().find(name);
  TORCH_CHECK(p != nullptr, "no parameter ", name);
  return *p;
}

// A mixture-of-experts layer of the decoder, as built by DecoderImpl (its shared expert a FeedForward).
Moe MakeLayerMoe(const DecoderArgs& args, const std::optional<LoraArgs>& lora = std::nullopt) {
  Decoder decoder(args, lora);
  auto mlp = std::dynamic_pointer_cast<MoeImpl>(decoder->layers()[0]->named_children()["mlp"]);
  TORCH_CHECK(mlp != nullptr, "layer 0 is not a mixture of experts");
  return Moe(mlp);
}

TEST(MoeTest, RoutingTakesTheTopLogitsScoredBySigmoidAndSortsTokensByExpert) {
  // 3 tokens, 4 experts, top-2.
  const torch::Tensor logits = torch::tensor({{0.0, 2.0, -1.0, 1.0},   // experts 1, 3
                                              {3.0, -2.0, 0.5, 0.0},   // experts 0, 2
                                              {-1.0, 0.2, 0.1, 4.0}},  // experts 3, 1
                                             torch::kFloat);
  const MoeRouting r = RouteTokens(logits, 2);
  EXPECT_EQ(r.counts, (std::vector<int64_t>{1, 2, 1, 2}));
  // Sorted by expert, tokens in order within one: e0: t1; e1: t0, t2; e2: t1; e3: t0, t2.
  EXPECT_TRUE(torch::equal(r.tokens, torch::tensor({1, 0, 2, 1, 0, 2}, torch::kLong))) << r.tokens;
  const torch::Tensor expected = torch::sigmoid(torch::tensor({3.0, 2.0, 0.2, 0.5, 1.0, 4.0}, torch::kFloat));
  EXPECT_TRUE(torch::allclose(r.scores, expected)) << r.scores;
  EXPECT_TRUE(torch::equal(r.experts, torch::tensor({{1, 3}, {0, 2}, {3, 1}}, torch::kLong)));
}

TEST(MoeTest, EqualsANaivePerTokenReference) {
  torch::manual_seed(3);
  const DecoderArgs args = SmallMoeArgs();
  Moe moe = MakeLayerMoe(args);
  const torch::Tensor x = torch::randn({2, 5, args.embed_dim});
  const torch::Tensor out = moe(x);
  // Per token: shared expert + sum over its top-2 experts of expert_e(sigmoid(logit_e) * x).
  const auto params = moe->named_parameters();
  const torch::Tensor gate = params["experts.gate_proj"], up = params["experts.up_proj"];
  const torch::Tensor down = params["experts.down_proj"], router = params["router.gate.weight"];
  auto mlp = [](const torch::Tensor& v, const torch::Tensor& w1, const torch::Tensor& w3, const torch::Tensor& w2) {
    return torch::matmul(torch::silu(torch::matmul(v, w1)) * torch::matmul(v, w3), w2);
  };
  const torch::Tensor flat = x.reshape({-1, args.embed_dim});
  for (int64_t t = 0; t < flat.size(0); ++t) {
    const torch::Tensor v = flat[t];
    torch::Tensor want = mlp(v, params["shared_expert.w1.weight"].t(), params["shared_expert.w3.weight"].t(),
                             params["shared_expert.w2.weight"].t());
    const torch::Tensor logits = torch::matmul(router, v);
    const auto [top, chosen] = torch::topk(logits, 2);
    for (int64_t j = 0; j < 2; ++j) {
      const int64_t e = chosen[j].item<int64_t>();
      want = want + mlp(v * torch::sigmoid(top[j]), gate[e], up[e], down[e]);
    }
    EXPECT_TRUE(torch::allclose(out.reshape({-1, args.embed_dim})[t], want, 1e-5, 1e-5)) << "token " << t;
  }
}

TEST(MoeTest, WithoutRoutedOutputsTheLayerIsItsSharedExpert) {
  torch::manual_seed(4);
  const DecoderArgs args = SmallMoeArgs();
  Moe moe = MakeLayerMoe(args);
  {
    torch::NoGradGuard no_grad;
    moe->named_parameters()["experts.down_proj"].zero_();
  }
  const torch::Tensor x = torch::randn({1, 6, args.embed_dim});
  const auto params = moe->named_parameters();
  const torch::Tensor shared = torch::matmul(
      torch::silu(torch::matmul(x, params["shared_expert.w1.weight"].t())) *
          torch::matmul(x, params["shared_expert.w3.weight"].t()),
      params["shared_expert.w2.weight"].t());
  EXPECT_TRUE(torch::allclose(moe(x), shared, 1e-6, 1e-6));
  EXPECT_GT(shared.abs().max().item<double>(), 0.01);
}

TEST(MoeTest, GradientsReachOnlyTheChosenExperts) {
  torch::manual_seed(5);
  DecoderArgs args = SmallMoeArgs();
  args.experts_per_token = 1;
  Moe moe = MakeLayerMoe(args);
  for (torch::Tensor& p : moe->parameters()) p.requires_grad_(true);
  const torch::Tensor x = torch::randn({1, 2, args.embed_dim});  // 2 tokens: at most 2 of 4 experts chosen
  moe(x).pow(2).sum().backward();
  const std::vector<int64_t>& counts = moe->last_routing().counts;
  const torch::Tensor grad = moe->named_parameters()["experts.gate_proj"].grad();
  int64_t chosen = 0;
  for (int64_t e = 0; e < args.num_experts; ++e) {
    const bool used = counts[static_cast<size_t>(e)] > 0;
    chosen += used ? 1 : 0;
    EXPECT_EQ(grad[e].abs().sum().item<double>() > 0, used) << "expert " << e;
  }
  EXPECT_GE(chosen, 1);
  EXPECT_LT(chosen, args.num_experts);
  // The router learns through the scores of the chosen experts.
  EXPECT_GT(moe->named_parameters()["router.gate.weight"].grad().abs().sum().item<double>(), 0);
}

TEST(MoeTest, LoraOnTheExpertsStartsAtTheBaseAndMergesIntoIt) {
  torch::manual_seed(6);
  const DecoderArgs args = SmallMoeArgs();
  LoraArgs lora;
  lora.attn_modules = {"q_proj"};
  lora.apply_to_mlp = true;
  lora.rank = 4;
  Decoder model(args, lora);
  const torch::Tensor tokens = torch::randint(0, args.vocab_size, {1, 8});
  const torch::Tensor before = model(tokens);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : AdapterParameters(*model)) {
      if (name.find("lora_b") != std::string::npos || name.find("_b") == name.size() - 2) p.normal_(0, 0.2);
    }
  }
  std::map<std::string, bool> adapters;
  for (const auto& [name, p] : AdapterParameters(*model)) adapters[name] = true;
  EXPECT_TRUE(adapters.count("layers.0.mlp.experts.lora_gate_a"));
  EXPECT_TRUE(adapters.count("layers.0.mlp.experts.lora_down_b"));
  EXPECT_TRUE(adapters.count("layers.0.mlp.shared_expert.w1.lora_a.weight"));
  EXPECT_FALSE(adapters.count("layers.0.mlp.router.gate.lora_a.weight"));  // torchtune adapts no router
  FreezeBaseParameters(*model);
  EXPECT_TRUE(Param(*model, "layers.0.mlp.experts.lora_up_a").requires_grad());
  EXPECT_FALSE(Param(*model, "layers.0.mlp.experts.up_proj").requires_grad());

  const torch::Tensor adapted = model(tokens);
  EXPECT_GT((adapted - before).abs().max().item<double>(), 1e-3);
  {
    AdaptersOff off(*model);
    EXPECT_TRUE(torch::allclose(model(tokens), before, 1e-5, 1e-5));
  }
  // Merged weights in a model without adapters give the adapted model's logits.
  Decoder plain(args);
  {
    torch::NoGradGuard no_grad;
    auto params = plain->named_parameters();
    for (const auto& [name, value] : MergedStateDict(*model)) params[name].copy_(value);
  }
  EXPECT_TRUE(torch::allclose(plain(tokens), adapted, 1e-4, 1e-4));
}

TEST(MoeTest, DenseLayersInterleaveAtTheirOwnWidth) {
  DecoderArgs args = SmallMoeArgs();
  args.moe_every_n_layers = 2;
  args.dense_intermediate_dim = 96;
  Decoder model(args, std::nullopt, c10::TensorOptions().device(torch::kMeta));
  EXPECT_EQ(Param(*model, "layers.0.mlp.w1.weight").sizes(), torch::IntArrayRef({96, args.embed_dim}));
  EXPECT_EQ(Param(*model, "layers.1.mlp.experts.gate_proj").sizes(),
            torch::IntArrayRef({args.num_experts, args.embed_dim, args.intermediate_dim}));
  EXPECT_EQ(Param(*model, "layers.1.mlp.experts.down_proj").sizes(),
            torch::IntArrayRef({args.num_experts, args.intermediate_dim, args.embed_dim}));
  EXPECT_EQ(model->named_parameters().find("layers.0.mlp.router.gate.weight"), nullptr);
}

TEST(MoeTest, ChunkedAttentionSeesNothingBeforeItsChunk) {
  torch::manual_seed(7);
  DecoderArgs args = SmallMoeArgs();
  args.num_layers = 1;  // a RoPE layer: chunks of 16
  args.nope_layer_interval = 4;
  Decoder model(args);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {1, 40});
  const torch::Tensor a = model(tokens);
  tokens[0][3] = (tokens[0][3].item<int64_t>() + 1) % args.vocab_size;  // a token in the first chunk
  const torch::Tensor b = model(tokens);
  EXPECT_GT((a.narrow(1, 3, 13) - b.narrow(1, 3, 13)).abs().max().item<double>(), 1e-4);
  EXPECT_TRUE(torch::equal(a.narrow(1, 16, 24), b.narrow(1, 16, 24)));  // chunks 2 and 3
}

TEST(MoeTest, NopeLayersIgnorePositionsAndTemperatureScalesTheirQueries) {
  DecoderArgs args = SmallMoeArgs();
  args.nope_layer_interval = 1;  // a NoPE layer: attention without RoPE
  args.num_layers = 1;           // (a second layer would see the first one's position-dependent outputs)
  args.attn_temperature_floor = 0;
  torch::manual_seed(8);
  Decoder model(args);
  model->eval();
  torch::NoGradGuard no_grad;
  // Without positions, the last token's logits depend on the earlier tokens as a set (causal attention over the
  // same keys): swapping two earlier tokens leaves them unchanged.
  const torch::Tensor tokens = torch::tensor({{5, 9, 11, 7}}, torch::kLong);
  const torch::Tensor swapped = torch::tensor({{9, 5, 11, 7}}, torch::kLong);
  EXPECT_TRUE(torch::allclose(model(tokens)[0][3], model(swapped)[0][3], 1e-5, 1e-5));
  // Temperature tuning from position floor - 1 changes only positions from there on.
  DecoderArgs tuned = args;
  tuned.attn_temperature_floor = 2;
  tuned.attn_temperature_scale = 0.5;
  torch::manual_seed(8);
  Decoder hot(tuned);
  hot->eval();
  const torch::Tensor base = model(tokens), with = hot(tokens);
  EXPECT_TRUE(torch::allclose(base[0][0], with[0][0]));
  EXPECT_GT((base[0][3] - with[0][3]).abs().max().item<double>(), 1e-4);
}

TEST(MoeTest, BadSettingsAreRefusedByName) {
  DecoderArgs args = SmallMoeArgs();
  args.experts_per_token = 5;
  EXPECT_EQ(ValidateDecoderArgs(args).message(), "experts_per_token: must be 1 to num_experts (4), got 5");
  args = SmallMoeArgs();
  args.mlp_activation = MlpActivation::kGeluTanh;
  EXPECT_NE(ValidateDecoderArgs(args).message().find("a mixture of experts needs silu"), std::string::npos);
  LoraArgs lora;
  lora.attn_modules = {"q_proj"};
  lora.quantize_base = true;
  EXPECT_NE(ValidateLoraArgs(lora, SmallMoeArgs()).message().find("quantize_base: not implemented for a mixture"),
            std::string::npos);
  EXPECT_FALSE(TensorParallelArgs(SmallMoeArgs(), 2).ok());
}

}  // namespace
}  // namespace tmx::models
