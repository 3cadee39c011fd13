// The fused next-token loss against the plain one: the same value and gradients, chunked or not; the forward KL
// of knowledge distillation against torchtune's.
#include "recipes/loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "recipes/data/sample.h"
#include "recipes/models/llama.h"

namespace tmx::recipes {
namespace {

struct Inputs {
  torch::Tensor hidden, weight, labels;
};

Inputs Make(torch::Dtype dtype) {
  torch::manual_seed(11);
  Inputs in;
  in.hidden = torch::randn({3, 7, 16}).to(dtype).requires_grad_();
  in.weight = (torch::randn({50, 16}) * 0.3).to(dtype).requires_grad_();
  in.labels = torch::randint(0, 50, {3, 7}, torch::kLong);
  in.labels.index_put_({0, 3}, data::kIgnoreIndex);
  in.labels.index_put_({2, 1}, data::kIgnoreIndex);
  in.labels.index_put_({1, 0}, data::kIgnoreIndex);  // position 0's label is never predicted anyway
  return in;
}

TEST(LossTest, LinearLossMatchesTheLossOfTheLogitsInEveryChunking) {
  Inputs plain = Make(torch::kFloat);
  torch::Tensor expected = NextTokenLoss(at::linear(plain.hidden, plain.weight), plain.labels);
  (expected * 0.5).backward();  // a scaled loss, as gradient accumulation scales it
  // 50 classes: chunks of 1 row, 3 rows, and all 18 rows at once.
  for (int64_t chunk_elements : {int64_t{50}, int64_t{150}, int64_t{1} << 20}) {
    SCOPED_TRACE(chunk_elements);
    Inputs fused = Make(torch::kFloat);
    torch::Tensor loss = NextTokenLinearLoss(fused.hidden, fused.weight, fused.labels, chunk_elements);
    EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-6);
    EXPECT_EQ(loss.scalar_type(), torch::kFloat);
    (loss * 0.5).backward();
    EXPECT_TRUE(torch::allclose(fused.hidden.grad(), plain.hidden.grad(), 1e-5, 1e-7));
    EXPECT_TRUE(torch::allclose(fused.weight.grad(), plain.weight.grad(), 1e-5, 1e-7));
    // The last position predicts nothing, so gets no gradient.
    EXPECT_EQ(fused.hidden.grad().select(1, 6).abs().max().item<float>(), 0.0f);
  }
}

// Gemma 2's final soft-cap, fused: the loss of the capped logits and its gradients through the cap, in every
// chunking. A small cap (2) puts most logits in tanh's bend, where a gradient that skipped the cap would be far off.
TEST(LossTest, SoftCappedLinearLossMatchesTheLossOfTheCappedLogits) {
  const double cap = 2.0;
  Inputs plain = Make(torch::kFloat);
  torch::Tensor expected =
      NextTokenLoss(torch::tanh(at::linear(plain.hidden, plain.weight) / cap) * cap, plain.labels);
  expected.backward();
  for (int64_t chunk_elements : {int64_t{50}, int64_t{150}, int64_t{1} << 20}) {
    SCOPED_TRACE(chunk_elements);
    Inputs fused = Make(torch::kFloat);
    torch::Tensor loss = NextTokenLinearLoss(fused.hidden, fused.weight, fused.labels, chunk_elements, cap);
    EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-6);
    loss.backward();
    EXPECT_TRUE(torch::allclose(fused.hidden.grad(), plain.hidden.grad(), 1e-5, 1e-7));
    EXPECT_TRUE(torch::allclose(fused.weight.grad(), plain.weight.grad(), 1e-5, 1e-7));
  }
  // Uncapped, the same inputs give another loss: the cap is applied, not ignored.
  Inputs uncapped = Make(torch::kFloat);
  EXPECT_GT(std::fabs(NextTokenLinearLoss(uncapped.hidden, uncapped.weight, uncapped.labels).item<double>() -
                      expected.item<double>()),
            1e-3);
}

