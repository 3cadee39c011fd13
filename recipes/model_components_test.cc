// Model components: each preset's published parameter count equals a meta-device build of it, and models are
// chosen through the registry entry only.
#include "recipes/model_components.h"

#include <gtest/gtest.h>

#include "recipes/builtin.h"

namespace tmx::recipes {
namespace {

TEST(ModelComponentsTest, EveryModelComponentCountsItsPublishedParameters) {
  int models = 0;
  for (const ComponentSpec& c : BuiltinRegistry().components()) {
    const auto* model = dynamic_cast<const ModelComponent*>(c.impl.get());
    if (c.kind != "model" || model == nullptr) continue;
    ++models;
    ModelChoice base;
    base.args = model->args();
    int64_t total = 0, trainable = 0;
    CountModelParameters(base, &total, &trainable);
    EXPECT_EQ(total, c.parameter_count) << c.name;
    EXPECT_EQ(trainable, total) << c.name;
  }
  EXPECT_EQ(models, 8);  // 4 presets, full and lora_
}

Config Parse(const std::string& yaml) {
  StatusOr<Config> c = Config::FromString(yaml, "c.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(ModelComponentsTest, LoraArgumentsComeFromTheConfig) {
  Config c = Parse(
      "model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n  lora_attn_modules: [q_proj, v_proj]\n"
      "  apply_lora_to_mlp: True\n  apply_lora_to_output: False\n  lora_rank: 4\n  lora_alpha: 8\n"
      "  lora_dropout: 0.0\n");
  StatusOr<ModelChoice> choice = ModelFromConfig(c, BuiltinRegistry());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->component, "tune_matrix.models.llama3_2.lora_llama3_2_1b");
  ASSERT_TRUE(choice->lora.has_value());
  EXPECT_EQ(choice->lora->rank, 4);
  EXPECT_EQ(choice->lora->attn_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(choice->args.num_layers, 16);
}

TEST(ModelComponentsTest, ModelsThatCannotBeBuiltAreNamed) {
  Config c = Parse("model:\n  _component_: torchtune.models.gemma.gemma_2b\n");
  EXPECT_EQ(ModelFromConfig(c, BuiltinRegistry()).status().message(),
            "c.yaml:2:16: model 'torchtune.models.gemma.gemma_2b' cannot be built here (see `tune validate` for the "
            "models that can)");
  Config missing = Parse("model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n");
  EXPECT_NE(ModelFromConfig(missing, BuiltinRegistry()).status().message().find("model.lora_attn_modules' is missing"),
            std::string::npos);
}

}  // namespace
}  // namespace tmx::recipes
