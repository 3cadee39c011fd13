// torchtune's recipe registry as data: its 22 recipes, whether each runs distributed, and the names of their
// configs. Read once from pytorch/torchtune, torchtune/_recipe_registry.py at commit bd2a0fc7c314.
#include "harness/torchtune_recipes.h"

namespace tmx {

namespace {

// The GRPO, fine-tuning and LoRA recipes.
std::vector<TorchtuneRecipe> FinetuningRecipes() {
  return {
      {"dev/grpo_full_finetune_distributed", true,
       {"dev/3B_full_grpo", "dev/qwen3B_sync_grpo"}},
      {"dev/async_grpo_full_finetune_distributed", false,
       {"dev/qwen3B_async_grpo"}},
      {"full_finetune_single_device", false,
       {"llama2/7B_full_low_memory", "llama3/8B_full_single_device", "llama3_1/8B_full_single_device",
        "llama3_2/1B_full_single_device", "llama3_2/3B_full_single_device", "mistral/7B_full_low_memory",
        "phi3/mini_full_low_memory", "phi4/14B_full_low_memory", "qwen2/7B_full_single_device",
        "qwen2/0.5B_full_single_device", "qwen2/1.5B_full_single_device", "qwen2_5/0.5B_full_single_device",
        "qwen2_5/1.5B_full_single_device", "qwen2_5/3B_full_single_device", "qwen2_5/7B_full_single_device",
        "llama3_2_vision/11B_full_single_device", "qwen3/0.6B_full_single_device", "qwen3/1.7B_full_single_device",
        "qwen3/4B_full_single_device", "qwen3/8B_full_single_device"}},
      {"full_finetune_distributed", true,
       {"dev/3B_grpo_sft", "llama2/7B_full", "llama2/13B_full", "llama3/8B_full", "llama3_1/8B_full",
        "llama3_2/1B_full", "llama3_2/3B_full", "llama3/70B_full", "llama3_1/70B_full", "llama3_3/70B_full",
        "llama3_3/70B_full_multinode", "mistral/7B_full", "gemma/2B_full", "gemma/7B_full", "gemma2/2B_full",
        "gemma2/9B_full", "gemma2/27B_full", "phi3/mini_full", "phi4/14B_full", "qwen2/7B_full", "qwen2/0.5B_full",
        "qwen2/1.5B_full", "qwen2_5/0.5B_full", "qwen2_5/1.5B_full", "qwen2_5/3B_full", "qwen2_5/7B_full",
        "llama3_2_vision/11B_full", "llama3_2_vision/90B_full", "llama4/scout_17B_16E_full",
        "llama4/maverick_17B_128E_full", "qwen3/0.6B_full", "qwen3/1.7B_full", "qwen3/4B_full", "qwen3/8B_full"}},
      {"lora_finetune_single_device", false,
       {"llama2/7B_lora_single_device", "llama2/7B_qlora_single_device", "llama3/8B_lora_single_device",
        "llama3_1/8B_lora_single_device", "llama3/8B_qlora_single_device", "llama3_2/1B_lora_single_device",
        "llama3_2/3B_lora_single_device", "llama3/8B_dora_single_device", "llama3/8B_qdora_single_device",
        "llama3_1/8B_qlora_single_device", "llama3_2/1B_qlora_single_device", "llama3_2/3B_qlora_single_device",
        "llama2/13B_qlora_single_device", "mistral/7B_lora_single_device", "mistral/7B_qlora_single_device",
        "gemma/2B_lora_single_device", "gemma/2B_qlora_single_device", "gemma/7B_lora_single_device",
        "gemma/7B_qlora_single_device", "gemma2/2B_lora_single_device", "gemma2/2B_qlora_single_device",
        "gemma2/9B_lora_single_device", "gemma2/9B_qlora_single_device", "gemma2/27B_lora_single_device",
        "gemma2/27B_qlora_single_device", "phi3/mini_lora_single_device", "phi3/mini_qlora_single_device",
        "phi4/14B_lora_single_device", "phi4/14B_qlora_single_device", "qwen2/7B_lora_single_device",
        "qwen2/0.5B_lora_single_device", "qwen2/1.5B_lora_single_device", "qwen2_5/0.5B_lora_single_device",
        "qwen2_5/1.5B_lora_single_device", "qwen2_5/3B_lora_single_device", "qwen2_5/7B_lora_single_device",
        "qwen2_5/14B_lora_single_device", "llama3_2_vision/11B_lora_single_device",
        "llama3_2_vision/11B_qlora_single_device", "qwen3/0.6B_lora_single_device", "qwen3/1.7B_lora_single_device",
        "qwen3/4B_lora_single_device", "qwen3/8B_lora_single_device", "qwen3/14B_lora_single_device"}},
  };
}

// Preference, PPO, generation, evaluation, quantisation, QAT and distillation recipes.
std::vector<TorchtuneRecipe> OtherRecipes() {
  return {
      {"lora_dpo_single_device", false,
       {"llama2/7B_lora_dpo_single_device", "llama3_1/8B_lora_dpo_single_device"}},
      {"lora_dpo_distributed", true,
       {"llama2/7B_lora_dpo", "llama3_1/8B_lora_dpo"}},
      {"full_dpo_distributed", true,
       {"llama3_1/8B_full_dpo"}},
      {"ppo_full_finetune_single_device", false,
       {"mistral/7B_full_ppo_low_memory", "llama2/1B_full_ppo_low_memory_single_device"}},
      {"lora_finetune_distributed", true,
       {"llama2/7B_lora", "llama2/13B_lora", "llama2/70B_lora", "llama2/7B_qlora", "llama2/70B_qlora",
        "llama3/8B_dora", "llama3/70B_lora", "llama3_1/70B_lora", "llama3_3/70B_lora", "llama3_3/70B_qlora",
        "llama3/8B_lora", "llama3_1/8B_lora", "llama3_2/1B_lora", "llama3_2/3B_lora", "llama3_1/405B_qlora",
        "mistral/7B_lora", "gemma/2B_lora", "gemma/7B_lora", "gemma2/2B_lora", "gemma2/9B_lora", "gemma2/27B_lora",
        "phi3/mini_lora", "phi4/14B_lora", "qwen2/7B_lora", "qwen2/0.5B_lora", "qwen2/1.5B_lora",
        "qwen2_5/0.5B_lora", "qwen2_5/1.5B_lora", "qwen2_5/3B_lora", "qwen2_5/7B_lora", "qwen2_5/32B_lora",
        "qwen2_5/72B_lora", "llama3_2_vision/11B_lora", "llama3_2_vision/11B_qlora", "llama3_2_vision/90B_lora",
        "llama3_2_vision/90B_qlora", "llama4/scout_17B_16E_lora", "qwen3/0.6B_lora", "qwen3/1.7B_lora",
        "qwen3/4B_lora", "qwen3/8B_lora", "qwen3/32B_lora"}},
      {"dev/lora_finetune_distributed_multi_dataset", true,
       {"dev/11B_lora_multi_dataset"}},
      {"generate", false,
       {"generation"}},
      {"dev/generate_v2", false,
       {"llama2/generation_v2", "llama3_2_vision/11B_generation_v2"}},
      {"dev/generate_v2_distributed", true,
       {"llama3/70B_generation_distributed", "llama3_1/70B_generation_distributed",
        "llama3_3/70B_generation_distributed", "llama4/scout_17B_16E_generation_distributed"}},
      {"dev/early_exit_finetune_distributed", true,
       {"llama2/7B_full_early_exit"}},
      {"eleuther_eval", false,
       {"eleuther_evaluation", "llama3_2_vision/11B_evaluation", "qwen2/evaluation", "qwen2_5/evaluation",
        "gemma/evaluation", "phi4/evaluation", "phi3/evaluation", "mistral/evaluation", "llama3_2/evaluation",
        "qwen3/evaluation", "llama3_1/evaluation"}},
      {"quantize", false,
       {"quantization"}},
      {"qat_single_device", false,
       {"qwen2_5/3B_qat_single_device", "qwen2_5/1.5B_qat_single_device", "llama2/1B_qat_single_device"}},
      {"qat_distributed", true,
       {"llama2/7B_qat_full", "llama3/8B_qat_full", "llama3_1/8B_qat_full", "llama3_2/3B_qat_full"}},
      {"qat_lora_finetune_distributed", true,
       {"llama3/8B_qat_lora", "llama3_1/8B_qat_lora", "llama3_2/1B_qat_lora", "llama3_2/3B_qat_lora"}},
      {"knowledge_distillation_single_device", false,
       {"qwen2/1.5_to_0.5B_KD_lora_single_device", "llama3_2/8B_to_1B_KD_lora_single_device",
        "qwen3/14B_to_8B_KD_lora_single_device"}},
      {"knowledge_distillation_distributed", true,
       {"qwen2/1.5_to_0.5B_KD_lora_distributed", "llama3_2/8B_to_1B_KD_lora_distributed"}},
  };
}

}  // namespace

const std::vector<TorchtuneRecipe>& TorchtuneRecipes() {
  static const std::vector<TorchtuneRecipe> recipes = [] {
    std::vector<TorchtuneRecipe> all = FinetuningRecipes();
    for (TorchtuneRecipe& r : OtherRecipes()) all.push_back(std::move(r));
    return all;
  }();
  return recipes;
}

}  // namespace tmx
