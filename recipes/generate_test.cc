#include "recipes/generate.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "base/file_util.h"
#include "harness/config_store.h"
#include "harness/device_hooks.h"
#include "recipes/builtin.h"
#include "tests/in_process_run.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

struct Generation {
  Status status;
  std::string output;  // what the run printed
  nlohmann::json summary;
  // The generated text: the line after the "Prompt:" line.
  std::string Text() const {
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("Prompt: ", 0) == 0 && std::getline(lines, line)) return line;
    }
    return "";
  }
};

StatusOr<Config> Load(const std::string& config, const std::vector<std::string>& overrides) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<LocatedConfig> located = LocateConfig(config, registry);
  if (!located.ok()) return located.status();
  return LoadResolvedConfig(*located, overrides, located->recipe, &registry);
}

class GenerateRecipeTest : public ::testing::Test {
 protected:
  Generation Generate(const std::string& config, std::vector<std::string> overrides) {
    overrides.push_back("device=cpu");
    overrides.push_back("output_dir=" + scratch_.path() + "/" + std::to_string(runs_++));
    const InProcessRun done = RunInProcess(config, overrides);
    Generation run;
    run.status = done.status;
    run.output = done.printed;
    run.summary = done.summary;
    return run;
  }

  test::ScratchDir scratch_{"tm_generate_test"};
  int runs_ = 0;
};

