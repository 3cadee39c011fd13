#include "recipes/models/llama.h"

#include <c10/util/Exception.h>

#include <utility>

#include "recipes/models/presets.h"

namespace tmx::models {
namespace {

LlamaArgs PresetArgs(const char* builder) {
  const ModelPreset* preset = FindModelPreset(builder);
  TORCH_INTERNAL_ASSERT(preset != nullptr, "the preset table lost ", builder);
  return preset->args;
}

}  // namespace

LlamaArgs Llama3_2_1BArgs() { return PresetArgs("llama3_2_1b"); }
LlamaArgs Llama3_2_3BArgs() { return PresetArgs("llama3_2_3b"); }
LlamaArgs Llama3_1_8BArgs() { return PresetArgs("llama3_1_8b"); }
LlamaArgs LlamaTinyArgs() { return PresetArgs("tiny_llama3_2"); }

Status ValidateLlamaArgs(const LlamaArgs& args) { return ValidateDecoderArgs(args); }

StatusOr<Llama> MakeLlama(const LlamaArgs& args, std::optional<LoraArgs> lora, c10::TensorOptions options) {
  return MakeDecoder(args, std::move(lora), options);
}

}  // namespace tmx::models