TEST(LossTest, LinearLossInBf16StaysWithinRoundingOfTheLogitsLoss) {
  Inputs plain = Make(torch::kBFloat16);
  torch::Tensor expected = NextTokenLoss(at::linear(plain.hidden, plain.weight), plain.labels);
  expected.backward();
  Inputs fused = Make(torch::kBFloat16);
  torch::Tensor loss = NextTokenLinearLoss(fused.hidden, fused.weight, fused.labels, 150);
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-3);
  EXPECT_EQ(fused.weight.grad().scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::allclose(fused.hidden.grad().to(torch::kFloat), plain.hidden.grad().to(torch::kFloat), 2e-2, 1e-3));
  EXPECT_TRUE(torch::allclose(fused.weight.grad().to(torch::kFloat), plain.weight.grad().to(torch::kFloat), 2e-2, 1e-3));
}

// A vocabulary of thousands (the CPU loop's blocks of 16 and a tail) and logits spread over a wide range (most
// exponentials underflow), with a chunk whose rows are all ignored: the loss and both gradients of the plain
// loss, in float32 and within bf16's rounding.
TEST(LossTest, LargeVocabularyAndWideLogitsKeepThePlainLoss) {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    auto make = [&] {
      torch::manual_seed(12);
      Inputs in;
      in.hidden = (torch::randn({2, 9, 32}) * 4).to(dtype).requires_grad_();
      in.weight = (torch::randn({3001, 32}) * 2).to(dtype).requires_grad_();
      in.labels = torch::randint(0, 3001, {2, 9}, torch::kLong);
      in.labels.index_put_({0, torch::indexing::Slice(1, 4)}, data::kIgnoreIndex);  // rows 0-2: one whole chunk
      return in;
    };
    Inputs plain = make();
    torch::Tensor expected = NextTokenLoss(at::linear(plain.hidden, plain.weight), plain.labels);
    expected.backward();
    Inputs fused = make();
    torch::Tensor loss = NextTokenLinearLoss(fused.hidden, fused.weight, fused.labels, 3 * 3001);
    loss.backward();
    const bool fp32 = dtype == torch::kFloat;
    EXPECT_NEAR(loss.item<double>(), expected.item<double>(), (fp32 ? 1e-5 : 1e-3) * expected.item<double>());
    for (const auto& [got, want] : {std::pair{fused.hidden.grad(), plain.hidden.grad()},
                                    std::pair{fused.weight.grad(), plain.weight.grad()}}) {
      const torch::Tensor a = got.to(torch::kFloat), e = want.to(torch::kFloat);
      const double largest = e.abs().max().item<double>();
      EXPECT_TRUE(torch::allclose(a, e, fp32 ? 1e-4 : 2e-2, (fp32 ? 1e-5 : 1e-2) * largest))
          << (a - e).abs().max().item<double>() << " of " << largest;
    }
  }
}

TEST(LossTest, WithoutGradModeNothingIsKeptForBackward) {
  Inputs in = Make(torch::kFloat);
  torch::Tensor expected = NextTokenLoss(at::linear(in.hidden, in.weight), in.labels);
  torch::NoGradGuard no_grad;
  torch::Tensor loss = NextTokenLinearLoss(in.hidden, in.weight, in.labels, 150);
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-6);
  EXPECT_FALSE(loss.requires_grad());
}

TEST(LossTest, TheModelsLossFusesOnlyAPlainOutputProjection) {
  models::DecoderArgs args = models::LlamaTinyArgs();  // tied embeddings
  torch::manual_seed(2);
  models::Decoder tied(args);
  EXPECT_TRUE(tied->PlainOutputWeight().is_same(tied->named_parameters()["tok_embeddings.weight"]));
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 12}, torch::kLong);
  EXPECT_NEAR(ModelNextTokenLoss(*tied, tokens, tokens).item<double>(),
              NextTokenLoss(tied->forward(tokens), tokens).item<double>(), 1e-5);

  args.tie_word_embeddings = false;
  models::LoraArgs lora{{"q_proj"}, /*apply_to_mlp=*/false, /*apply_to_output=*/true, 4, 8, 0.0};
  models::Decoder adapted(args, lora);
  EXPECT_FALSE(adapted->PlainOutputWeight().defined());  // the adapter is part of the projection
  models::Decoder untied(args);
  EXPECT_TRUE(untied->PlainOutputWeight().is_same(untied->named_parameters()["output.weight"]));
  args.final_softcap = 30;
  models::Decoder capped(args);
  // The cap acts on the logits, which the fused loss caps a chunk at a time.
  EXPECT_TRUE(capped->PlainOutputWeight().is_same(capped->named_parameters()["output.weight"]));
  EXPECT_NEAR(ModelNextTokenLoss(*capped, tokens, tokens).item<double>(),
              NextTokenLoss(capped->forward(tokens), tokens).item<double>(), 1e-6);
}

