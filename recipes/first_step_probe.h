// What a training run's first step computed, for the numeric check (harness/numeric_probe.h): the trainer
// records into it around the first step when TUNE_MATRIX_NUMERIC_PROBE=1, and writes
// <output_dir>/numeric_probe.bin. Every tensor is read back as float32 at ProbeSampleIndices' elements.
#pragma once

#include <torch/torch.h>

#include <string>

#include "base/status.h"
#include "harness/numeric_probe.h"
#include "recipes/train_state.h"

namespace tmx::recipes {

class FirstStepProbe {
 public:
  // `quantized`: the model's base weights are quantised (NumericProbe::quantized).
  FirstStepProbe(std::string dtype, bool quantized) {
    probe_.dtype = std::move(dtype);
    probe_.quantized = quantized;
  }

  // The first micro-batch's token ids and the logits of the initial weights for them.
  void AddBatch(const torch::Tensor& tokens, const torch::Tensor& logits);
  // Each trained parameter ("weight" before the step, "stepped" after it), or its gradient ("gradient"); a
  // parameter without a gradient is left out of "gradient".
  void AddParameters(const NamedParameters& trained, const std::string& kind);
  Status Write(const std::string& output_dir) const;

  // `t`'s elements at ProbeSampleIndices, as float32 on the host.
  static std::vector<float> Sample(const torch::Tensor& t);

 private:
  NumericProbe probe_;
};

}  // namespace tmx::recipes
