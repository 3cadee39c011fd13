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

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
#include "harness/run_summary.h"

namespace tmx::recipes {

// The error of int4 per-group quantisation (models/fake_quant.h QuantizeInt4PerGroup: scale = max |w| / 7.5 per
// group, codes rounded to the nearest step in [-8, 7]), measured per kind of linear (its last name: q_proj, w1,
// output) against the original weights, with the scheme's bounds (RunSummary's QuantizedKind): no element further
// than half a step from its original (plus the rounding of the scale and of the dequantised value into `dtype`), and a relative
// RMS within 1.5 times what uniform rounding to the step gives. A run whose kinds pass both is right; a broken
// quantisation kernel (codes or scales off by a few percent) passes half a step at once.
class QuantizationErrors {
 public:
  QuantizationErrors(int64_t group_size, const std::string& dtype);
  // One linear: its original weight [out, in] and the codes and scales it was quantised to.
  void Add(const std::string& name, const torch::Tensor& original, const torch::Tensor& codes,
           const torch::Tensor& scales);
  std::vector<QuantizedKind> Kinds() const;

 private:
  struct Sums {
    int64_t tensors = 0;
    double max_error = 0, difference = 0, original = 0, uniform = 0;
  };
  int64_t group_size_;
  std::string dtype_;
  c10::ScalarType scalar_type_;
  std::map<std::string, Sums> sums_;
};

// Where the quantize recipe writes its checkpoint for `config`.
std::string QuantizedCheckpointPath(const Config& config);

// The recipe's registry entry: schema (model, checkpointer, quantizer, dtype, device, seed, output_dir), estimate
// (the model in its dtype beside its quantised copy) and run.
RecipeSpec QuantizeRecipe();

}  // namespace tmx::recipes
