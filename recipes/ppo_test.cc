// recipes/ppo.h against torchtune's own functions: recipes/testdata/ppo_fixtures.json holds what torchtune
// bd2a0fc's rlhf functions and PPOLoss compute on two cases of five responses of nine tokens (made by
// scripts/make_ppo_fixtures.py), in float64; the C++ functions must give the same within 1e-12.
#include "recipes/ppo.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace tmx::recipes {
namespace {

nlohmann::json Cases() {
  std::ifstream in(std::string(TM_SOURCE_DIR) + "/recipes/testdata/ppo_fixtures.json");
  EXPECT_TRUE(in.good()) << "missing fixture; make it with scripts/make_ppo_fixtures.py";
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json fixture = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(fixture.contains("cases"));
  return fixture.value("cases", nlohmann::json::array());
}

// A fixture's tensor: float64, int64 or (as_bool) bool.
torch::Tensor TensorOf(const nlohmann::json& c, const char* key, torch::Dtype dtype = torch::kDouble) {
  const nlohmann::json& t = c.at(key);
  std::vector<int64_t> shape = t.at("shape").get<std::vector<int64_t>>();
  if (dtype == torch::kDouble) {
    return torch::tensor(t.at("values").get<std::vector<double>>(), torch::kDouble).reshape(shape);
  }
  torch::Tensor v = torch::tensor(t.at("values").get<std::vector<int64_t>>(), torch::kLong).reshape(shape);
  return dtype == torch::kBool ? v.to(torch::kBool) : v;
}

void ExpectClose(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(torch::allclose(got.to(torch::kDouble), want.to(torch::kDouble), 1e-12, 1e-12))
      << what << ": got\n" << got << "\nwant\n" << want;
}

TEST(PpoTest, TruncationLengthsAndPenaltiesAreTorchtunes) {
  const nlohmann::json cases = Cases();
  ASSERT_EQ(cases.size(), 2u);
  for (const nlohmann::json& c : cases) {
    const nlohmann::json& o = c.at("options");
    const torch::Tensor stops = torch::tensor(o.at("stop_token_ids").get<std::vector<int64_t>>(), torch::kLong);
    TruncatedResponses t = TruncateAtFirstStopToken(TensorOf(c, "responses", torch::kLong), stops, o.at("pad_id"));
    EXPECT_TRUE(t.padding_masks.equal(TensorOf(c, "response_padding_masks", torch::kBool)));
    EXPECT_TRUE(t.responses.equal(TensorOf(c, "truncated", torch::kLong)));
    const torch::Tensor lengths = UnmaskedSequenceLengths(t.padding_masks);
    EXPECT_TRUE(lengths.equal(TensorOf(c, "seq_lens", torch::kLong))) << lengths;
    std::optional<int64_t> min_length;
    if (!o.at("min_response_length").is_null()) min_length = o.at("min_response_length").get<int64_t>();
    const torch::Tensor penalty = RewardPenaltyMask(t.padding_masks, lengths, o.at("penalise_no_eos"), min_length);
    EXPECT_TRUE(penalty.equal(TensorOf(c, "reward_penalty_mask", torch::kBool))) << penalty;
    const torch::Tensor idxs = ValueSequenceIndices(lengths, t.responses.size(1));
    EXPECT_TRUE(idxs.equal(TensorOf(c, "value_seq_idxs", torch::kLong))) << idxs;
  }
}

TEST(PpoTest, RewardsWithTheKlPenaltyAdvantagesAndReturnsAreTorchtunes) {
  for (const nlohmann::json& c : Cases()) {
    const nlohmann::json& o = c.at("options");
    const PpoRewards r = RewardsWithKlPenalty(TensorOf(c, "scores_penalised"), TensorOf(c, "logprobs"),
                                              TensorOf(c, "ref_logprobs"), o.at("kl_coeff"),
                                              TensorOf(c, "value_seq_idxs", torch::kLong));
    ExpectClose(r.kl, TensorOf(c, "kl"), "kl");
    ExpectClose(r.kl_reward, TensorOf(c, "kl_reward"), "kl_reward");
    ExpectClose(r.total, TensorOf(c, "rewards"), "rewards");
    const torch::Tensor masks = TensorOf(c, "response_padding_masks", torch::kBool).logical_not();
    const Advantages a = EstimateAdvantages(TensorOf(c, "values"), r.total, o.at("gamma"), o.at("lmbda"), masks);
    ExpectClose(a.advantages, TensorOf(c, "advantages"), "advantages");
    ExpectClose(a.returns, TensorOf(c, "returns"), "returns");
  }
}

TEST(PpoTest, ClippedPolicyAndValueLossesAreTorchtunes) {
  for (const nlohmann::json& c : Cases()) {
    const nlohmann::json& o = c.at("options");
    PpoLossOptions options;
    options.epsilon = o.at("epsilon");
    options.value_clip_range = o.at("value_clip_range");
    options.value_coeff = o.at("value_coeff");
    torch::Tensor logprobs = TensorOf(c, "pi_logprobs").requires_grad_(true);
    const PpoLossTerms t = PpoLoss(
        TensorOf(c, "logprobs"), logprobs, TensorOf(c, "advantages"), TensorOf(c, "values"), TensorOf(c, "phi_values"),
        TensorOf(c, "returns"), TensorOf(c, "response_padding_masks", torch::kBool).logical_not(),
        TensorOf(c, "value_padding_masks", torch::kBool).logical_not(), options);
    EXPECT_NEAR(t.loss.item<double>(), c.at("loss").get<double>(), 1e-12);
    EXPECT_NEAR(t.policy_loss.item<double>(), c.at("policy_loss").get<double>(), 1e-12);
    EXPECT_NEAR(t.value_loss.item<double>(), c.at("value_loss").get<double>(), 1e-12);
    EXPECT_NEAR(t.ratios.item<double>(), c.at("ratios").get<double>(), 1e-12);
    EXPECT_NEAR(t.clipfrac.item<double>(), c.at("clipfrac").get<double>(), 1e-12);
    // Only the loss carries a gradient, and it reaches the policy's log-probabilities.
    EXPECT_TRUE(t.loss.requires_grad());
    EXPECT_FALSE(t.policy_loss.requires_grad());
    t.loss.backward();
    EXPECT_GT(logprobs.grad().abs().sum().item<double>(), 0);
  }
}

// The fixture's cases cover what the functions branch on: a row without a stop token, a stop at the first and at
// the last position, a short response penalised, and a case with neither penalty.
TEST(PpoTest, FixtureCoversTheBranches) {
  const nlohmann::json cases = Cases();
  ASSERT_EQ(cases.size(), 2u);
  const torch::Tensor lengths = TensorOf(cases[0], "seq_lens", torch::kLong);
  EXPECT_EQ(lengths.max().item<int64_t>(), 8);  // no stop: the whole response
  EXPECT_EQ(lengths.min().item<int64_t>(), 0);  // a stop first
  EXPECT_GT(TensorOf(cases[0], "reward_penalty_mask", torch::kBool).sum().item<int64_t>(), 0);
  EXPECT_EQ(TensorOf(cases[1], "reward_penalty_mask", torch::kBool).sum().item<int64_t>(), 0);
  EXPECT_GT(cases[1].at("clipfrac").get<double>(), 0);
}

}  // namespace
}  // namespace tmx::recipes
