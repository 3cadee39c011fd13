// Checkpointer components: where a run's weights come from and in which layout epochs are saved. torchtune's
// three checkpointers map onto two formats:
//   FullModelHFCheckpointer          Hugging Face: model.safetensors or shards with model.safetensors.index.json
//                                    and config.json, names converted per family (checkpoint/hf_checkpoint.h);
//                                    LoRA adapters as PEFT's adapter_model.safetensors + adapter_config.json
//   FullModelTorchTuneCheckpointer,  torchtune's own names in safetensors (model.safetensors, adapters in
//   tune_matrix FullModelCheckpointer adapter_model.safetensors)
//   FullModelMetaCheckpointer        recognised, not supported (Meta's consolidated.00.pth is a pickle)
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/model_components.h"
#include "recipes/models/decoder.h"

namespace tmx::recipes {

enum class CheckpointFormat { kTorchtune, kHuggingFace };

class CheckpointerComponent final : public ComponentImpl {
 public:
  explicit CheckpointerComponent(CheckpointFormat format) : format_(format) {}
  CheckpointFormat format() const { return format_; }

 private:
  CheckpointFormat format_;
};

void AddCheckpointerComponents(std::vector<ComponentSpec>* out);

// The format of the config's checkpointer (`key`: "checkpointer", or a teacher's "teacher_checkpointer");
// torchtune's names when the config has none.
CheckpointFormat CheckpointFormatOf(const Config& config, const Registry& registry,
                                    const std::string& key = "checkpointer");

// What of the weights `config` starts from this machine lacks, found without reading them: the checkpoint
// folder, a file checkpointer.checkpoint_files lists (torchtune format) or both model.safetensors and its
// index (Hugging Face format); each with the fix. None when it starts from the seed (checkpoint_dir null).
// `key` and `model_key`: the checkpointer and the model it holds ("teacher_checkpointer" and "teacher_model" for
// a distillation teacher).
std::vector<Problem> MissingCheckpointFiles(const Config& config, const Registry& registry,
                                            const std::string& key = "checkpointer",
                                            const std::string& model_key = "model");

// Loads checkpointer.checkpoint_dir into `model` in the checkpointer's format (strict: a tensor that does not
// match is named), or leaves the seed's weights when it is null. A checkpoint_dir this machine lacks is NotFound
// naming it and the fix, unless `allow_stand_ins`: then the seed's weights stand in and `stand_ins` says so.
// LoRA adapters are never expected in the checkpoint. `progress` (when set) is told the bytes read of the
// weight files' total as they load. `key`: the checkpointer's ("teacher_checkpointer" for a teacher).
Status LoadStartingWeights(const Config& config, const Registry& registry, const ModelChoice& choice,
                           models::DecoderImpl& model, bool allow_stand_ins, std::vector<std::string>* stand_ins,
                           const checkpoint::ReadProgress& progress = {}, const std::string& key = "checkpointer");

// Writes an epoch's weights into `dir` in `format`: the whole model for full fine-tuning; for LoRA the adapters,
// and the model with the adapters merged unless `adapter_only`.
Status SaveEpochWeights(const std::string& dir, CheckpointFormat format, const ModelChoice& choice,
                        const models::DecoderImpl& model, bool adapter_only);

// Loads the whole model an epoch of full fine-tuning saved in `dir` (resuming).
Status LoadEpochWeights(const std::string& dir, CheckpointFormat format, const ModelChoice& choice,
                        models::DecoderImpl& model);

}  // namespace tmx::recipes
