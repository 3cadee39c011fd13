// The training loop of a Llama 3.2 Vision model (models/vision_model.h), which RunTraining hands a run to when
// the config's model is one (VisionComponentOf). What it runs: full_finetune_single_device and
// lora_finetune_single_device's plain fine-tuning, in one process, on the config's SFT data (text samples; the
// fusion layers are skipped for batches without images, as torchtune's), with the config's optimizer, learning
// rate schedule, gradient accumulation and clipping; starting from the seed or a Hugging Face checkpoint
// (MllamaForConditionalGeneration's, checkpoint/hf_vision.h); saving each epoch as one model.safetensors in
// Hugging Face's names (LoRA adapters merged). summary.json and the step lines are the text recipes'.
//
// What it does not build is refused before anything is built, each naming the setting and the fix: ranks
// (the _distributed recipes), objectives other than plain fine-tuning, activation offloading, optimizer_in_bwd,
// resuming, validation data, saving adapters alone, the operation profile, and Meta's or torchtune's checkpoint
// formats. Activation checkpointing recomputes each encoder and decoder layer in backward.
#pragma once

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
#include "recipes/trainer.h"
#include "recipes/vision_components.h"

namespace tmx::recipes {

// The vision model `choice` names, built with `options` (dtype, device), its weights from checkpointer.checkpoint_dir
// (Hugging Face's Mllama names; LoRA adapters keep their initialisation) or the seed's where the config names no
// folder, or, with context.allow_stand_ins, where the folder it names is absent (said in `stand_ins`). NotFound
// naming checkpointer.checkpoint_dir and the fix otherwise. (The vision generation recipe loads through it too.)
StatusOr<models::VisionModel> LoadVisionModel(const Config& config, const RunContext& context,
                                              const VisionModelChoice& choice, c10::TensorOptions options,
                                              std::vector<std::string>* stand_ins);

// Runs `recipe` on `config`, whose model is a vision model. REQUIRES: context.registry set.
Status RunVisionTraining(const TrainingRecipe& recipe, const Config& config, const RunContext& context);

// The problems that stop `recipe` from running `config`'s vision model here (see above), each naming the key,
// what is not built and the fix; empty when it can run.
std::vector<Problem> VisionTrainingRefusals(const TrainingRecipe& recipe, const Config& config);

}  // namespace tmx::recipes
