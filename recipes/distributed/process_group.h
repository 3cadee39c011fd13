// A process group for the distributed recipes: the ranks of one run, rendezvoused through a TCP store with
// torchrun's environment, and the few collectives the recipes use, over LibTorch's c10d backends (gloo on
// cpu, NCCL on cuda: the device table's `distributed_backend`, created by collective_backends.h's entry).
//
// Every collective blocks until it is done on this rank, and fails (throws c10::Error, as c10d does) when a
// peer does not join within the group's timeout, so a crashed or hung rank ends the others in bounded time.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include "base/status.h"

namespace c10d {
class Backend;
class Store;
class Work;
}  // namespace c10d

namespace tmx::recipes {

// Where a rank stands, as torchrun (and `tune run --nproc_per_node`) describe it in the environment.
struct DistEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  bool launched = false;  // RANK and WORLD_SIZE were set: started by a launcher

  // Reads RANK, LOCAL_RANK (default RANK), WORLD_SIZE, MASTER_ADDR (default 127.0.0.1) and MASTER_PORT.
  // Without RANK and WORLD_SIZE: one rank, nothing to rendezvous with. InvalidArgument naming the variable
  // when one is not a number in range, or MASTER_PORT is missing while WORLD_SIZE > 1.
  static StatusOr<DistEnv> FromEnvironment();
};

// Whether this build can form process groups with `backend` ("gloo", "nccl": an entry of collective_backends.h
// with a way to create it), and why not when it cannot.
bool BackendBuilt(const std::string& backend, std::string* why_not = nullptr);

// How long a collective waits for every rank before failing (the default of ProcessGroupOptions::timeout).
inline constexpr std::chrono::seconds kDefaultCollectiveTimeout{300};

class ProcessGroup {
 public:
  enum class ReduceOp { kSum, kMax };

  // Rendezvous through a TCP store at env.master_addr:master_port (rank 0 serves it) and form the group.
  // Unavailable when the store cannot be reached or the backend not built (naming the fix).
  static StatusOr<std::unique_ptr<ProcessGroup>> Connect(const DistEnv& env, const std::string& backend,
                                                         std::chrono::milliseconds timeout = kDefaultCollectiveTimeout);
  // The group over an existing store (tests: one c10d::HashStore shared by threads playing the ranks).
  static StatusOr<std::unique_ptr<ProcessGroup>> Create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                        int world_size, const std::string& backend,
                                                        std::chrono::milliseconds timeout = kDefaultCollectiveTimeout);
  ~ProcessGroup();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& backend() const { return backend_name_; }

  // In place on every rank.
  void AllReduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  // `in` is split into size() equal chunks; rank r receives into `out` the sum over ranks of chunk r.
  // REQUIRES: in.numel() == out.numel() * size(), both contiguous, same dtype and device.
  void ReduceScatter(at::Tensor& out, at::Tensor& in);
  // `out` receives every rank's `in`, rank order. REQUIRES: out.numel() == in.numel() * size().
  void AllGather(at::Tensor& out, at::Tensor& in);
  void Broadcast(at::Tensor& tensor, int root = 0);
  void Barrier();

  // Sums (or takes the largest of) one number over the ranks.
  double AllReduceScalar(double value, ReduceOp op = ReduceOp::kSum);

 private:
  ProcessGroup(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Backend> backend, int rank, int size,
               std::string backend_name);
  // Waits for `work`; a failure (a peer's timeout, a closed connection) becomes a c10::Error naming `what`.
  void Wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  int rank_ = 0, size_ = 1;
  std::string backend_name_;
};

}  // namespace tmx::recipes
