#include "recipes/distributed/collective_backends.h"

#include <algorithm>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#if defined(TM_HAVE_GLOO) && defined(USE_C10D_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(TM_HAVE_NCCL) && defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace tmx::recipes {
namespace {

// What each built-in backend needs in this build is known only here, at compile time (LibTorch's
// USE_C10D_* say what it was built with, TM_HAVE_* that the headers to compile against it were found).
std::vector<CollectiveBackend> BuiltinBackends() {
  CollectiveBackend gloo;
  gloo.name = "gloo";
  // The gloo collectives here move cpu tensors only (the device is created for the host).
  gloo.device_types = {"cpu"};
#if defined(TM_HAVE_GLOO) && defined(USE_C10D_GLOO)
  gloo.create = [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                   std::chrono::milliseconds timeout) -> c10::intrusive_ptr<c10d::Backend> {
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->timeout = timeout;
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
  };
#else
  gloo.unavailable = "this build has no gloo process groups (the gloo headers were missing when it was configured); "
                     "install libgloo-dev (scripts/setup.sh does) and rebuild";
#endif

  CollectiveBackend nccl;
  nccl.name = "nccl";
  nccl.device_types = {"cuda"};
#if defined(TM_HAVE_NCCL) && defined(USE_C10D_NCCL)
  nccl.create = [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                   std::chrono::milliseconds timeout) -> c10::intrusive_ptr<c10d::Backend> {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
  };
#else
  nccl.unavailable = "this build has no NCCL process groups (it needs a LibTorch built with CUDA and nccl.h when "
                     "configured); build against a CUDA LibTorch with the CUDA toolkit present";
#endif

  CollectiveBackend xccl;
  xccl.name = "xccl";
  xccl.device_types = {"xpu"};
  xccl.unavailable = "this build has no xccl (XCCL) process groups (ProcessGroupXCCL is not compiled in here); use a "
                     "LibTorch built with XPU and its XCCL headers, and add its creation to collective_backends.cc";
  return {gloo, nccl, xccl};
}

struct BackendTable {
  std::vector<CollectiveBackend> backends;
  size_t builtin = 0;  // backends[0, builtin) are the built-in ones
};

Status AddBackend(CollectiveBackend backend, std::vector<CollectiveBackend>* backends) {
  const std::string subject = "collective backend '" + backend.name + "'";
  if (backend.name.empty()) return Status::InvalidArgument("a collective backend needs a name, as c10d spells it");
  for (const CollectiveBackend& b : *backends) {
    if (b.name == backend.name) return Status::InvalidArgument(subject + " is registered twice");
  }
  if (backend.device_types.empty()) {
    return Status::InvalidArgument(subject + " serves no device type; list the types whose tensors it moves");
  }
  if (!backend.create && backend.unavailable.empty()) {
    return Status::InvalidArgument(subject + " has no way to be created; set create, or unavailable with the reason");
  }
  backends->push_back(std::move(backend));
  return Status::OK();
}

BackendTable& Table() {
  static BackendTable table = [] {
    BackendTable t;
    for (CollectiveBackend& b : BuiltinBackends()) {
      Status added = AddBackend(std::move(b), &t.backends);
      if (!added.ok()) throw std::logic_error("built-in collective backends: " + added.message());
    }
    t.builtin = t.backends.size();
    return t;
  }();
  return table;
}

}  // namespace

bool CollectiveBackend::Serves(const std::string& device_type) const {
  return std::find(device_types.begin(), device_types.end(), device_type) != device_types.end();
}

const std::vector<CollectiveBackend>& CollectiveBackends() { return Table().backends; }

const CollectiveBackend* FindCollectiveBackend(const std::string& name) {
  for (const CollectiveBackend& b : Table().backends) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

Status RegisterCollectiveBackend(CollectiveBackend backend) { return AddBackend(std::move(backend), &Table().backends); }

void UnregisterCollectiveBackend(const std::string& name) {
  BackendTable& table = Table();
  for (size_t i = table.builtin; i < table.backends.size(); ++i) {
    if (table.backends[i].name == name) {
      table.backends.erase(table.backends.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

}  // namespace tmx::recipes
