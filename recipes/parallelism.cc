#include "recipes/parallelism.h"

#include <torch/torch.h>

#include "harness/device_hooks.h"
#include "recipes/distributed/data_parallel.h"
#include "recipes/distributed/optimizer_state.h"
#include "recipes/distributed/process_group.h"
#include "recipes/distributed/sharded_layers.h"

namespace tmx::recipes {
namespace {

// Moves `from`'s per-parameter state into `to`, which steps the same tensors.
void MoveState(torch::optim::Optimizer& from, torch::optim::Optimizer* to) {
  for (auto& [key, state] : from.state()) to->state()[key] = std::move(state);
}

class OneDevice : public Parallelism {
 public:
  StatusOr<std::vector<at::Tensor>> Wrap(const Config&, const TrainableModel& model) override {
    trained_ = model.trained_tensors;
    return trained_;
  }
  void ZeroGrad(torch::optim::Optimizer& optimizer) override { optimizer.zero_grad(); }
  std::optional<double> ReduceAndClip(std::optional<double> max_norm) override {
    if (!max_norm) return std::nullopt;
    return torch::nn::utils::clip_grad_norm_(trained_, *max_norm);
  }
  void LoadOptimizerState(torch::optim::Optimizer& per_param, torch::optim::Optimizer* optimizer) override {
    MoveState(per_param, optimizer);
  }

 private:
  std::vector<at::Tensor> trained_;
};

// The ranks of a launched run. Every rank built the same weights from the same seed and checkpoint, so no
// broadcast is needed.
class Ranks : public Parallelism {
 public:
  Ranks(DistEnv env, std::unique_ptr<ProcessGroup> group) : env_(env), group_(std::move(group)) {}

  int rank() const override { return group_->rank(); }
  int world_size() const override { return group_->size(); }
  c10::Device LocalDevice(c10::Device configured) const override {
    // One accelerator per rank: rank r of a launched run uses device LOCAL_RANK of the config's type.
    if (!env_.launched || configured.is_cpu()) return configured;
    return c10::Device(configured.type(), static_cast<c10::DeviceIndex>(env_.local_rank));
  }
  std::string Describe() const override {
    const int n = world_size();
    return ", " + std::to_string(n) + " rank" + (n == 1 ? "" : "s") + " over " + group_->backend() +
           (layers_                      ? " (layer weights, gradients and optimizer state sharded)"
            : data_parallel_->sharded() ? " (gradients and optimizer state sharded)"
                                        : " (replicated)");
  }

  StatusOr<std::vector<at::Tensor>> Wrap(const Config& config, const TrainableModel& model) override {
    DataParallelOptions options;
    StatusOr<int64_t> shard_dim = config.GetInt("data_parallel_shard_dim");
    TM_RETURN_IF_ERROR(shard_dim.status());
    options.shard = *shard_dim != 1;
    if (*shard_dim > 1 && *shard_dim != world_size()) {
      return Status::InvalidArgument("data_parallel_shard_dim=" + std::to_string(*shard_dim) + " but the run has " +
                                     std::to_string(world_size()) +
                                     " ranks; set it to -1 (every rank) or 1 (no sharding)");
    }
    StatusOr<bool> offload = config.GetBool("fsdp_cpu_offload");
    StatusOr<bool> reshard = config.GetBool("fsdp_reshard_after_forward");
    TM_RETURN_IF_ERROR(offload.status());
    TM_RETURN_IF_ERROR(reshard.status());
    options.cpu_offload = *offload;
    // Sharded and resharded after forward (FSDP's FULL_SHARD, torchtune's default): the layers' weights are
    // sharded too; the rest (embeddings, final norm, output) as gradients and optimizer state only.
    std::vector<at::Tensor> whole = model.trained_tensors;
    if (options.shard && *reshard) {
      layers_ = std::make_unique<ShardedLayers>(group_.get(), model.model);
      whole.clear();
      for (const at::Tensor& t : model.trained_tensors) {
        if (!layers_->Owns(t)) whole.push_back(t);
      }
    }
    data_parallel_ = std::make_unique<DataParallel>(group_.get(), whole, options);
    std::vector<at::Tensor> stepped = data_parallel_->optimizer_tensors();
    if (layers_) {
      for (const at::Tensor& t : layers_->optimizer_tensors()) stepped.push_back(t);
    }
    return stepped;
  }

  void ZeroGrad(torch::optim::Optimizer&) override {
    data_parallel_->ZeroGrad();
    if (layers_) layers_->ZeroGrad();
  }
  std::optional<double> ReduceAndClip(std::optional<double> max_norm) override {
    data_parallel_->ReduceGradients();
    if (!max_norm) return std::nullopt;
    return ClipGradNorm(*group_, *data_parallel_, layers_.get(), max_norm);
  }
  void AfterStep() override { data_parallel_->GatherParameters(); }
  double Sum(double v) const override { return group_->AllReduceScalar(v); }
  double Max(double v) const override { return group_->AllReduceScalar(v, ProcessGroup::ReduceOp::kMax); }
  void AllReduce(at::Tensor& tensor) const override { group_->AllReduce(tensor); }