TEST_F(GenerateRecipeTest, TinyConfigReportsPrefillAndDecodeInItsSummary) {
  Generation run = Generate("tiny/llama3_generation", {"max_new_tokens=24", "temperature=0"});
  ASSERT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.output;
  const nlohmann::json& s = run.summary;
  EXPECT_TRUE(s["ok"].get<bool>());
  EXPECT_EQ(s["recipe"], "generate");
  // Each decode step is a step: one token for the one sequence; no loss. (A seed model may stop early at EOS.)
  const size_t steps = s["step_times_s"].size();
  EXPECT_GE(steps, 1u);
  EXPECT_LE(steps, 23u);
  EXPECT_EQ(s["step_tokens"], nlohmann::json(std::vector<int64_t>(steps, 1)));
  EXPECT_TRUE(s["losses"].empty());
  EXPECT_GT(s["time_to_first_token_s"].get<double>(), 0);
  EXPECT_GT(s["prefill_tokens_per_second"].get<double>(), 0);
  EXPECT_GT(s["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(s["peak_memory_bytes"].get<int64_t>(), 0);
  EXPECT_NE(run.output.find("Generated " + std::to_string(steps + 1) + " tokens: time to first token"),
            std::string::npos)
      << run.output;
  EXPECT_FALSE(run.Text().empty()) << run.output;
  // The tiny config starts from the seed: its text is noise, and the run says so before it.
  EXPECT_NE(run.output.find("note: the weights are seed-initialised (checkpointer.checkpoint_dir is null), not trained "
                            "ones: the text below is noise; its speed is the model's\nPrompt: "),
            std::string::npos)
      << run.output;
}

TEST_F(GenerateRecipeTest, GreedyTextIsTheSameWithAndWithoutTheCache) {
  // dev/generate_v2 always uses the cache; generate can recompute. Same model (same seed), same greedy tokens.
  Generation cached = Generate("tiny/llama3_2_generation_v2", {"max_new_tokens=40", "temperature=0"});
  Generation recomputed = Generate("tiny/llama3_2_generation", {"max_new_tokens=40", "temperature=0", "enable_kv_cache=False"});
  ASSERT_TRUE(cached.status.ok() && recomputed.status.ok()) << cached.output << recomputed.output;
  EXPECT_EQ(cached.Text(), recomputed.Text());
  EXPECT_FALSE(cached.Text().empty());
}

TEST_F(GenerateRecipeTest, TheSeedMakesSamplingReproducible) {
  const std::vector<std::string> sampled = {"max_new_tokens=40", "temperature=1.0", "top_k=50"};
  auto with_seed = [&](int seed) {
    std::vector<std::string> o = sampled;
    o.push_back("seed=" + std::to_string(seed));
    return Generate("tiny/qwen2_generation", o).Text();
  };
  EXPECT_EQ(with_seed(7), with_seed(7));
  // Another seed builds another model and draws other tokens.
  EXPECT_NE(with_seed(7), with_seed(8));
}

TEST_F(GenerateRecipeTest, GeneratesFromAFineTunedCheckpoint) {
  // A full fine-tuning run of the same tiny model writes epoch_0 in the checkpointer's format; generation reads
  // it like any checkpoint, and the trained weights answer differently from the seed's.
  const std::string trained = scratch_.path() + "/trained";
  const InProcessRun train = RunInProcess(
      "tiny/llama3_full_single_device",
      {"device=cpu", "output_dir=" + trained, "max_steps_per_epoch=3", "optimizer.lr=0.05"});
  ASSERT_TRUE(train.status.ok()) << train.status.ToString() << train.printed;
  Generation seed = Generate("tiny/llama3_generation", {"max_new_tokens=16", "temperature=0"});
  Generation tuned = Generate("tiny/llama3_generation",
                       {"max_new_tokens=16", "temperature=0", "checkpointer.checkpoint_dir=" + trained + "/epoch_0"});
  ASSERT_TRUE(tuned.status.ok()) << tuned.status.ToString() << "\n" << tuned.output;
  EXPECT_TRUE(tuned.summary["stand_ins"].empty());
  EXPECT_NE(tuned.Text(), seed.Text());
}

TEST_F(GenerateRecipeTest, ALongerAnswerThanTheModelHoldsIsRefusedNamingTheFix) {
  Generation run = Generate("tiny/llama3_generation", {"max_new_tokens=600"});
  EXPECT_EQ(run.status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(run.status.message().find("max_new_tokens=600 pass the model's max_seq_len of 512; fix: lower "
                                      "max_new_tokens to 496"),
            std::string::npos)
      << run.status.message();
  EXPECT_FALSE(run.summary["ok"].get<bool>()) << "the summary records the failure";
}

TEST_F(GenerateRecipeTest, MaxNewTokensNearTheInt64LimitIsRefusedNamingTheFix) {
  // The prompt's length plus it used to overflow to a negative length, accepted, then a negative cache.
  Generation run = Generate("tiny/llama3_generation", {"max_new_tokens=9223372036854775800"});
  EXPECT_EQ(run.status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(run.status.message().find("max_new_tokens=9223372036854775800 pass the model's max_seq_len of 512; fix: "
                                      "lower max_new_tokens to"),
            std::string::npos)
      << run.status.message();
}

TEST(GenerateValidateTest, ATemperatureBetweenZeroAndTheSmallestDivisorIsRefused) {
  const Registry& registry = BuiltinRegistry();
  const RecipeSpec* recipe = registry.FindRecipe("generate");
  ASSERT_NE(recipe, nullptr);
  for (const std::string& t : {"1e-320", "1e-6"}) {
    StatusOr<Config> c = Load("tiny/llama3_generation", {"temperature=" + t});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::vector<Problem> problems = ValidateConfig(*c, *recipe, registry, nullptr);
    ASSERT_EQ(problems.size(), 1u) << t;
    EXPECT_EQ(problems[0].key, "temperature");
    EXPECT_NE(problems[0].message.find("'" + t + "' is above 0 but below 1e-5"), std::string::npos)
        << problems[0].message;
    EXPECT_NE(problems[0].message.find("use 0 for greedy decoding"), std::string::npos) << problems[0].message;
  }
  for (const std::string& t : {"0", "1e-5", "0.6"}) {
    StatusOr<Config> c = Load("tiny/llama3_generation", {"temperature=" + t});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_TRUE(ValidateConfig(*c, *recipe, registry, nullptr).empty()) << t;
  }
}

TEST(GeneratePromptTest, MessagesAreSystemUserAndAnOpenAnswer) {
  StatusOr<Config> c = Load("tiny/llama3_generation", {"prompt={system: Be brief., user: {text: Hi there}}"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<std::vector<data::Message>> m = PromptMessages(*c);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0].role, "system");
  EXPECT_EQ((*m)[0].text(), "Be brief.");
  EXPECT_EQ((*m)[1].role, "user");
  EXPECT_EQ((*m)[1].text(), "Hi there");
  EXPECT_EQ((*m)[2].role, "assistant");
  EXPECT_EQ((*m)[2].text(), "");
}

TEST(GeneratePromptTest, ImagesRolesAndMissingUsersAreRefusedByValidation) {
  const Registry& registry = BuiltinRegistry();
  const RecipeSpec* recipe = registry.FindRecipe("generate");
  ASSERT_NE(recipe, nullptr);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"prompt={user: {image: a.ppm, text: hi}}", "user.image: an image prompt needs a Llama 3.2 Vision model"},
      {"prompt={user: {image: [a.ppm], text: hi}}", "user.image: an image is the user's, a path to a PNG or PPM file"},
      {"prompt={system: {image: a.ppm, text: hi}, user: hi}", "system.image: an image is the user's"},
      {"prompt={assistant: hi, user: hi}", "has role 'assistant', not system or user"},
      {"prompt={system: hi}", "has no user message"},
      {"prompt=hello", "must be a mapping of system and user"},
  };
  for (const auto& [override, expected] : cases) {
    StatusOr<Config> c = Load("tiny/llama3_generation", {override});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::vector<Problem> problems = ValidateConfig(*c, *recipe, registry, nullptr);
    ASSERT_EQ(problems.size(), 1u) << override;
    EXPECT_EQ(problems[0].key, "prompt");
    EXPECT_NE(problems[0].message.find(expected), std::string::npos) << problems[0].message;
    EXPECT_NE(problems[0].where.find(override), std::string::npos) << problems[0].where;
  }
}

// The tiny vision config answers a question on a shipped image. From the Mllama parity fixture's weights (every gate
// away from zero; recipes/checkpoint/testdata/mllama_parity) the image changes the greedy answer; a URL is never
// fetched: refused naming the key, or with stand-ins answered on a shipped image.
TEST_F(GenerateRecipeTest, AVisionModelAnswersOnTheImage) {
  const std::vector<std::string> greedy = {"temperature=0", "max_new_tokens=8"};
  Generation seed = Generate("tiny/llama3_2_vision_generation_v2", greedy);
  ASSERT_TRUE(seed.status.ok()) << seed.status.ToString() << "\n" << seed.output;
  EXPECT_NE(seed.output.find("and a 1 x 2-tile image; generating up to 8 tokens"), std::string::npos) << seed.output;
  EXPECT_EQ(seed.summary["step_times_s"].size(), 7u);
  const std::string fixture = std::string(TM_SOURCE_DIR) + "/recipes/checkpoint/testdata/mllama_parity";
  auto answer = [&](const std::string& image) {
    std::vector<std::string> o = greedy;
    o.push_back("checkpointer.checkpoint_dir=" + fixture);
    o.push_back("dtype=fp32");
    if (!image.empty()) o.push_back("prompt.user.image=tune-matrix/tiny_vision/images/" + image);
    Generation run = Generate("tiny/llama3_2_vision_generation_v2", o);
    EXPECT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.output;
    return run.Text();
  };
  const std::string red = answer("red_wide.ppm"), blue = answer("blue_tall.ppm");
  EXPECT_EQ(red, answer("red_wide.ppm"));
  EXPECT_NE(red, blue);
  Generation url = Generate("tiny/llama3_2_vision_generation_v2",
                            {"prompt.user.image=https://example.com/a.jpg", "max_new_tokens=2"});
  EXPECT_EQ(url.status.code(), Status::Code::kNotFound) << url.status.ToString();
  EXPECT_NE(url.status.message().find("prompt.user.image https://example.com/a.jpg is a URL (runs never download); "
                                      "fix: save the image as a PNG or PPM file"),
            std::string::npos)
      << url.status.message();
}

TEST(GenerateEstimateTest, AVisionModelCountsItsEncoderAndTheImagesKeysAndValues) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<Config> c = Load("llama3_2_vision/11B_generation_v2", {"device=cpu"});  // bf16, 200 new tokens
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<CellEstimate> e = EstimateGenerate(*c, registry, *ProbeDevice(*ParseDeviceSelector("cpu")));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  // transformers' 10,670,220,835 less its repeated tile tables (VisionModelTest), encoder and fusion layers in.
  EXPECT_EQ(e->parameters, 10629184035);
  // The weights, and above them the caches: 32 layers' keys and values of 520 positions, 8 fusion layers' of one
  // image's 4 x 1608 tokens (8 heads of 128, bf16).
  const double cache = 2.0 * 1024 * 2 * (32 * 520 + 8 * 4 * 1608);
  EXPECT_GT(static_cast<double>(e->peak_memory_bytes), 2.0 * 10629184035 + cache);
  EXPECT_LT(static_cast<double>(e->peak_memory_bytes), 2.0 * 10629184035 + cache + 3e9);
}

TEST(GenerateEstimateTest, WeightsAndTheKvCacheDominateAndAStepIsOnePass) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<Config> c = Load("generation", {"device=cpu"});  // Llama 2 7B, bf16, 300 new tokens
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<CellEstimate> e = EstimateGenerate(*c, registry, *ProbeDevice(*ParseDeviceSelector("cpu")));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_NEAR(static_cast<double>(e->parameters), 6.74e9, 0.01e9);
  EXPECT_EQ(e->trainable_parameters, 0);
  // 13.5 GB of bf16 weights; the cache for 320 + 300 positions is 2 x 32 layers x 620 x 4096 x 2 bytes = 325 MB.
  const double weights = 2.0 * static_cast<double>(e->parameters);
  EXPECT_GT(static_cast<double>(e->peak_memory_bytes), weights + 325e6);
  EXPECT_LT(static_cast<double>(e->peak_memory_bytes), weights + 325e6 + 2.5e9);
  EXPECT_DOUBLE_EQ(e->work, static_cast<double>(e->parameters));
}

