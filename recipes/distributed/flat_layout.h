// Tensors laid end to end in one flat buffer, padded to a multiple of the ranks so that rank r owns elements
// [r * shard_size, (r + 1) * shard_size): the one layout behind data parallelism's flat buffers, the fully
// sharded layers' weights and gradients, and the conversion of sharded optimizer state to and from the
// per-parameter format. Every offset computation lives here.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace tmx::recipes {

class FlatLayout {
 public:
  FlatLayout() = default;
  // `params` in order; `ranks` >= 1 sets the padding and the shard size.
  FlatLayout(const std::vector<at::Tensor>& params, int64_t ranks);

  const std::vector<at::Tensor>& params() const { return params_; }
  const std::vector<int64_t>& shape(size_t i) const { return shapes_[i]; }
  size_t size() const { return params_.size(); }
  bool empty() const { return params_.empty(); }
  int64_t numel() const { return numel_; }            // elements of all the tensors
  int64_t padded() const { return padded_; }          // shard_size * ranks
  int64_t shard_size() const { return shard_size_; }  // elements each rank owns

  // Tensor i's part of `flat` (a [padded] buffer), as a view shaped like tensor i.
  at::Tensor View(const at::Tensor& flat, size_t i) const;
  // Rank `rank`'s shard of `flat`, as a view.
  at::Tensor Shard(const at::Tensor& flat, int64_t rank) const;
  // A new [padded] buffer with `tensors[i]` (shaped like tensor i; an undefined one leaves zeros) copied into
  // its part; `options` sets dtype and device.
  at::Tensor Pack(const std::vector<at::Tensor>& tensors, const at::TensorOptions& options) const;

 private:
  std::vector<at::Tensor> params_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> offsets_;
  int64_t numel_ = 0, padded_ = 0, shard_size_ = 0;
};

}  // namespace tmx::recipes
