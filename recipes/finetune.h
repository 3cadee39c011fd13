// The fine-tuning recipes: full_finetune_single_device, lora_finetune_single_device, full_finetune_distributed,
// lora_finetune_distributed, knowledge distillation (knowledge_distillation_single_device / _distributed),
// direct preference optimization (lora_dpo_single_device, lora_dpo_distributed, full_dpo_distributed) and
// quantisation-aware training (qat_single_device, qat_distributed, qat_lora_finetune_distributed).
//
// One training loop serves them all (TrainKind tells them apart: what trains and what is saved); the setup is
// train_setup.h's steps, spread over devices by parallelism.h. Every logged step goes to stdout and to the metrics file; at the end, or on
// failure, the run writes <output_dir>/summary.json (harness/run_summary.h), which tune-matrix reads.
// `config` must have its schema defaults applied (LoadResolvedConfig with the recipe does it).
#pragma once

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {

// What the training loop optimizes.
enum class TrainObjective {
  // Next-token cross-entropy (the *_finetune_* recipes).
  kNextToken,
  // Knowledge distillation (the knowledge_distillation_* recipes): a frozen teacher (teacher_model, loaded from
  // teacher_checkpointer) beside the LoRA student, whose loss is (1 - kd_ratio) x cross-entropy + kd_ratio x the
  // forward KL to the teacher (recipes/loss.h), as torchtune's recipes compute it.
  kDistill,
  // Direct preference optimization (the *_dpo_* recipes): batches of chosen/rejected pairs from a preference
  // dataset; the loss (torchtune's DPOLoss, `loss.beta`, `loss.label_smoothing`) compares the policy's summed
  // log-probabilities of each response with a frozen reference's. The reference is the LoRA model with its
  // adapters off (models/adapters_off.h), or for full DPO a second model (`model` again, loaded from
  // ref_checkpointer; the policy's own starting weights when its checkpoint_dir is null), whole on each rank.
  // The loss averages over the step's pairs (over every rank's); logged steps add torchtune's rewards/chosen,
  // rewards/rejected, rewards/accuracies, rewards/margins, log_probs/chosen and log_probs/rejected, each the mean
  // over the step's pairs (torchtune's single-device recipe logs its last micro-batch's; with one micro-batch a
  // step, as in every cell, the same).
  kDpo,
};

// `distributed`: the *_finetune_distributed recipes. The rank, the world size and the rendezvous come from the
// environment (DistEnv); without a launcher the run is one rank. Each rank trains batch_size samples of every
// global batch; gradients are summed over the ranks (recipes/distributed/data_parallel.h), sharded unless
// data_parallel_shard_dim=1. Rank 0 alone prints progress and writes metrics, checkpoints and summary.json
// (whose peak memory is the largest rank's and tokens those of every rank).
// With a quantizer in `config` (the qat_* recipes' schemas have one) the model's linears are fake-quantised
// (train_setup.h SetupModel) and the run is named for its QAT recipe.
Status RunFinetune(const Config& config, const RunContext& context, TrainKind kind, bool distributed = false,
                   TrainObjective objective = TrainObjective::kNextToken);

// The recipe's registry entry: name, doc, its configs (configs/MANIFEST), schema and checks, how it runs, how a
// matrix cell is estimated and budgeted. builtin.cc registers the four fine-tuning recipes.
RecipeSpec FinetuneRecipe(TrainKind kind, RecipeLaunch launch);
// knowledge_distillation_single_device or _distributed: FinetuneRecipe's LoRA recipe plus the teacher's keys
// (teacher_model, teacher_checkpointer, kd_loss, kd_ratio), its vocabulary check, missing files and estimate.
RecipeSpec KnowledgeDistillationRecipe(RecipeLaunch launch);
// torchtune's quantisation-aware training recipes: qat_single_device (full, one device), qat_distributed
// (full, ranks) and qat_lora_finetune_distributed (LoRA, ranks): FinetuneRecipe plus the quantizer
// (Int8DynActInt4WeightQATQuantizer, groupsize) and fake_quant_after_n_steps, checked against the model's widths
// (FakeQuantizationProblems) and estimated with the fake-quantised copies (EstimateFakeQuantizationBytes).
RecipeSpec QatRecipe(TrainKind kind, RecipeLaunch launch);
// lora_dpo_single_device, lora_dpo_distributed (kind kLora) or full_dpo_distributed (kFull, ranks): FinetuneRecipe's
// recipe with a preference dataset, the DPO loss component, ref_checkpointer for full DPO (required), no
// validation keys, and an estimate with the pairs' two rows each and the reference's forward (and weights).
RecipeSpec DpoRecipe(TrainKind kind, RecipeLaunch launch);

}  // namespace tmx::recipes