TEST(GenerateEstimateTest, TensorParallelRanksHoldAShareOnADeviceAndAllReadTheWholeModel) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<Config> c = Load("llama3_1/70B_generation_distributed", {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  DeviceInfo cuda;
  cuda.id = "cuda:0";
  cuda.type = "cuda";
  cuda.index = 0;
  StatusOr<CellEstimate> one = EstimateGenerate(*c, registry, cuda, 1);
  StatusOr<CellEstimate> two = EstimateGenerate(*c, registry, cuda, 2);
  StatusOr<CellEstimate> cpu_two = EstimateGenerate(*c, registry, *ProbeDevice(*ParseDeviceSelector("cpu")), 2);
  ASSERT_TRUE(one.ok() && two.ok() && cpu_two.ok());
  const double weights = 2.0 * static_cast<double>(one->parameters);  // 70.6B parameters in bf16
  EXPECT_GT(static_cast<double>(one->peak_memory_bytes), weights);
  // A rank's device holds half the layers (and the whole embeddings and output, about 2 GB each here).
  EXPECT_GT(static_cast<double>(two->peak_memory_bytes), weights / 2);
  EXPECT_LT(static_cast<double>(two->peak_memory_bytes), weights / 2 + 8e9);
  // On the host both ranks read the whole model before keeping their share.
  EXPECT_GT(static_cast<double>(cpu_two->peak_memory_bytes), 2 * weights + weights);
}

}  // namespace
}  // namespace tmx::recipes
