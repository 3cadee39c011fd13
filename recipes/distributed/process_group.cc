#include "recipes/distributed/process_group.h"

#include <cstdlib>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include "base/text.h"
#include "recipes/distributed/collective_backends.h"

namespace tmx::recipes {
namespace {

StatusOr<int> EnvInt(const char* name, int min, int max, std::optional<int> fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    if (fallback) return *fallback;
    return Status::InvalidArgument("environment variable " + std::string(name) +
                                   " is not set; launch with `tune run --nproc_per_node N ...` or torchrun");
  }
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < min || n > max) {
    return Status::InvalidArgument("environment variable " + std::string(name) + "='" + v + "' is not a number from " +
                                   std::to_string(min) + " to " + std::to_string(max));
  }
  return static_cast<int>(n);
}

c10d::ReduceOp ToC10d(ProcessGroup::ReduceOp op) {
  return op == ProcessGroup::ReduceOp::kMax ? c10d::ReduceOp(c10d::ReduceOp::MAX) : c10d::ReduceOp(c10d::ReduceOp::SUM);
}

}  // namespace

void ProcessGroup::Wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const {
  try {
    work->wait();
  } catch (const std::exception& e) {
    std::string message = e.what();
    TORCH_CHECK(false, what, " on rank ", rank_, " of ", size_, " (", backend_name_, ") failed: ",
                message.substr(0, message.find('\n')), "; another rank crashed, hung or was stopped");
  }
}

StatusOr<DistEnv> DistEnv::FromEnvironment() {
  DistEnv env;
  if (std::getenv("RANK") == nullptr && std::getenv("WORLD_SIZE") == nullptr) return env;
  env.launched = true;
  StatusOr<int> world = EnvInt("WORLD_SIZE", 1, 1 << 16, std::nullopt);
  TM_RETURN_IF_ERROR(world.status());
  env.world_size = *world;
  StatusOr<int> rank = EnvInt("RANK", 0, env.world_size - 1, std::nullopt);
  TM_RETURN_IF_ERROR(rank.status());
  env.rank = *rank;
  StatusOr<int> local = EnvInt("LOCAL_RANK", 0, env.world_size - 1, env.rank);
  TM_RETURN_IF_ERROR(local.status());
  env.local_rank = *local;
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') env.master_addr = addr;
  StatusOr<int> port = EnvInt("MASTER_PORT", 1, 65535, env.world_size == 1 ? std::optional<int>(0) : std::nullopt);
  TM_RETURN_IF_ERROR(port.status());
  env.master_port = *port;
  return env;
}

bool BackendBuilt(const std::string& backend, std::string* why_not) {
  std::string reason;
  if (const CollectiveBackend* entry = FindCollectiveBackend(backend)) {
    if (!entry->create) reason = entry->unavailable;
  } else {
    std::vector<std::string> built;
    for (const CollectiveBackend& b : CollectiveBackends()) {
      if (b.create) built.push_back(b.name);
    }
    const std::string which =
        built.empty() ? "none is" : JoinStrings(built, " and ") + (built.size() == 1 ? " is" : " are");
    reason = "no process group backend '" + backend + "' is built here (" + which + ")";
  }
  if (why_not != nullptr) *why_not = reason;
  return reason.empty();
}

ProcessGroup::ProcessGroup(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Backend> backend, int rank,
                           int size, std::string backend_name)
    : store_(std::move(store)), backend_(std::move(backend)), rank_(rank), size_(size),
      backend_name_(std::move(backend_name)) {}

ProcessGroup::~ProcessGroup() = default;

StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                             int world_size, const std::string& backend,
                                                             std::chrono::milliseconds timeout) {
  if (world_size == 1) {
    return std::unique_ptr<ProcessGroup>(new ProcessGroup(store, {}, 0, 1, backend));
  }
  std::string why_not;
  if (!BackendBuilt(backend, &why_not)) return Status::Unavailable(why_not);
  c10::intrusive_ptr<c10d::Backend> made;
  try {
    made = FindCollectiveBackend(backend)->create(store, rank, world_size, timeout);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::Unavailable("forming the " + backend + " process group of " + std::to_string(world_size) +
                               " ranks as rank " + std::to_string(rank) + ": " + what.substr(0, what.find('\n')));
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(store, std::move(made), rank, world_size, backend));
}

StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Connect(const DistEnv& env, const std::string& backend,
                                                              std::chrono::milliseconds timeout) {
  if (env.world_size == 1) return Create({}, 0, 1, backend, timeout);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.master_port);
    o.isServer = env.rank == 0;
    o.numWorkers = env.world_size;
    o.waitWorkers = true;
    o.timeout = timeout;
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::Unavailable("rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
                               ": rendezvous at " + env.master_addr + ":" + std::to_string(env.master_port) +
                               " failed: " + what.substr(0, what.find('\n')) +
                               "; check MASTER_ADDR/MASTER_PORT and that every rank was started");
  }
  return Create(store, env.rank, env.world_size, backend, timeout);
}

void ProcessGroup::AllReduce(at::Tensor& tensor, ReduceOp op) {
  if (size_ == 1) return;
  std::vector<at::Tensor> t{tensor};
  c10d::AllreduceOptions o;
  o.reduceOp = ToC10d(op);
  Wait(backend_->allreduce(t, o), "all-reduce");
}

void ProcessGroup::ReduceScatter(at::Tensor& out, at::Tensor& in) {
  TORCH_CHECK(in.numel() == out.numel() * size_, "ReduceScatter: input has ", in.numel(), " elements, expected ",
              out.numel() * size_);
  if (size_ == 1) {
    out.copy_(in.view_as(out));
    return;
  }
  Wait(backend_->_reduce_scatter_base(out, in), "reduce-scatter");
}

void ProcessGroup::AllGather(at::Tensor& out, at::Tensor& in) {
  TORCH_CHECK(out.numel() == in.numel() * size_, "AllGather: output has ", out.numel(), " elements, expected ",
              in.numel() * size_);
  if (size_ == 1) {
    out.view_as(in).copy_(in);
    return;
  }
  Wait(backend_->_allgather_base(out, in), "all-gather");
}

void ProcessGroup::Broadcast(at::Tensor& tensor, int root) {
  if (size_ == 1) return;
  std::vector<at::Tensor> t{tensor};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  Wait(backend_->broadcast(t, o), "broadcast");
}

void ProcessGroup::Barrier() {
  if (size_ == 1) return;
  Wait(backend_->barrier(), "barrier");
}

double ProcessGroup::AllReduceScalar(double value, ReduceOp op) {
  if (size_ == 1) return value;
  at::Tensor t = torch::full({1}, value, torch::TensorOptions().dtype(torch::kDouble));
  // The scalar goes where the backend's collectives move tensors (nccl: the current cuda device).
  const CollectiveBackend* entry = FindCollectiveBackend(backend_name_);
  if (entry != nullptr) t = t.to(torch::Device(entry->device_types.front()));
  AllReduce(t, op);
  return t.cpu().item<double>();
}

}  // namespace tmx::recipes
