#include "recipes/models/generation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <set>

#include "recipes/models/presets.h"

namespace tmx::models {
namespace {

using torch::indexing::Slice;

Decoder TinyModel(const std::string& family, uint64_t seed) {
  torch::manual_seed(seed);
  return Decoder(FindModelPreset("tiny_" + family)->args);
}

TEST(SampleTokensTest, ZeroTemperatureAndTopOneAreTheLargestLogit) {
  torch::manual_seed(0);
  torch::Tensor logits = torch::randn({4, 50});
  torch::Tensor best = logits.argmax(-1);
  EXPECT_TRUE(torch::equal(SampleTokens(logits, {0.0, std::nullopt}), best));
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(torch::equal(SampleTokens(logits, {5.0, 1}), best));
}

TEST(SampleTokensTest, DrawsFollowTheSoftmaxOfTheScaledTopK) {
  torch::manual_seed(1);
  // Four candidates; top_k=3 removes the smallest; temperature 2 halves the logits.
  torch::Tensor logits = torch::tensor({{2.0f, 1.0f, 0.0f, -1.0f}}).repeat({20000, 1});
  torch::Tensor drawn = SampleTokens(logits, {2.0, 3});
  torch::Tensor expected = torch::softmax(torch::tensor({1.0f, 0.5f, 0.0f}), 0);
  for (int64_t id = 0; id < 3; ++id) {
    const double share = drawn.eq(id).to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(share, expected[id].item<double>(), 0.015) << "token " << id;
  }
  EXPECT_EQ(drawn.eq(3).sum().item<int64_t>(), 0) << "outside top_k";
  // The same seed draws the same tokens (the recipe's seed makes a run reproducible).
  torch::manual_seed(5);
  torch::Tensor a = SampleTokens(logits.slice(0, 0, 100), {1.0, std::nullopt});
  torch::manual_seed(5);
  EXPECT_TRUE(torch::equal(a, SampleTokens(logits.slice(0, 0, 100), {1.0, std::nullopt})));
}

TEST(SampleTokensTest, ATinyTemperatureOrHugeLogitsDrawTheLargestNeverANan) {
  // 1e-320 is 0 in float32: logits / it were infinities, the softmax NaN, and every draw token 0.
  torch::manual_seed(2);
  torch::Tensor logits = torch::tensor({{0.5f, -1.0f, 3.0f, 2.0f}, {1e30f, -1e30f, 3e38f, 0.0f}});
  for (double t : {1e-320, 1e-300, 1e-6}) {
    torch::Tensor drawn = SampleTokens(logits, {t, std::nullopt});
    EXPECT_EQ(drawn[0].item<int64_t>(), 2) << "temperature " << t;
    EXPECT_EQ(drawn[1].item<int64_t>(), 2) << "temperature " << t;
  }
  // Logits near float32's largest, at an ordinary temperature: no quotient overflows.
  torch::Tensor drawn = SampleTokens(torch::tensor({{-3e38f, 3e38f}}), {0.5, std::nullopt});
  EXPECT_EQ(drawn[0].item<int64_t>(), 1);
}

TEST(GenerateTest, MaxNewTokensNearTheInt64LimitIsRefusedNotOverflowed) {
  Decoder model = TinyModel("llama3", 3);
  torch::Tensor prompt = torch::randint(model->args().vocab_size, {1, 5}, torch::kLong);
  GenerationOptions options;
  options.max_new_tokens = std::numeric_limits<int64_t>::max() - 2;
  try {
    Generate(*model, prompt, options);
    FAIL() << "a length past int64 was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass the model's max_seq_len"), std::string::npos) << e.what();
  }
}

class GenerateFamilyTest : public ::testing::TestWithParam<std::string> {};

// Greedy decoding through the cache picks what recomputing the whole sequence picks, past the sliding windows.
TEST_P(GenerateFamilyTest, CachedAndRecomputedDecodingAgree) {
  Decoder model = TinyModel(GetParam(), 3);
  torch::Tensor prompt = torch::randint(model->args().vocab_size, {2, 9}, torch::kLong);
  GenerationOptions options;
  options.max_new_tokens = 40;
  options.sampling.temperature = 0;
  Generated cached = Generate(*model, prompt, options);
  EXPECT_FALSE(model->caches_enabled()) << "the cache is cleared at the end";
  options.kv_cache = false;
  Generated recomputed = Generate(*model, prompt, options);
  ASSERT_EQ(cached.tokens.sizes(), (std::vector<int64_t>{2, 40}));
  EXPECT_TRUE(torch::equal(cached.tokens, recomputed.tokens));
  EXPECT_EQ(cached.decode_step_s.size(), 39u);
  EXPECT_GT(cached.prefill_s, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, GenerateFamilyTest, ::testing::ValuesIn(TinyFamilies()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(GenerateTest, StopTokensEndASequenceAndPadTheRest) {
  Decoder model = TinyModel("llama3", 4);
  torch::Tensor prompt = torch::randint(model->args().vocab_size, {2, 6}, torch::kLong);
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.sampling.temperature = 0;
  Generated free = Generate(*model, prompt, options);
  // Stop on row 0's third token: row 0 keeps it and pads after; row 1 goes on until it stops or runs out.
  const int64_t stop = free.tokens[0][2].item<int64_t>();
  options.stop_tokens = {stop};
  options.pad_id = -1;
  Generated stopped = Generate(*model, prompt, options);
  torch::Tensor row0 = stopped.tokens[0];
  int64_t first_stop = 0;
  while (free.tokens[0][first_stop].item<int64_t>() != stop) ++first_stop;
  EXPECT_TRUE(torch::equal(row0.slice(0, 0, first_stop + 1), free.tokens[0].slice(0, 0, first_stop + 1)));
  if (stopped.tokens.size(1) > first_stop + 1) {
    EXPECT_TRUE(row0.slice(0, first_stop + 1).eq(-1).all().item<bool>());
  }
  // Generation ends once both rows stopped (or at max_new_tokens): row 1's tokens are free's until its stop.
  bool row1_stops = false;
  int64_t n = 0;
  for (; n < 12 && !row1_stops; ++n) row1_stops = free.tokens[1][n].item<int64_t>() == stop;
  EXPECT_EQ(stopped.tokens.size(1), std::max(first_stop + 1, n));
}

TEST(GenerateTest, RefusesASequenceLongerThanTheModel) {
  Decoder model = TinyModel("llama3", 5);
  const int64_t max = model->args().max_seq_len;
  GenerationOptions options;
  options.max_new_tokens = 2;
  torch::Tensor prompt = torch::zeros({1, max - 1}, torch::kLong);
  try {
    Generate(*model, prompt, options);
    FAIL() << "expected a refusal";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_new_tokens=2 pass the model's max_seq_len"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tmx::models
