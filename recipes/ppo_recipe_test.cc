// The PPO recipe (ppo_recipe.h) end to end on tiny/ppo_single_device, in-process on the CPU: it trains the policy
// and the value model and nothing else, starts with no KL to the reference, and its configs are checked key by key.
#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "harness/config_store.h"
#include "recipes/builtin.h"
#include "recipes/ppo_recipe.h"
#include "tests/in_process_run.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

// Sums of each model's weights before and after a step, so a test sees which models the step changed.
struct Weights {
  std::vector<double> policy, reference, value, reward;
};

double Sum(models::DecoderImpl& model) {
  double sum = 0;
  for (const torch::Tensor& p : model.parameters()) sum += p.to(torch::kDouble).abs().sum().item<double>();
  return sum;
}

// The recipe's objective, recording the models' weights around each step.
class WatchedPpo : public PpoObjective {
 public:
  explicit WatchedPpo(std::shared_ptr<std::vector<std::pair<Weights, Weights>>> steps) : steps_(std::move(steps)) {}
  Status Step(StepContext& step) override {
    const Weights before = Snapshot();
    Status s = PpoObjective::Step(step);
    steps_->push_back({before, Snapshot()});
    return s;
  }

 private:
  Weights Snapshot() { return {{Sum(policy())}, {Sum(reference())}, {Sum(value())}, {Sum(reward())}}; }
  std::shared_ptr<std::vector<std::pair<Weights, Weights>>> steps_;
};

class PpoRecipeTest : public ::testing::Test {
 protected:
  InProcessRun Run(std::vector<std::string> overrides, const RecipeEntry& entry = nullptr) {
    overrides.insert(overrides.begin(), {"device=cpu", "dtype=fp32", "save_checkpoints=False",
                                         "output_dir=" + scratch_.path() + "/" + std::to_string(runs_++)});
    InProcessRun run = RunInProcess("tiny/ppo_single_device", overrides, entry);
    EXPECT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
    return run;
  }

  static std::vector<nlohmann::json> Metrics(const InProcessRun& run) {
    std::vector<nlohmann::json> records;
    std::ifstream in(run.output_dir + "/logs/metrics.jsonl");
    for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
    return records;
  }

  std::vector<Problem> Problems(const std::string& name, const std::vector<std::string>& overrides) {
    const Registry& registry = BuiltinRegistry();
    StatusOr<LocatedConfig> located = LocateConfig(name, registry);
    EXPECT_TRUE(located.ok()) << located.status().ToString();
    if (!located.ok()) return {};
    StatusOr<Config> c = LoadResolvedConfig(*located, overrides, located->recipe, &registry);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return {};
    return ValidateConfig(*c, *located->recipe, registry, nullptr);
  }

  test::ScratchDir scratch_{"tm_ppo_recipe_test"};
  int runs_ = 0;
};

TEST_F(PpoRecipeTest, TinyConfigRunsStepsWithFiniteLossesAndTorchtunesMetrics) {
  // Two PPO epochs of two mini-batches of two backward passes each: four optimizer steps a step.
  const InProcessRun run = Run({"max_steps_per_epoch=3", "ppo_epochs=2", "ppo_batch_size=4"});
  ASSERT_TRUE(run.summary.is_object()) << run.printed;
  EXPECT_EQ(run.summary["recipe"], "ppo_full_finetune_single_device");
  ASSERT_EQ(run.summary["losses"].size(), 3u) << run.summary.dump();
  for (const nlohmann::json& loss : run.summary["losses"]) EXPECT_TRUE(std::isfinite(loss.get<double>())) << loss;
  const std::vector<nlohmann::json> metrics = Metrics(run);
  ASSERT_EQ(metrics.size(), 3u);
  for (const char* key : {"scores", "num_stop_tokens", "rlhf_reward", "kl", "kl_reward", "policy_loss", "value_loss",
                          "clipfrac", "ratios", "approx_policy_kl", "response_lengths"}) {
    ASSERT_TRUE(metrics[2].contains(key)) << key << " " << metrics[2].dump();
    EXPECT_TRUE(std::isfinite(metrics[2][key].get<double>())) << key;
  }
  // 12 tokens drawn for each prompt, cut at the first EOS: lengths are indices into them.
  EXPECT_GE(metrics[0]["response_lengths"].get<double>(), 0);
  EXPECT_LE(metrics[0]["response_lengths"].get<double>(), 11);
  EXPECT_GT(run.summary["step_tokens"][0].get<int64_t>(), 8 * 12);
  EXPECT_NE(run.printed.find("PPO: each step the policy answers batch_size prompts with 12 tokens"), std::string::npos)
      << run.printed;
}

// Policy and reference start equal (the same seed, no checkpoint), so the first step's KL penalty is exactly 0; with
// one mini-batch the policy has not moved when its loss is taken: ratios 1, nothing clipped.
TEST_F(PpoRecipeTest, TheFirstMiniBatchSeesNoKlAndRatiosOfOne) {
  const InProcessRun run =
      Run({"max_steps_per_epoch=2", "ppo_epochs=1", "ppo_batch_size=8", "gradient_accumulation_steps=1"});
  const std::vector<nlohmann::json> metrics = Metrics(run);
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[0]["kl"].get<double>(), 0.0);
  EXPECT_EQ(metrics[0]["kl_reward"].get<double>(), 0.0);
  EXPECT_NEAR(metrics[0]["ratios"].get<double>(), 1.0, 1e-6);
  EXPECT_NEAR(metrics[0]["approx_policy_kl"].get<double>(), 0.0, 1e-10);
  EXPECT_EQ(metrics[0]["clipfrac"].get<double>(), 0.0);
  // After one optimizer step the policy differs from the reference.
  EXPECT_NE(metrics[1]["kl"].get<double>(), 0.0);
}

