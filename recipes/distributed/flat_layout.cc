#include "recipes/distributed/flat_layout.h"

#include <torch/torch.h>

namespace tmx::recipes {

FlatLayout::FlatLayout(const std::vector<at::Tensor>& params, int64_t ranks) : params_(params) {
  TORCH_CHECK(ranks >= 1, "FlatLayout needs at least one rank");
  for (const at::Tensor& p : params_) {
    shapes_.push_back(p.sizes().vec());
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  shard_size_ = (numel_ + ranks - 1) / ranks;
  padded_ = shard_size_ * ranks;
}

at::Tensor FlatLayout::View(const at::Tensor& flat, size_t i) const {
  const int64_t n = (i + 1 < offsets_.size() ? offsets_[i + 1] : numel_) - offsets_[i];
  return flat.narrow(0, offsets_[i], n).view(shapes_[i]);
}

at::Tensor FlatLayout::Shard(const at::Tensor& flat, int64_t rank) const {
  return flat.narrow(0, rank * shard_size_, shard_size_);
}

at::Tensor FlatLayout::Pack(const std::vector<at::Tensor>& tensors, const at::TensorOptions& options) const {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(tensors.size() == params_.size(), "FlatLayout::Pack: ", tensors.size(), " tensors for a layout of ",
              params_.size());
  at::Tensor flat = torch::zeros({padded_}, options.requires_grad(false));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].defined()) View(flat, i).copy_(tensors[i].detach().reshape(shapes_[i]));
  }
  return flat;
}

}  // namespace tmx::recipes
