// The schema shared by the training recipes: what a recipe trains (its kind), the top-level keys with their
// defaults and constraints, and the checks spanning several keys. New recipes (preference, distillation,
// distributed) start from these fields and add their own.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

#include "harness/torch_dtypes.h"
#include "harness/registry.h"

namespace tmx::recipes {

// What a recipe trains: every weight, or LoRA adapters over a frozen base.
enum class TrainKind { kFull, kLora };

// What a recipe trains on: samples of a dataset (SFT), or preference pairs (chosen and rejected responses to a
// prompt, the DPO recipes': a preference_dataset and a preference_loss, two rows a pair, no validation).
// Or prompts (PPO: a text_completion_dataset's prompts, which the policy answers; the policy is `policy_model`,
// the run `num_steps` prompts long).
enum class TrainingData { kSamples, kPreferencePairs, kPrompts };

// Keys every recipe here shares, defined once: output_dir (required; never a system or the home folder), seed
// (null: a random one, logged), log_level, device (default cuda as torchtune's; a device that cannot train
// is refused, with the fix) and dtype (bf16 by default; bf16 only where its matmul probe passed).
FieldSpec OutputDirField(std::string doc);
FieldSpec SeedField();
FieldSpec LogLevelField();
FieldSpec DeviceField();
FieldSpec DtypeField();
// A `dtype` value's torch dtype and back: DtypeNamed and DtypeConfigName of the dtype table
// (harness/torch_dtypes.h), whose names are DtypeField's choices.

// The recipe keys of a single-device training recipe of `kind` on `data`, torchtune's names and defaults.
std::vector<FieldSpec> TrainingFields(TrainKind kind, TrainingData data = TrainingData::kSamples);

// The keys torchtune's distributed recipes add (sharding, offloading, tensor parallelism, and validation on
// samples), with their defaults; implemented where they mean something here, reported by DistributedChecks where
// not.
std::vector<FieldSpec> DistributedFields(TrainingData data = TrainingData::kSamples);

// What a distributed run needs: a collective backend for the device type that this build has, and no
// feature that is declared but not implemented (tensor parallelism, hybrid sharding), and validation with
// its data, each named with its fix.
std::vector<Problem> DistributedChecks(const Config& config, const Registry& registry, const DeviceInfo* device);

// The keys torchtune's full_finetune_distributed and qat_distributed read beside enable_activation_checkpointing:
// ac_mode (null, full or selective) and ac_option (selective: every ac_option-th layer is recomputed; 0: every
// layer), which train_setup.h's settings turn into the decoder's checkpointed layers; and memory_efficient_fsdp_wrap,
// torchtune's older switch for sharding the embeddings and output as units of their own.
std::vector<FieldSpec> SelectiveCheckpointingFields();
// ac_mode beside enable_activation_checkpointing=True (torchtune's recipe then applies neither), and
// ac_mode=selective without an ac_option, each named with its fix.
std::vector<Problem> SelectiveCheckpointingChecks(const Config& config, const Registry& registry,
                                                  const DeviceInfo* device);

// Checks spanning several keys, and features that are declared for torchtune compatibility but not
// implemented (compile, optimizer_in_bwd, QLoRA...), each named with its fix.
std::vector<Problem> TrainingChecks(const Config& config, const Registry& registry, const DeviceInfo* device);

}  // namespace tmx::recipes