TEST_F(PpoRecipeTest, AStepTrainsThePolicyAndTheValueModelOnly) {
  auto steps = std::make_shared<std::vector<std::pair<Weights, Weights>>>();
  RecipeSpec recipe = PpoRecipe([steps] { return std::make_unique<WatchedPpo>(steps); });
  Run({"max_steps_per_epoch=2"}, RecipeRun(recipe));
  ASSERT_EQ(steps->size(), 2u);
  for (const auto& [before, after] : *steps) {
    EXPECT_NE(before.policy, after.policy);
    EXPECT_NE(before.value, after.value);
    EXPECT_EQ(before.reference, after.reference);
    EXPECT_EQ(before.reward, after.reward);
  }
  // The reference is the policy's starting point and the value model the reward model's.
  EXPECT_EQ((*steps)[0].first.policy, (*steps)[0].first.reference);
  EXPECT_EQ((*steps)[0].first.value, (*steps)[0].first.reward);
}

// torchtune's 1B config steps the policy inside backward; with one backward pass a mini-batch that is the plain step.
TEST_F(PpoRecipeTest, OptimizerInBackwardTrainsAsThePlainStepDoes) {
  const std::vector<std::string> one_pass = {"max_steps_per_epoch=3", "gradient_accumulation_steps=1"};
  std::vector<std::string> in_backward = one_pass;
  in_backward.push_back("optimizer_in_bwd=True");
  const InProcessRun plain = Run(one_pass), stepped = Run(in_backward);
  ASSERT_EQ(plain.summary["losses"].size(), 3u);
  EXPECT_EQ(stepped.summary["losses"], plain.summary["losses"]);
  EXPECT_NE(stepped.printed.find("optimizer stepped inside backward"), std::string::npos) << stepped.printed;
}

TEST_F(PpoRecipeTest, AnEpochsCheckpointHoldsThePolicyAndTheValueModel) {
  const InProcessRun run = Run({"max_steps_per_epoch=1", "save_checkpoints=True"});
  for (const char* model : {"policy", "value"}) {
    const std::string file = run.output_dir + "/" + model + "/epoch_0/model.safetensors";
    EXPECT_TRUE(PathExists(file)) << file << "\n" << run.printed;
  }
  EXPECT_NE(run.printed.find("Saved the value model " + run.output_dir + "/value/epoch_0"), std::string::npos)
      << run.printed;
}

TEST_F(PpoRecipeTest, ResponsesLongerThanThePolicyTakesAreRefusedWithTheFix) {
  const InProcessRun run = RunInProcess("tiny/ppo_single_device",
                                        {"device=cpu", "dtype=fp32", "max_generated_tokens=600",
                                         "output_dir=" + scratch_.path() + "/long"});
  EXPECT_FALSE(run.status.ok());
  EXPECT_NE(run.status.message().find("generated ones exceed the policy's max_seq_len (512); lower "
                                      "tokenizer.max_seq_len or max_generated_tokens"),
            std::string::npos)
      << run.status.ToString();
}

TEST_F(PpoRecipeTest, TorchtunesConfigAndTheTinyOneValidate) {
  for (const char* name : {"llama2/1B_full_ppo_low_memory_single_device", "tiny/ppo_single_device"}) {
    std::vector<Problem> problems = Problems(name, {"device=cpu"});
    for (const Problem& p : problems) ADD_FAILURE() << name << ": " << p.ToString();
  }
}

TEST_F(PpoRecipeTest, BadPpoKeysAreNamed) {
  struct Case {
    std::string override_, key, says;
  };
  const std::vector<Case> cases = {
      {"ppo_epochs=0", "ppo_epochs", ""},
      {"ppo_batch_size=3", "ppo_batch_size", "must divide batch_size (8)"},
      {"forward_batch_size=5", "forward_batch_size", "must divide batch_size (8)"},
      {"gradient_accumulation_steps=3", "gradient_accumulation_steps", "must divide ppo_batch_size (8)"},
      {"num_steps=4", "num_steps", "at least batch_size (8)"},
      {"temperature=0", "temperature", ""},
      {"stop_token_ids=[eos]", "stop_token_ids", "list of token ids"},
      {"reward_and_value_model.vocab_size=300", "reward_and_value_model", "not the policy's (512)"},
      {"resume_from_checkpoint=True", "resume_from_checkpoint", "not implemented"},
      {"optimizer_in_bwd=True", "optimizer_in_bwd", "gradient_accumulation_steps=1"},
  };
  for (const Case& c : cases) {
    const std::vector<Problem> problems = Problems("tiny/ppo_single_device", {"device=cpu", c.override_});
    bool found = false;
    for (const Problem& p : problems) {
      found = found || (p.key == c.key && p.message.find(c.says) != std::string::npos);
    }
    EXPECT_TRUE(found) << c.override_ << ": no problem at " << c.key << " saying '" << c.says << "'; got "
                       << (problems.empty() ? std::string("none") : problems.front().ToString());
  }
}

// The shared checks read the policy as the loop's `model`; what they find is reported at policy_model, where the
// config writes it.
TEST_F(PpoRecipeTest, ThePolicysProblemsAreNamedAtPolicyModel) {
  const std::vector<Problem> problems =
      Problems("llama2/1B_full_ppo_low_memory_single_device", {"device=cpu", "policy_model.num_heads=3"});
  ASSERT_FALSE(problems.empty());
  for (const Problem& p : problems) {
    EXPECT_EQ(p.key.rfind("policy_model", 0), 0u) << p.ToString();
    EXPECT_NE(p.where.find("1B_full_ppo_low_memory_single_device.yaml"), std::string::npos) << p.ToString();
  }
}

}  // namespace
}  // namespace tmx::recipes
