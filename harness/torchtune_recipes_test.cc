#include "harness/torchtune_recipes.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(TorchtuneRecipesTest, TheRegistryHasItsTwentyTwoRecipes) {
  EXPECT_EQ(TorchtuneRecipes().size(), 22u);
  size_t configs = 0;
  for (const TorchtuneRecipe& r : TorchtuneRecipes()) configs += r.configs.size();
  EXPECT_EQ(configs, 187u);
  ASSERT_NE(FindTorchtuneRecipe("lora_finetune_distributed"), nullptr);
  EXPECT_TRUE(FindTorchtuneRecipe("lora_finetune_distributed")->distributed);
  EXPECT_FALSE(FindTorchtuneRecipe("full_finetune_single_device")->distributed);
  EXPECT_EQ(FindTorchtuneRecipe("finetune"), nullptr);
}

TEST(TorchtuneRecipesTest, TheRecipeComesFromTheCommentThenFromTheRegistry) {
  struct Case {
    std::string path, text, recipe;
  } cases[] = {
      {"x.yaml", "# Config for single device LoRA finetuning in lora_finetune_single_device.py\nmodel: {}\n",
       "lora_finetune_single_device"},
      {"x.yaml", "#   tune run --nnodes 1 --nproc_per_node 2 full_finetune_distributed --config x\n",
       "full_finetune_distributed"},
      {"x.yaml", "#   tune run --nproc_per_node=2 lora_dpo_distributed --config x\n", "lora_dpo_distributed"},
      {"configs/llama3_2/1B_full.yaml", "output_dir: /tmp\n", "full_finetune_distributed"},
      {"qwen2_5/0.5B_full_single_device.yaml", "# no recipe named here\n", "full_finetune_single_device"},
      // A comment after the first key does not count, and a name that is no recipe is ignored.
      {"x.yaml", "a: 1\n# tune run lora_finetune_single_device\n", ""},
      {"x.yaml", "# tune run my_script --config x\n", ""},
      {"x.yaml", "# tune run my_recipe --config x\n", "my_recipe"},  // known to the caller
      // A later `tune run ... --config <this config>` line wins: torchtune's 70B generation configs are "in
      // dev/generate_v2.py", and its KD configs first show how to fine-tune their teacher.
      {"llama3/70B_generation_distributed.yaml",
       "# Config for running the InferenceRecipe in dev/generate_v2.py\n"
       "#    tune run --nproc_per_node 8 dev/generate_v2_distributed --config llama3/70B_generation_distributed\n",
       "dev/generate_v2_distributed"},
      {"configs/llama3_2/8B_to_1B_KD_lora_single_device.yaml",
       "# Config for single device knowledge distillation (KD) in knowledge_distillation_single_device.py\n"
       "#   tune run lora_finetune_single_device --config llama3_1/8B_lora_single_device\n"
       "#   tune run knowledge_distillation_single_device --config llama3_2/8B_to_1B_KD_lora_single_device\n",
       "knowledge_distillation_single_device"},
      {"my.yaml",
       "# in lora_finetune_single_device.py\n#   tune run full_finetune_single_device --config other\n",
       "lora_finetune_single_device"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RecipeHintForFile(c.path, c.text, {"my_recipe"}).recipe, c.recipe) << c.path << ": " << c.text;
  }
  EXPECT_EQ(RecipeHintForFile("configs/llama3_2/1B_full.yaml", "", {}).source,
            "torchtune's registry, which lists llama3_2/1B_full under it");
}

}  // namespace
}  // namespace tmx
