// Hugging Face config.json <-> DecoderArgs, for the model types the decoder implements: llama (Llama 2, Code
// Llama, Llama 3.x), mistral, qwen2 (Qwen2, Qwen2.5), qwen3, gemma, gemma2 and phi3 (Phi-3, Phi-4).
#pragma once

#include <string>

#include "base/status.h"
#include "recipes/models/decoder.h"

namespace tmx::checkpoint {

struct HfModelConfig {
  std::string model_type;  // config.json "model_type"
  models::DecoderArgs args;
};

// The model types ReadHfConfig accepts, comma-separated, for messages.
std::string SupportedHfModelTypes();

// Parses config.json text. `source` names it in messages (usually the file's path). InvalidArgument for bad JSON,
// a missing or mistyped field, an unsupported model_type, or an option the decoder does not implement (a RoPE
// scaling other than "llama3", biases on o_proj or the MLP, Qwen2's per-layer windows, Phi-3's LongRoPE or
// partial rotary...), naming the field and the value.
StatusOr<HfModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source);

// Reads <dir>/config.json (NotFound when absent).
StatusOr<HfModelConfig> ReadHfConfig(const std::string& dir);

// The config.json that transformers needs to rebuild `args` as `model_type` (e.g. for a fine-tuned model written
// by SaveHfCheckpoint): architectures, sizes, RoPE and the family's options, and "torch_dtype" = `dtype`
// ("float32", "bfloat16"...). ParseHfConfig of the result gives `args` back (max_seq_len as
// max_position_embeddings). InvalidArgument when args use an option model_type cannot express.
StatusOr<std::string> HfConfigJson(const std::string& model_type, const models::DecoderArgs& args,
                                   const std::string& dtype = "bfloat16");

}  // namespace tmx::checkpoint
