#include "recipes/models/llama.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <string>

namespace tmx::models {
namespace {

constexpr double kPi = 3.14159265358979323846;
const c10::TensorOptions kMeta = c10::TensorOptions().device(torch::kMeta);

std::set<std::string> ParameterNames(const torch::nn::Module& m) {
  std::set<std::string> names;
  for (const auto& item : m.named_parameters()) names.insert(item.key());
  return names;
}

// Parameter count of a Llama model from its shape, independently of the module code.
int64_t ExpectedParameters(const LlamaArgs& a) {
  const int64_t head_dim = a.embed_dim / a.num_heads;
  const int64_t attn = a.embed_dim * a.num_heads * head_dim * 2 + a.embed_dim * a.num_kv_heads * head_dim * 2;
  const int64_t mlp = 3 * a.embed_dim * a.intermediate_dim;
  const int64_t layer = attn + mlp + 2 * a.embed_dim;
  const int64_t embeddings = a.vocab_size * a.embed_dim * (a.tie_word_embeddings ? 1 : 2);
  return embeddings + a.num_layers * layer + a.embed_dim;
}

TEST(LlamaTest, PublishedParameterCountsOnMeta) {
  struct Case {
    const char* name;
    LlamaArgs args;
    int64_t expected;
  };
  const Case cases[] = {
      {"llama3_2_1b", Llama3_2_1BArgs(), 1'235'814'400},
      {"llama3_2_3b", Llama3_2_3BArgs(), 3'212'749'824},
      {"llama3_1_8b", Llama3_1_8BArgs(), 8'030'261'248},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Llama model(c.args, std::nullopt, kMeta);
    EXPECT_EQ(CountParameters(*model), c.expected);
    EXPECT_EQ(CountParameters(*model, /*trainable_only=*/true), c.expected);
    EXPECT_EQ(ExpectedParameters(c.args), c.expected);
    EXPECT_EQ(ParameterNames(*model).count("output.weight"), c.args.tie_word_embeddings ? 0u : 1u);
    for (const auto& p : model->parameters()) ASSERT_TRUE(p.is_meta());
  }
}

TEST(LlamaTest, PresetShapes) {
  const LlamaArgs b1 = Llama3_2_1BArgs();
  EXPECT_EQ(b1.vocab_size, 128256);
  EXPECT_EQ(b1.max_seq_len, 131072);
  EXPECT_EQ(b1.rope_base, 500000);
  ASSERT_TRUE(b1.rope_scaling);
  EXPECT_EQ(b1.rope_scaling->factor, 32);
  const LlamaArgs b8 = Llama3_1_8BArgs();
  ASSERT_TRUE(b8.rope_scaling);
  EXPECT_EQ(b8.rope_scaling->factor, 8);
  EXPECT_FALSE(b8.tie_word_embeddings);
  const LlamaArgs tiny = LlamaTinyArgs();
  EXPECT_GE(tiny.vocab_size, 259);
  EXPECT_TRUE(tiny.rope_scaling.has_value());
  EXPECT_TRUE(ValidateLlamaArgs(tiny).ok());
  EXPECT_TRUE(ValidateLlamaArgs(Llama3_2_3BArgs()).ok());
}

TEST(LlamaTest, StateDictNamesMatchTorchtune) {
  Llama tied(LlamaTinyArgs(), std::nullopt, kMeta);
  std::set<std::string> expected = {"tok_embeddings.weight", "norm.scale"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    for (const char* n : {"sa_norm.scale", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
                          "attn.output_proj.weight", "mlp_norm.scale", "mlp.w1.weight", "mlp.w2.weight",
                          "mlp.w3.weight"}) {
      expected.insert(p + n);
    }
  }
  EXPECT_EQ(ParameterNames(*tied), expected);

  LlamaArgs untied_args = LlamaTinyArgs();
  untied_args.tie_word_embeddings = false;
  Llama untied(untied_args, std::nullopt, kMeta);
  expected.insert("output.weight");
  EXPECT_EQ(ParameterNames(*untied), expected);
}

TEST(LlamaTest, ForwardShapeAndCausality) {
  torch::manual_seed(0);
  const LlamaArgs args = LlamaTinyArgs();
  Llama model(args);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 12}, torch::kLong);
  torch::Tensor logits = model(tokens);
  EXPECT_EQ(logits.sizes(), torch::IntArrayRef({2, 12, args.vocab_size}));
  EXPECT_EQ(logits.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());

  // Changing token 7 leaves logits at positions 0..6 unchanged and changes position 7.
  torch::Tensor changed = tokens.clone();
  changed.index_put_({torch::indexing::Slice(), 7}, (tokens.index({torch::indexing::Slice(), 7}) + 1) % 512);
  torch::Tensor logits2 = model(changed);
  using torch::indexing::Slice;
  EXPECT_TRUE(torch::allclose(logits.index({Slice(), Slice(0, 7)}), logits2.index({Slice(), Slice(0, 7)}), 1e-5,
                              1e-5));
  EXPECT_FALSE(torch::allclose(logits.index({Slice(), 7}), logits2.index({Slice(), 7})));

  // A prefix gives the same logits as the full sequence at its positions.
  torch::Tensor prefix_logits = model(tokens.index({Slice(), Slice(0, 5)}));
  EXPECT_TRUE(torch::allclose(prefix_logits, logits.index({Slice(), Slice(0, 5)}), 1e-5, 1e-5));
}

TEST(LlamaTest, TiedOutputUsesTheEmbedding) {
  torch::manual_seed(1);
  Llama model(LlamaTinyArgs());
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, 512, {1, 6}, torch::kLong);
  torch::Tensor before = model(tokens);
  // Scaling the embedding of a token that is not in the input only changes that token's logit column.
  const int64_t unused = 511;
  ASSERT_FALSE((tokens == unused).any().item<bool>());
  for (auto& item : model->named_parameters()) {
    if (item.key() == "tok_embeddings.weight") item.value()[unused].mul_(2);
  }
  torch::Tensor after = model(tokens);
  using torch::indexing::Slice;
  EXPECT_TRUE(torch::allclose(after.index({Slice(), Slice(), Slice(0, unused)}),
                              before.index({Slice(), Slice(), Slice(0, unused)})));
  EXPECT_TRUE(torch::allclose(after.index({Slice(), Slice(), unused}), 2 * before.index({Slice(), Slice(), unused}),
                              1e-5, 1e-5));
}

TEST(LlamaTest, BFloat16Forward) {
  torch::manual_seed(2);
  Llama model(LlamaTinyArgs(), std::nullopt, c10::TensorOptions().dtype(torch::kBFloat16));
  for (const auto& p : model->parameters()) ASSERT_EQ(p.scalar_type(), torch::kBFloat16);
  torch::NoGradGuard no_grad;
  torch::Tensor logits = model(torch::randint(0, 512, {1, 8}, torch::kLong));
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
}

TEST(LlamaTest, RopeFrequenciesWithoutScaling) {
  torch::Tensor f = RopeInverseFrequencies(128, 500000, std::nullopt);
  ASSERT_EQ(f.sizes(), torch::IntArrayRef({64}));
  ASSERT_EQ(f.scalar_type(), torch::kFloat);
  for (int64_t i : {0, 1, 17, 63}) {
    const double expected = std::pow(500000.0, -2.0 * i / 128.0);
    EXPECT_NEAR(f[i].item<double>() / expected, 1.0, 1e-6) << "i=" << i;
  }
}

TEST(LlamaTest, RopeScalingMatchesHandComputedValues) {
  // head_dim 128, base 500000, Llama 3.2 scaling: factor 32, low 1, high 4, old context 8192. The wavelength
  // thresholds are 8192/4 = 2048 (below: kept) and 8192/1 = 8192 (above: divided by 32).
  const torch::Tensor f = RopeInverseFrequencies(128, 500000, RopeScaling{32, 1, 4, 8192});
  struct Case {
    int64_t i;
    double expected;
    const char* regime;
  };
  // i = 32: f = 500000^-0.5 = 1/sqrt(500000); wavelength 2*pi*sqrt(500000) = 4442.88 lies between the
  // thresholds, so s = (8192/4442.88 - 1) / 3 = 0.281283 and f' = (1 - s) f/32 + s f.
  const double f32 = 1 / std::sqrt(500000.0);
  const double s32 = (8192 / (2 * kPi / f32) - 1) / 3;
  const Case cases[] = {
      {0, 1.0, "kept (wavelength 2*pi)"},
      {20, 0.016560440080994446, "kept (wavelength 379)"},
      {30, 0.001290547928209264, "interpolated (wavelength 2948, s = 0.5928)"},
      {32, (1 - s32) * f32 / 32 + s32 * f32, "interpolated (wavelength 4443)"},
      {32, 0.00042955679655936815, "interpolated (wavelength 4443), literal"},
      {40, 8.570255489881478e-06, "scaled (wavelength 22911): 2.742481756762073e-04 / 32"},
      {63, 7.672314972286278e-08, "scaled (wavelength 2.56e6): 2.455140791131609e-06 / 32"},
  };
  for (const Case& c : cases) {
    EXPECT_NEAR(f[c.i].item<double>() / c.expected, 1.0, 2e-6) << "i=" << c.i << " " << c.regime;
  }

  // The tiny model's head_dim 16 spans all three regimes.
  const LlamaArgs tiny = LlamaTinyArgs();
  const torch::Tensor plain = RopeInverseFrequencies(16, tiny.rope_base, std::nullopt);
  const torch::Tensor scaled = RopeInverseFrequencies(16, tiny.rope_base, tiny.rope_scaling);
  EXPECT_EQ(scaled[0].item<float>(), plain[0].item<float>());
  EXPECT_NEAR(scaled[7].item<double>(), plain[7].item<double>() / 32, 1e-12);
  const double mid = scaled[4].item<double>();
  EXPECT_LT(mid, plain[4].item<double>());
  EXPECT_GT(mid, plain[4].item<double>() / 32);
}

TEST(LlamaTest, RotaryEmbeddingDependsOnRelativePosition) {
  torch::manual_seed(3);
  const int64_t t = 40;
  const int64_t head_dim = 16;
  torch::Tensor inv_freq = RopeInverseFrequencies(head_dim, 500000, RopeScaling{});
  torch::Tensor angles = torch::outer(torch::arange(t, torch::kFloat), inv_freq);
  torch::Tensor cos = angles.cos(), sin = angles.sin();
  // The same vector at every position.
  torch::Tensor q = torch::randn({1, 1, 1, head_dim}).expand({1, t, 1, head_dim});
  torch::Tensor k = torch::randn({1, 1, 1, head_dim}).expand({1, t, 1, head_dim});
  torch::Tensor rq = ApplyRotaryEmbedding(q, cos, sin);
  torch::Tensor rk = ApplyRotaryEmbedding(k, cos, sin);
  // Position 0 is the identity; rotations preserve the norm; q_m . k_n depends only on m - n.
  EXPECT_TRUE(torch::allclose(rq[0][0], q[0][0]));
  EXPECT_TRUE(torch::allclose(rq.norm(2, -1), q.norm(2, -1), 1e-5, 1e-5));
  auto dot = [&](int64_t m, int64_t n) { return (rq[0][m][0] * rk[0][n][0]).sum().item<double>(); };
  EXPECT_NEAR(dot(5, 2), dot(35, 32), 1e-4);
  EXPECT_NEAR(dot(10, 10), dot(0, 0), 1e-4);
  // Pairs are adjacent elements (Meta layout): element 0 and 1 rotate together by angle t * inv_freq[0] = t.
  torch::Tensor e0 = torch::zeros({1, t, 1, head_dim});
  e0.index_put_({torch::indexing::Slice(), torch::indexing::Slice(), 0, 0}, 1.0);
  torch::Tensor r = ApplyRotaryEmbedding(e0, cos, sin);
  EXPECT_NEAR(r[0][3][0][0].item<double>(), std::cos(3.0), 1e-6);
  EXPECT_NEAR(r[0][3][0][1].item<double>(), std::sin(3.0), 1e-6);
  EXPECT_NEAR(r[0][3][0].slice(0, 2).abs().sum().item<double>(), 0.0, 1e-7);
}

// Grouped-query attention against a direct implementation: explicit per-head kv lookup and masked softmax.
// Head layouts of the tiny model and of the published presets (with a small head_dim), plus plain MHA.
TEST(LlamaTest, GroupedQueryAttentionMatchesReference) {
  struct Case {
    const char* name;
    int64_t heads, kv_heads, head_dim;
  };
  const Case cases[] = {{"tiny", 4, 2, 16}, {"1b/8b heads", 32, 8, 4}, {"3b heads", 24, 8, 4}, {"mha", 4, 4, 8}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    torch::manual_seed(4);
    LlamaArgs args = LlamaTinyArgs();
    args.num_heads = c.heads;
    args.num_kv_heads = c.kv_heads;
    args.embed_dim = c.heads * c.head_dim;
    const int64_t dim = args.embed_dim, b = 2, t = 9, h = c.heads, kv = c.kv_heads, d = c.head_dim;
    Attention attn(args, LayerLora{});
    const std::map<std::string, std::vector<int64_t>> shapes = {{"q_proj.weight", {h * d, dim}},
                                                                 {"k_proj.weight", {kv * d, dim}},
                                                                 {"v_proj.weight", {kv * d, dim}},
                                                                 {"output_proj.weight", {dim, h * d}}};
    std::map<std::string, torch::Tensor> w;
    for (const auto& item : attn->named_parameters()) {
      w[item.key()] = item.value();
      EXPECT_EQ(item.value().sizes(), torch::IntArrayRef(shapes.at(item.key()))) << item.key();
    }
    EXPECT_EQ(w.size(), 4u);
    torch::Tensor x = torch::randn({b, t, dim});
    torch::Tensor inv_freq = RopeInverseFrequencies(d, args.rope_base, args.rope_scaling);
    torch::Tensor angles = torch::outer(torch::arange(t, torch::kFloat), inv_freq);
    torch::Tensor cos = angles.cos(), sin = angles.sin();

    torch::NoGradGuard no_grad;
    torch::Tensor out = attn(x, cos, sin);
    ASSERT_EQ(out.sizes(), torch::IntArrayRef({b, t, dim}));

    torch::Tensor q = ApplyRotaryEmbedding(torch::matmul(x, w["q_proj.weight"].t()).view({b, t, h, d}), cos, sin);
    torch::Tensor k = ApplyRotaryEmbedding(torch::matmul(x, w["k_proj.weight"].t()).view({b, t, kv, d}), cos, sin);
    torch::Tensor v = torch::matmul(x, w["v_proj.weight"].t()).view({b, t, kv, d});
    torch::Tensor mask = torch::ones({t, t}, torch::kBool).triu(1);
    std::vector<torch::Tensor> heads;
    for (int64_t head = 0; head < h; ++head) {
      const int64_t g = head / (h / kv);  // consecutive query heads share a kv head
      torch::Tensor scores =
          torch::matmul(q.select(2, head), k.select(2, g).transpose(1, 2)) / std::sqrt(static_cast<double>(d));
      scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
      heads.push_back(torch::matmul(torch::softmax(scores, -1), v.select(2, g)));
    }
    torch::Tensor expected = torch::matmul(torch::cat(heads, -1), w["output_proj.weight"].t());
    EXPECT_TRUE(torch::allclose(out, expected, 1e-4, 1e-5)) << (out - expected).abs().max();
  }
}

TEST(LlamaTest, ValidateLlamaArgsNamesTheProblem) {
  LlamaArgs a = LlamaTinyArgs();
  a.num_kv_heads = 3;
  Status s = ValidateLlamaArgs(a);
  ASSERT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "num_kv_heads: must divide num_heads (4), got 3");

