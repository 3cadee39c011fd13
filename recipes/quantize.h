// The quantize recipe (torchtune's quantize.py): a model's weights post-training quantised to int8 dynamic
// activations and int4 weights (8da4w, torchao's Int8DynActInt4WeightQuantizer), written as one checkpoint that the
// generation recipes load with the same quantizer.
//
// Every linear whose inputs the quantizer's groupsize divides keeps its weight as int4 codes (int8 storage) and a
// float32 scale per group ("<linear>.weight" and "<linear>.scales", models/fake_quant.h); embeddings, norms and the
// linears the group size does not fit keep the config's dtype. The file is
// <output_dir>/<first checkpoint file's stem>-8da4w.safetensors in torchtune's parameter names (torchtune writes a
// .pt of torchao tensor subclasses, which LibTorch cannot write), with metadata quantization=8da4w and groupsize.
#pragma once

#include <string>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"

namespace tmx::recipes {

// Where the quantize recipe writes its checkpoint for `config`.
std::string QuantizedCheckpointPath(const Config& config);

// The recipe's registry entry: schema (model, checkpointer, quantizer, dtype, device, seed, output_dir), estimate
// (the model in its dtype beside its quantised copy) and run.
RecipeSpec QuantizeRecipe();

}  // namespace tmx::recipes
