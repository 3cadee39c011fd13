// Hugging Face checkpoint folders: reading single or sharded safetensors into a decoder, and writing fine-tuned
// weights back in the Hugging Face layout and LoRA adapters in PEFT's, so results load with
// AutoModelForCausalLM.from_pretrained / PeftModel.from_pretrained.
//
//   <dir>/config.json
//   <dir>/model.safetensors                                   one file, or
//   <dir>/model-00001-of-0000N.safetensors ... + model.safetensors.index.json   shards and their index
//   <dir>/adapter_model.safetensors + adapter_config.json     PEFT LoRA adapters
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/models/decoder.h"
#include "recipes/models/lora.h"

namespace tmx::checkpoint {

// Every tensor of the checkpoint in `dir`, with Hugging Face names: model.safetensors, or the shards
// model.safetensors.index.json lists (each read once, tensors in index order). NotFound when the folder has
// neither (".bin" checkpoints are not read); InvalidArgument for a malformed index, a shard name that is not a
// plain file name, or a tensor the index places in a shard that lacks it. `progress` (when set) is told the
// bytes read of the weight files' total as they load (SafetensorsLoad).
StatusOr<NamedTensors> ReadHfSafetensors(const std::string& dir, const ReadProgress& progress = {});

// ReadHfSafetensors's NotFound, found without reading anything: `dir` holds neither model.safetensors nor
// its index. OK otherwise.
Status CheckHfWeightsPresent(const std::string& dir);

// Loads the checkpoint in `dir` into `model`, converting names and layouts for `model_type` (a preset's
// hf_model_type, or ReadHfConfig(dir)->model_type) and model.args(). Strict: each model tensor must come from the
// checkpoint, except LoRA adapters, which keep their values; and each checkpoint tensor must have a place (rotary
// caches and a tied lm_head.weight aside). Fails before changing the model, naming the first mismatching tensor by both
// names with the shape found and the shape expected (see HfToTune).
// `progress` as for ReadHfSafetensors.
Status LoadHfCheckpoint(const std::string& dir, const std::string& model_type, models::DecoderImpl& model,
                        const ReadProgress& progress = {});

struct HfSaveOptions {
  // Files hold at most this many bytes of tensor data (a tensor larger than this gets a file of its own); more
  // than one file gets the index. transformers' default, "5GB".
  int64_t max_shard_bytes = 5'000'000'000;
  // Also write config.json (HfConfigJson with the dtype of the first tensor).
  bool write_config = true;
};

// Writes `state` (the decoder's names without LoRA entries, e.g. MergedStateDict(model); any dtype and device) to
// `dir` in the Hugging Face layout for `model_type`, creating `dir`. Weight files a previous save left in `dir`
// under the Hugging Face names are replaced. InvalidArgument when `state` does not fit the args (see TuneToHf) or
// model_type cannot express them (see HfConfigJson); IoError when a file cannot be written.
Status SaveHfCheckpoint(const std::string& dir, const NamedTensors& state, const std::string& model_type,
                        const models::DecoderArgs& args, const HfSaveOptions& options = {});

// Writes `adapters` (AdapterParameters(model)) as PEFT's adapter_model.safetensors and adapter_config.json:
// peft_type LORA, task_type CAUSAL_LM, r and lora_alpha from `lora`, target_modules in Hugging Face names,
// base_model_name_or_path (e.g. the preset's hf_checkpoint or a local folder), rank_pattern / alpha_pattern
// for Phi-3's fused modules (see PeftAdapterTensors), and use_dora with DoRA's magnitudes
// (lora_magnitude_vector). `base` (the model's weights) is needed only for DoRA on some parts of a fused module
// (see TuneAdaptersToPeft).
Status SavePeftAdapter(const std::string& dir, const NamedTensors& adapters, const std::string& model_type,
                       const models::DecoderArgs& args, const models::LoraArgs& lora,
                       const std::string& base_model_name_or_path, const NamedTensors& base = {});

}  // namespace tmx::checkpoint
