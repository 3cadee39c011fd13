// Fully sharded transformer layers (FSDP's FULL_SHARD, ZeRO stage 3) for the distributed recipes: between
// uses, each rank keeps only its 1/N shard of every transformer layer's weights. A layer's weights are
// all-gathered just before its forward and freed right after; in backward they are gathered again, the
// layer's forward is recomputed (as activation checkpointing does), and the weight gradients are
// reduce-scattered straight into the ranks' shards, which the optimizer steps. So a rank holds whole only the
// layer it is computing (plus the weights outside the layers: embeddings, final norm, output), and 1/N of
// every layer's weights, gradients and optimizer state.
//
// The weights outside the layers stay whole on every rank and go through DataParallel (data_parallel.h), and so
// does a QLoRA layer's NF4 base (models::LinearImpl holds it outside its parameters): each rank keeps the whole
// 4-bit base, where torchtune's FSDP shards it.
// Recomputing replays the generator states (models::RngStates: the CPU's and the layer's device's own), so
// dropout masks repeat.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "recipes/distributed/optimizer_state.h"
#include "recipes/distributed/process_group.h"
#include "recipes/models/decoder.h"

namespace tmx::recipes {

class ShardedLayers {
 public:
  // Shards every transformer layer of `model` over `group` (which must outlive this object) and installs
  // itself as the model's layer runner. Every rank must pass the same architecture with the same weights.
  // REQUIRES: each layer's parameters share one dtype and device.
  ShardedLayers(ProcessGroup* group, models::Decoder model);
  ~ShardedLayers();

  // The tensors the optimizer steps: each layer's shard of its trained weights (1-D, requires grad).
  const std::vector<at::Tensor>& optimizer_tensors() const { return trained_shards_; }
  // Whether `param` is a weight of one of the layers (and so not whole between uses).
  bool Owns(const at::Tensor& param) const;
  // Clears the shards' gradients before a step's backward passes.
  void ZeroGrad();
  // Sum of squares of the shards' gradients on this rank (the caller sums it over the ranks).
  double GradSquaredSum() const;
  // Scales the shards' gradients.
  void ScaleGrads(double factor);

  // Makes every layer's weights whole on every rank (all ranks must call it), for saving a checkpoint, and
  // ReleaseAll() frees them again.
  void GatherAll();
  void ReleaseAll();

  // Each layer's trained weights as a sharded group, for converting optimizer state (optimizer_state.h).
  std::vector<ShardedFlat> flats() const;

  // Elements of the trained weights this rank keeps, and of all layer weights.
  int64_t trained_elements() const;

  struct Unit;  // one layer: its weights, their flat shard, gather and release

 private:
  ProcessGroup* group_;
  models::Decoder model_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<at::Tensor> trained_shards_;
  std::vector<const c10::TensorImpl*> owned_;
};

}  // namespace tmx::recipes