// scripts/make_kd_fixtures.py: torchtune 0.6.1's ForwardKLLoss and its gradient on fixed logits, with ignored
// labels and -inf student logits.
TEST(ForwardKlLossTest, EqualsTorchtunesLossAndGradient) {
  StatusOr<std::string> text = ReadFile(std::string(TM_SOURCE_DIR) + "/recipes/testdata/kd_loss_torchtune_0_6_1.json");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const nlohmann::json fixture = nlohmann::json::parse(*text);
  EXPECT_EQ(fixture["torchtune"], "0.6.1");
  auto matrix = [](const nlohmann::json& rows) {
    std::vector<torch::Tensor> out;
    for (const nlohmann::json& row : rows) {
      std::vector<float> values;
      for (const nlohmann::json& x : row) {
        values.push_back(x.is_string() ? -std::numeric_limits<float>::infinity() : x.get<float>());
      }
      out.push_back(torch::tensor(values));
    }
    return torch::stack(out);
  };
  ASSERT_EQ(fixture["cases"].size(), 3u);
  for (const nlohmann::json& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    torch::Tensor student = matrix(c["student"]).requires_grad_();
    torch::Tensor labels = torch::tensor(c["labels"].get<std::vector<int64_t>>());
    torch::Tensor loss = ForwardKlLoss(student, matrix(c["teacher"]), labels);
    EXPECT_NEAR(loss.item<double>(), c["loss"].get<double>(), 1e-5);
    if (!loss.requires_grad()) {
      EXPECT_EQ(c["loss"].get<double>(), 0.0);  // every label ignored: a constant 0, as torchtune's
      continue;
    }
    loss.backward();
    EXPECT_LT((torch::nan_to_num(student.grad(), 0.0) - matrix(c["grad"])).abs().max().item<double>(), 1e-6);
  }
}

TEST(ForwardKlLossTest, TheDistillationLossMixesCrossEntropyAndForwardKl) {
  torch::manual_seed(4);
  torch::Tensor student = torch::randn({2, 6, 13});
  torch::Tensor teacher = torch::randn({2, 6, 13});
  torch::Tensor labels = torch::randint(0, 13, {2, 6}, torch::kLong);
  labels.index_put_({1, 3}, data::kIgnoreIndex);
  const double ce = NextTokenLoss(student, labels).item<double>();
  const double kl = NextTokenForwardKlLoss(student, teacher, labels).item<double>();
  for (double ratio : {0.0, 0.5, 1.0}) {
    EXPECT_NEAR(NextTokenDistillationLoss(student, teacher, labels, ratio).item<double>(),
                (1 - ratio) * ce + ratio * kl, 1e-5)
        << ratio;
  }
}

TEST(ForwardKlLossTest, IsZeroForTheTeachersOwnLogitsOnlyUpToItsEntropy) {
  // KL(p || q) = sum p log p - sum p log q: the loss (the second term) is the teacher's entropy at q = p, and more
  // for any other student.
  torch::manual_seed(3);
  torch::Tensor teacher = torch::randn({2, 5, 9});
  torch::Tensor labels = torch::randint(0, 9, {2, 5}, torch::kLong);
  const torch::Tensor p = torch::softmax(teacher, -1).slice(1, 0, -1);
  const double entropy = -(p * torch::log(p)).sum(-1).mean().item<double>();
  EXPECT_NEAR(NextTokenForwardKlLoss(teacher, teacher, labels).item<double>(), entropy, 1e-5);
  EXPECT_GT(NextTokenForwardKlLoss(torch::randn({2, 5, 9}), teacher, labels).item<double>(), entropy + 0.05);
}

