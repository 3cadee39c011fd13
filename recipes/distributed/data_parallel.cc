#include "recipes/distributed/data_parallel.h"

#include <cmath>
#include <map>

#include <torch/torch.h>

#include "recipes/distributed/sharded_layers.h"

namespace tmx::recipes {

DataParallel::DataParallel(ProcessGroup* group, const std::vector<at::Tensor>& params,
                           const DataParallelOptions& options)
    : group_(group), options_(options) {
  torch::NoGradGuard no_grad;
  const int64_t ranks = group_->size();
  std::map<c10::ScalarType, std::vector<at::Tensor>> by_dtype;
  std::vector<c10::ScalarType> order;
  for (const at::Tensor& p : params) {
    if (by_dtype.find(p.scalar_type()) == by_dtype.end()) order.push_back(p.scalar_type());
    by_dtype[p.scalar_type()].push_back(p);
  }
  for (c10::ScalarType dtype : order) {
    FlatGroup g;
    g.layout = FlatLayout(by_dtype[dtype], ranks);
    g.flat = g.layout.Pack(g.layout.params(), g.layout.params().front().options());
    // The module's parameters now live in the flat buffer.
    for (size_t i = 0; i < g.layout.size(); ++i) g.layout.params()[i].set_data(g.layout.View(g.flat, i));
    if (options_.shard) {
      g.shard = g.layout.Shard(g.flat, group_->rank()).detach();
      if (options_.cpu_offload && !g.shard.device().is_cpu()) g.shard = g.shard.to(torch::kCPU).clone();
      optimizer_tensors_.push_back(g.shard);
    } else {
      for (const at::Tensor& p : g.layout.params()) optimizer_tensors_.push_back(p);
    }
    groups_.push_back(std::move(g));
  }
}

void DataParallel::BroadcastParameters() {
  torch::NoGradGuard no_grad;
  for (FlatGroup& g : groups_) {
    group_->Broadcast(g.flat, 0);
    if (options_.shard && options_.cpu_offload && !g.flat.device().is_cpu()) {
      g.shard.copy_(g.layout.Shard(g.flat, group_->rank()));
    }
  }
}

void DataParallel::ZeroGrad() {
  for (FlatGroup& g : groups_) {
    if (g.grad.defined()) {
      g.grad.zero_();
    } else {
      g.grad = torch::zeros({g.layout.padded()}, g.flat.options());
    }
    // Autograd accumulates into an existing .grad in place, so the parameters' gradients land in the buffer.
    for (size_t i = 0; i < g.layout.size(); ++i) g.layout.params()[i].mutable_grad() = g.layout.View(g.grad, i);
  }
}

void DataParallel::ReduceGradients() {
  torch::NoGradGuard no_grad;
  for (FlatGroup& g : groups_) {
    TORCH_CHECK(g.grad.defined(), "DataParallel::ReduceGradients without ZeroGrad before the backward passes");
    if (!options_.shard) {
      group_->AllReduce(g.grad);
      continue;
    }
    at::Tensor shard_grad = torch::empty({g.layout.shard_size()}, g.grad.options());
    group_->ReduceScatter(shard_grad, g.grad);
    // The whole gradient is not needed past this point: free it before the optimizer allocates its state.
    for (const at::Tensor& p : g.layout.params()) p.mutable_grad() = at::Tensor();
    g.grad = at::Tensor();
    g.shard.mutable_grad() = g.shard.device() == shard_grad.device() ? shard_grad : shard_grad.to(g.shard.device());
  }
}

double GradSquaredSum(const std::vector<at::Tensor>& tensors) {
  double sum_squares = 0;
  for (const at::Tensor& t : tensors) {
    if (t.grad().defined()) sum_squares += t.grad().to(torch::kFloat).pow(2).sum().item<double>();
  }
  return sum_squares;
}

void ScaleGrads(const std::vector<at::Tensor>& tensors, double factor) {
  torch::NoGradGuard no_grad;
  for (const at::Tensor& t : tensors) {
    if (t.grad().defined()) t.grad().mul_(factor);
  }
}

double DataParallel::LocalGradSquares() const { return GradSquaredSum(optimizer_tensors_); }

void DataParallel::ScaleGrads(double factor) { recipes::ScaleGrads(optimizer_tensors_, factor); }

double ClipGradNorm(ProcessGroup& group, DataParallel& data_parallel, ShardedLayers* layers,
                    std::optional<double> max_norm) {
  // Shards' squares are summed over the ranks; replicated gradients are whole on every rank already.
  double sharded = layers != nullptr ? layers->GradSquaredSum() : 0, whole = 0;
  (data_parallel.sharded() ? sharded : whole) += data_parallel.LocalGradSquares();
  const double norm = std::sqrt(group.AllReduceScalar(sharded) + whole);
  const double scale = max_norm ? *max_norm / (norm + 1e-6) : 1.0;
  if (scale < 1.0) {
    data_parallel.ScaleGrads(scale);
    if (layers != nullptr) layers->ScaleGrads(scale);
  }
  return norm;
}

void DataParallel::GatherParameters() {
  if (!options_.shard) return;
  torch::NoGradGuard no_grad;
  for (FlatGroup& g : groups_) {
    at::Tensor mine = g.shard.to(g.flat.device(), /*non_blocking=*/false, /*copy=*/true);
    group_->AllGather(g.flat, mine);
    g.shard.mutable_grad() = at::Tensor();
  }
}

std::vector<ShardedFlat> DataParallel::flats() const {
  std::vector<ShardedFlat> out;
  if (!options_.shard) return out;
  for (const FlatGroup& g : groups_) out.push_back({g.layout, g.shard});
  return out;
}

int64_t DataParallel::optimizer_elements() const {
  int64_t n = 0;
  for (const at::Tensor& t : optimizer_tensors_) n += t.numel();
  return n;
}

}  // namespace tmx::recipes
