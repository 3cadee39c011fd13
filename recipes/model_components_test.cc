// Model components: each preset's published parameter count equals a meta-device build of it, and models are
// chosen through the registry entry only.
#include "recipes/model_components.h"

#include <gtest/gtest.h>

#include "recipes/builtin.h"
#include "recipes/models/presets.h"

namespace tmx::recipes {
namespace {

TEST(ModelComponentsTest, EveryPresetIsAComponentUnderTorchtunesNames) {
  // models/presets_test.cc checks each preset's published count on the meta device; here, that the registry
  // carries every preset, under torchtune's builder names, with that count.
  size_t expected = 0;
  for (const models::ModelPreset& p : models::ModelPresets()) {
    expected += p.lora_builder.empty() ? 1 : 2;
    for (const std::string& builder : {p.builder, p.lora_builder}) {
      if (builder.empty()) continue;
      std::string name = p.tiny ? "tune_matrix.models." + builder : "torchtune.models." + p.family + "." + builder;
      const ComponentSpec* c = BuiltinRegistry().FindComponent(name);
      ASSERT_NE(c, nullptr) << name;
      const auto* model = dynamic_cast<const ModelComponent*>(c->impl.get());
      ASSERT_NE(model, nullptr) << name;
      EXPECT_EQ(&model->preset(), &p) << name;
      EXPECT_EQ(model->lora(), builder == p.lora_builder) << name;
      EXPECT_EQ(c->parameter_count, p.tiny ? 0 : p.published_params) << name;
    }
  }
  size_t models = 0;
  for (const ComponentSpec& c : BuiltinRegistry().components()) models += c.impl && c.kind == "model";
  EXPECT_EQ(models, expected);
  EXPECT_GT(expected, 100u);
  const ComponentSpec* qlora = BuiltinRegistry().FindComponent("torchtune.models.llama3_1.qlora_llama3_1_8b");
  ASSERT_NE(qlora, nullptr);
  EXPECT_NE(qlora->unsupported_reason.find("QLoRA"), std::string::npos);
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
  EXPECT_FALSE(choice->lora->use_dora);  // not written: LoRA

  Config dora = Parse(
      "model:\n  _component_: torchtune.models.llama3.lora_llama3_8b\n  lora_attn_modules: [q_proj, v_proj]\n"
      "  apply_lora_to_mlp: False\n  apply_lora_to_output: False\n  lora_rank: 8\n  lora_alpha: 16\n"
      "  lora_dropout: 0.0\n  use_dora: True\n");
  StatusOr<ModelChoice> dora_choice = ModelFromConfig(dora, BuiltinRegistry());
  ASSERT_TRUE(dora_choice.ok()) << dora_choice.status().ToString();
  ASSERT_TRUE(dora_choice->lora.has_value());
  EXPECT_TRUE(dora_choice->lora->use_dora);
}

TEST(ModelComponentsTest, ModelsThatCannotBeBuiltAreNamed) {
  Config c = Parse("model:\n  _component_: torchtune.models.gemma.qlora_gemma_2b\n");
  EXPECT_EQ(ModelFromConfig(c, BuiltinRegistry()).status().message(),
            "c.yaml:2:16: model 'torchtune.models.gemma.qlora_gemma_2b' cannot be built here (see `tune validate` for "
            "the models that can)");
  Config missing = Parse("model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n");
  EXPECT_NE(ModelFromConfig(missing, BuiltinRegistry()).status().message().find("model.lora_attn_modules' is missing"),
            std::string::npos);
}

}  // namespace
}  // namespace tmx::recipes