// scripts/make_dpo_fixtures.py: torchtune 0.6.1's DPOLoss (losses, rewards, the gradient of their mean) on fixed
// log-probabilities, and its get_batch_log_probs (and gradient) on fixed logits with masked labels.
class DpoFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<std::string> text =
        ReadFile(std::string(TM_SOURCE_DIR) + "/recipes/testdata/dpo_loss_torchtune_0_6_1.json");
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    fixture_ = nlohmann::json::parse(*text);
    EXPECT_EQ(fixture_["torchtune"], "0.6.1");
  }
  static torch::Tensor Floats(const nlohmann::json& v) { return torch::tensor(v.get<std::vector<float>>()); }
  static double MaxDiff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }
  nlohmann::json fixture_;
};

TEST_F(DpoFixtureTest, LossRewardsAndGradientEqualTorchtunes) {
  ASSERT_EQ(fixture_["loss"].size(), 3u);
  for (const nlohmann::json& c : fixture_["loss"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    torch::Tensor chosen = Floats(c["policy_chosen"]).requires_grad_();
    torch::Tensor rejected = Floats(c["policy_rejected"]).requires_grad_();
    DpoLossOptions options;
    options.beta = c["beta"].get<double>();
    options.label_smoothing = c["label_smoothing"].get<double>();
    DpoTerms t = DpoLoss(chosen, rejected, Floats(c["ref_chosen"]), Floats(c["ref_rejected"]), options);
    EXPECT_LT(MaxDiff(t.losses, Floats(c["losses"])), 1e-6);
    EXPECT_LT(MaxDiff(t.chosen_rewards, Floats(c["chosen_rewards"])), 1e-6);
    EXPECT_LT(MaxDiff(t.rejected_rewards, Floats(c["rejected_rewards"])), 1e-6);
    EXPECT_FALSE(t.chosen_rewards.requires_grad());
    t.losses.mean().backward();
    EXPECT_LT(MaxDiff(chosen.grad(), Floats(c["grad_policy_chosen"])), 1e-7);
    EXPECT_LT(MaxDiff(rejected.grad(), Floats(c["grad_policy_rejected"])), 1e-7);
  }
}

TEST_F(DpoFixtureTest, SequenceLogProbsEqualTorchtunesGetBatchLogProbs) {
  ASSERT_EQ(fixture_["log_probs"].size(), 1u);
  const nlohmann::json& c = fixture_["log_probs"][0];
  std::vector<torch::Tensor> rows;
  for (const nlohmann::json& row : c["logits"]) {
    std::vector<torch::Tensor> steps;
    for (const nlohmann::json& step : row) steps.push_back(Floats(step));
    rows.push_back(torch::stack(steps));
  }
  torch::Tensor logits = torch::stack(rows).requires_grad_();
  std::vector<torch::Tensor> label_rows;
  for (const nlohmann::json& row : c["labels"]) label_rows.push_back(torch::tensor(row.get<std::vector<int64_t>>()));
  const torch::Tensor labels = torch::stack(label_rows);
  torch::Tensor log_probs = SequenceLogProbs(logits, labels);
  EXPECT_LT(MaxDiff(log_probs, Floats(c["log_probs"])), 1e-5);
  EXPECT_EQ(log_probs[3].item<double>(), 0.0);  // nothing left to score in row 3
  log_probs.sum().backward();
  std::vector<torch::Tensor> grad_rows;
  for (const nlohmann::json& row : c["grad"]) {
    std::vector<torch::Tensor> steps;
    for (const nlohmann::json& step : row) steps.push_back(Floats(step));
    grad_rows.push_back(torch::stack(steps));
  }
  EXPECT_LT(MaxDiff(logits.grad(), torch::stack(grad_rows)), 1e-6);
}

TEST(DpoLossTest, EqualPolicyAndReferenceGiveLog2AndNoReward) {
  const torch::Tensor chosen = torch::tensor({-12.5f, -3.0f}), rejected = torch::tensor({-9.0f, -30.0f});
  DpoTerms t = DpoLoss(chosen, rejected, chosen, rejected);
  EXPECT_LT((t.losses - std::log(2.0)).abs().max().item<double>(), 1e-7);
  EXPECT_EQ(t.chosen_rewards.abs().max().item<double>(), 0.0);
  EXPECT_EQ(t.rejected_rewards.abs().max().item<double>(), 0.0);
}

}  // namespace
}  // namespace tmx::recipes
