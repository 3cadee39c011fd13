// Optimizer components: each registered with how to build it from the config's optimizer.* keys and how many
// state tensors it keeps per trained parameter (memory estimates read that instead of knowing optimizers).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"

namespace tmx::recipes {

using OptimizerPtr = std::unique_ptr<torch::optim::Optimizer>;

class OptimizerComponent final : public ComponentImpl {
 public:
  // `config` has the schema defaults applied; its optimizer.* keys are the component's parameters.
  using Builder = std::function<StatusOr<OptimizerPtr>(const Config& config, const std::vector<at::Tensor>& params)>;
  // Bytes of optimizer state per trained parameter with this config, given the weights' bytes per element
  // (AdamW: two moments in the weights' dtype; AdamW8bit: two uint8 codes and an absmax per block of 256).
  using StateBytes = std::function<double(const Config& config, int64_t weight_bytes)>;
  // `shardable`: its per-parameter state can be cut into the flat shards of sharded data parallelism and
  // gathered back (element by element); false for state quantised in blocks of each parameter.
  OptimizerComponent(Builder build, StateBytes states, bool shardable = true)
      : build_(std::move(build)), states_(std::move(states)), shardable_(shardable) {}

  StatusOr<OptimizerPtr> Build(const Config& config, const std::vector<at::Tensor>& params) const {
    return build_(config, params);
  }
  double StateBytesPerParameter(const Config& config, int64_t weight_bytes) const {
    return states_(config, weight_bytes);
  }
  bool shardable() const { return shardable_; }

 private:
  Builder build_;
  StateBytes states_;
  bool shardable_;
};

// AdamW and SGD (torch.optim's paths as aliases), and bitsandbytes' AdamW8bit, PagedAdamW8bit and PagedAdamW
// (recipes/adamw8bit.h).
void AddOptimizerComponents(std::vector<ComponentSpec>* out);

// The optimizer component the config's `optimizer` names. InvalidArgument naming its position when it is
// not one that can be built here.
StatusOr<const OptimizerComponent*> OptimizerOf(const Config& config, const Registry& registry);

}  // namespace tmx::recipes
