#include "recipes/vision_components.h"

#include <gtest/gtest.h>

#include "recipes/builtin.h"

namespace tmx::recipes {
namespace {

// `model_yaml` under model:, with the schema's defaults of lora_finetune_single_device applied.
Config Resolved(const std::string& model_yaml) {
  StatusOr<Config> c = Config::FromString("model:\n" + model_yaml, "c.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  const RecipeSpec* recipe = BuiltinRegistry().FindRecipe("lora_finetune_single_device");
  EXPECT_TRUE(ApplySchemaDefaults(&*c, *recipe, BuiltinRegistry()).ok());
  return *c;
}

TEST(VisionComponentsTest, EveryBuilderIsAComponentUnderTorchtunesNames) {
  for (const char* name : {"torchtune.models.llama3_2_vision.llama3_2_vision_11b",
                           "torchtune.models.llama3_2_vision.lora_llama3_2_vision_90b",
                           "torchtune.models.llama3_2_vision.qlora_llama3_2_vision_11b",
                           "tune_matrix.models.lora_tiny_llama3_2_vision"}) {
    const ComponentSpec* c = BuiltinRegistry().FindComponent(name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->kind, "model");
    EXPECT_NE(dynamic_cast<const VisionModelComponent*>(c->impl.get()), nullptr) << name;
  }
  EXPECT_EQ(BuiltinRegistry().FindComponent("torchtune.models.llama3_2_vision.llama3_2_vision_11b")->parameter_count,
            10670220835);
}

TEST(VisionComponentsTest, TheConfigsArgumentsChooseWhatTrains) {
  Config c = Resolved(
      "  _component_: torchtune.models.llama3_2_vision.qlora_llama3_2_vision_11b\n"
      "  lora_attn_modules: [q_proj, v_proj]\n  image_size: 448\n  decoder_trainable: lora\n");
  StatusOr<VisionModelChoice> choice = VisionModelFromConfig(c, BuiltinRegistry());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->args.encoder.tile_size, 448);
  ASSERT_TRUE(choice->lora.has_value());
  EXPECT_TRUE(choice->lora->quantize_base);  // the qlora_ builder's default
  EXPECT_EQ(choice->lora->rank, 8);
  EXPECT_EQ(choice->trainable.decoder, models::Trainable::kLora);
  EXPECT_EQ(choice->trainable.encoder, models::Trainable::kLora);
  EXPECT_EQ(choice->trainable.fusion, models::Trainable::kLora);
}

TEST(VisionComponentsTest, AnImageSizeThePatchesDoNotDivideIsNamed) {
  Config c = Resolved("  _component_: tune_matrix.models.tiny_llama3_2_vision\n  image_size: 30\n");
  StatusOr<VisionModelChoice> choice = VisionModelFromConfig(c, BuiltinRegistry());
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(choice.status().message().find("model: vision encoder patch_size: must divide tile_size (30)"),
            std::string::npos)
      << choice.status().message();
  Config text = Resolved("  _component_: torchtune.models.llama3_2.llama3_2_1b\n");
  EXPECT_EQ(VisionComponentOf(text, BuiltinRegistry()), nullptr);
}

}  // namespace
}  // namespace tmx::recipes
