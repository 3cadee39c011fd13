// The collective-backend table: one entry per c10d backend the distributed recipes can form a process group
// with (gloo, nccl, xccl, or an out-of-tree one), saying which device types' tensors it moves and how to
// create it, or why this LibTorch build cannot. A device type names its backend in the device table
// (DeviceTypeTraits::distributed_backend); everything else about the backend is asked here, not matched
// on its name.
//
// Adding a backend: one CollectiveBackend in BuiltinBackends() (collective_backends.cc), or, out of tree,
// RegisterCollectiveBackend at start-up beside the device type's RegisterDeviceType.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "base/status.h"

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace tmx::recipes {

struct CollectiveBackend {
  // c10d's name, as device tables spell it: "gloo", "nccl", "xccl".
  std::string name;
  // The device types whose tensors its collectives move. The first holds the scalars reduced through it
  // (ProcessGroup::AllReduceScalar).
  std::vector<std::string> device_types;
  // Forms this rank's backend over `store`; throws as c10d does when the peers do not join. Empty when this
  // build cannot form it; then `unavailable` says why and how to get it.
  using Create = std::function<c10::intrusive_ptr<c10d::Backend>(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size, std::chrono::milliseconds timeout)>;
  Create create;
  std::string unavailable;

  bool Serves(const std::string& device_type) const;
};

// Every backend: the built-in gloo, nccl and xccl, then registered ones in order.
const std::vector<CollectiveBackend>& CollectiveBackends();

// The entry named `name`, or nullptr.
const CollectiveBackend* FindCollectiveBackend(const std::string& name);

// Adds a backend (an out-of-tree one). InvalidArgument when the name is empty or taken, when it serves no
// device type, or when it has neither `create` nor an `unavailable` reason. Not thread-safe: register at
// start-up, before a process group is formed.
Status RegisterCollectiveBackend(CollectiveBackend backend);

// Removes a backend added by RegisterCollectiveBackend (tests); built-in ones stay.
void UnregisterCollectiveBackend(const std::string& name);

}  // namespace tmx::recipes