  a = LlamaTinyArgs();
  a.embed_dim = 66;
  EXPECT_EQ(ValidateLlamaArgs(a).message(), "embed_dim: must be divisible by num_heads (4), got 66");
  a.embed_dim = 60;
  EXPECT_EQ(ValidateLlamaArgs(a).message(),
            "embed_dim / num_heads: the head dimension must be even for RoPE, got 15");

  a = LlamaTinyArgs();
  a.vocab_size = 0;
  EXPECT_EQ(ValidateLlamaArgs(a).message(), "vocab_size: must be positive, got 0");

  a = LlamaTinyArgs();
  a.rope_scaling->low_freq_factor = 5;
  EXPECT_EQ(ValidateLlamaArgs(a).message(), "rope_scaling: need 0 < low_freq_factor <= high_freq_factor, got 5 and 4");

  auto made = MakeLlama(a);
  EXPECT_EQ(made.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THROW(Llama(a, std::nullopt, kMeta), c10::Error);
  EXPECT_TRUE(MakeLlama(LlamaTinyArgs(), std::nullopt, kMeta).ok());
}

TEST(LlamaTest, ForwardRejectsBadTokens) {
  Llama model(LlamaTinyArgs(), std::nullopt, kMeta);
  EXPECT_THROW(model(torch::zeros({4}, kMeta.dtype(torch::kLong))), c10::Error);
  EXPECT_THROW(model(torch::zeros({1, 513}, kMeta.dtype(torch::kLong))), c10::Error);
  EXPECT_THROW(model(torch::zeros({1, 4}, kMeta.dtype(torch::kFloat))), c10::Error);
}

// Reports the cost of one training step of the tiny model; the lead uses it to size the CPU tests.
TEST(LlamaTest, TinyForwardBackwardTiming) {
  torch::manual_seed(5);
  Llama model(LlamaTinyArgs());
  torch::Tensor tokens = torch::randint(0, 512, {4, 128}, torch::kLong);
  auto step = [&] {
    torch::Tensor logits = model(tokens);
    torch::Tensor loss = torch::cross_entropy_loss(logits.view({-1, 512}), tokens.view({-1}));
    loss.backward();
  };
  step();  // warm-up
  const auto start = std::chrono::steady_clock::now();
  const int iters = 5;
  for (int i = 0; i < iters; ++i) step();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / iters;
  std::cout << "tiny llama forward+backward, batch 4 x 128 tokens, " << torch::get_num_threads()
            << " threads: " << ms << " ms/step\n";
  RecordProperty("ms_per_step", std::to_string(ms));
}

}  // namespace
}  // namespace tmx::models
