// The single-device fine-tuning recipes: full_finetune_single_device and lora_finetune_single_device.
//
// One training loop serves both (TrainKind tells them apart: what trains and what is saved); the setup is
// train_setup.h's steps. Every logged step goes to stdout and to the metrics file; at the end, or on
// failure, the run writes <output_dir>/summary.json (harness/run_summary.h), which tune-matrix reads.
// `config` must have its schema defaults applied (LoadResolvedConfig with the recipe does it).
#pragma once

#include "harness/config.h"
#include "harness/registry.h"
#include "harness/status.h"
#include "recipes/train_schema.h"

namespace tmx::recipes {

Status RunFinetune(const Config& config, const RunContext& context, TrainKind kind);

inline Status RunFullFinetune(const Config& config, const RunContext& context) {
  return RunFinetune(config, context, TrainKind::kFull);
}
inline Status RunLoraFinetune(const Config& config, const RunContext& context) {
  return RunFinetune(config, context, TrainKind::kLora);
}

}  // namespace tmx::recipes