  void LoadOptimizerState(torch::optim::Optimizer& per_param, torch::optim::Optimizer* optimizer) override {
    if (!ShardsOptimizerState()) return MoveState(per_param, optimizer);  // the same tensors
    // Each rank cuts its shards out of the per-parameter state.
    for (const ShardedFlat& f : Flats()) ScatterOptimizerState(rank(), f, per_param, optimizer);
  }
  // Fully sharded layers are gathered on every rank for the save, and released after it.
  void BeginSave() override {
    if (layers_) layers_->GatherAll();
  }
  bool ShardsOptimizerState() const override { return data_parallel_->sharded(); }
  void GatherOptimizerState(const torch::optim::Optimizer& optimizer, torch::optim::Optimizer* per_param) override {
    for (const ShardedFlat& f : Flats()) recipes::GatherOptimizerState(*group_, f, optimizer, per_param);
  }
  void EndSave() override {
    if (layers_) layers_->ReleaseAll();
    group_->Barrier();  // the checkpoint is complete for every rank
  }

 private:
  // The sharded groups of weights (outside the layers, then each layer's).
  std::vector<ShardedFlat> Flats() const {
    std::vector<ShardedFlat> flats = data_parallel_->flats();
    if (layers_) {
      for (ShardedFlat& f : layers_->flats()) flats.push_back(std::move(f));
    }
    return flats;
  }

  DistEnv env_;
  std::unique_ptr<ProcessGroup> group_;
  std::unique_ptr<ShardedLayers> layers_;  // the transformer layers, when fully sharded; else null
  std::unique_ptr<DataParallel> data_parallel_;  // every other trained weight
};

}  // namespace

std::unique_ptr<Parallelism> SingleDevice() { return std::make_unique<OneDevice>(); }

StatusOr<std::unique_ptr<Parallelism>> JoinRanks(const RunContext& context) {
  StatusOr<DistEnv> env = DistEnv::FromEnvironment();
  TM_RETURN_IF_ERROR(env.status());
  StatusOr<std::unique_ptr<ProcessGroup>> group =
      ProcessGroup::Connect(*env, context.device.traits().distributed_backend);
  TM_RETURN_IF_ERROR(group.status());
  return std::unique_ptr<Parallelism>(std::make_unique<Ranks>(*env, std::move(*group)));
}

Status RunInProcessOrRanks(const Config& config, const RunContext& context, const std::string& recipe,
                           bool distributed, const std::string& out_of_memory_fix,
                           const std::function<Status(Parallelism& parallel, RunSummary* summary)>& work,
                           const std::function<void(const RunSummary& summary)>& report) {
  // The recipes build their components through the registry the config resolved through (`tune` passes it).
  if (context.registry == nullptr) return Status::Internal(recipe + ": the run context names no registry");
  RunSummary summary;
  summary.recipe = recipe;
  summary.config = context.config_name;
  summary.device = context.device.id;
  summary.device_name = context.device.name;
  summary.torch_version = TorchVersion();
  Status s;
  int rank = 0;
  std::optional<int64_t> ranks_peak;
  try {
    StatusOr<std::unique_ptr<Parallelism>> parallel =
        distributed ? JoinRanks(context) : StatusOr<std::unique_ptr<Parallelism>>(SingleDevice());
    s = parallel.status();
    if (!s.ok()) summary.error_kind = "rendezvous";
    if (s.ok()) {
      s = work(**parallel, &summary);
      rank = (*parallel)->rank();
      // Each rank reads its own peak; on an accelerator the largest counts, on the host (ranks sharing its
      // memory) their sum; only while the group works.
      std::optional<MemoryReading> peak = PeakMemory(context.device);
      const bool shared_host = context.device.traits().HostMemory();
      if (s.ok() && peak) {
        const double own = static_cast<double>(peak->bytes);
        ranks_peak = static_cast<int64_t>(shared_host ? (*parallel)->Sum(own) : (*parallel)->Max(own));
      }
    }
  } catch (const c10::OutOfMemoryError& e) {
    summary.error_kind = "out_of_memory";
    const std::string what = e.what();
    s = Status::Internal("out of memory on " + context.device.id + ": " + what.substr(0, what.find('\n')) + "; " +
                         out_of_memory_fix);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    s = Status::Internal(recipe + " failed on " + context.device.id + ": " + what.substr(0, what.find('\n')));
  }
  summary.ok = s.ok();
  if (!s.ok()) {
    summary.error = s.message();
    if (summary.error_kind.empty()) summary.error_kind = "error";
  }
  summary.Finish();
  if (std::optional<MemoryReading> peak = PeakMemory(context.device)) {
    summary.peak_memory_bytes = std::max(peak->bytes, ranks_peak.value_or(0));
    summary.peak_memory_source = peak->source;
  }
  if (rank != 0) {
    // Rank 0 writes the summary and the last lines; the others report only their own failure.
    if (!s.ok()) s = Status::Internal("rank " + std::to_string(rank) + ": " + s.message());
    return s;
  }
  StatusOr<std::string> out = config.GetString("output_dir", "");
  if (out.ok() && !out->empty()) {
    Status w = WriteRunSummary(*out, summary);
    if (!w.ok() && s.ok()) s = w;
  }
  if (s.ok() && context.out != nullptr) report(summary);
  return s;
}

}  // namespace tmx::recipes
