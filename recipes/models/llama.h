// The Llama names callers used before the decoder became family-neutral (decoder.h) and the presets a table
// (presets.h). LlamaArgs is DecoderArgs and Llama is Decoder; the functions below read the preset table.
#pragma once

#include <optional>

#include "base/status.h"
#include "recipes/models/decoder.h"

namespace tmx::models {

using LlamaArgs = DecoderArgs;
using LlamaImpl = DecoderImpl;
using Llama = Decoder;

// Published configurations (max_seq_len 131072, rope_base 500000): the presets llama3_2_1b, llama3_2_3b and
// llama3_1_8b.
LlamaArgs Llama3_2_1BArgs();  // 1,235,814,400 parameters, tied embeddings, rope scaling factor 32
LlamaArgs Llama3_2_3BArgs();  // 3,212,749,824 parameters, tied embeddings, rope scaling factor 32
LlamaArgs Llama3_1_8BArgs();  // 8,030,261,248 parameters, untied, rope scaling factor 8
// The preset tiny_llama3_2: a model that trains in seconds on a CPU: vocab 512 (room for the 259-token byte
// tokenizer), 2 layers, dim 64, 4 heads, 2 kv heads, MLP 256, max_seq_len 512, tied embeddings, rope scaling
// on (all three scaling regimes occur at head_dim 16).
LlamaArgs LlamaTinyArgs();

// ValidateDecoderArgs.
Status ValidateLlamaArgs(const LlamaArgs& args);

// MakeDecoder.
StatusOr<Llama> MakeLlama(const LlamaArgs& args, std::optional<LoraArgs> lora = std::nullopt,
                          c10::TensorOptions options = {});

}  // namespace tmx::models
