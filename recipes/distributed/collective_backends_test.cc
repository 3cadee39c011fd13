// The collective-backend table: every device type's backend has an entry, and an out-of-tree device type
// registers with its hooks and its backend, once.
#include "recipes/distributed/collective_backends.h"

#include <memory>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "harness/device_hooks.h"
#include "recipes/distributed/process_group.h"

namespace tmx::recipes {
namespace {

TEST(CollectiveBackendsTest, EveryDeviceTypesBackendHasAnEntryServingIt) {
  for (const DeviceTypeTraits& t : DeviceTypes()) {
    if (t.distributed_backend.empty()) continue;
    const CollectiveBackend* backend = FindCollectiveBackend(t.distributed_backend);
    ASSERT_NE(backend, nullptr) << t.name << ": " << t.distributed_backend;
    // mps names gloo, whose collectives move cpu tensors only: train_schema refuses it with that reason.
    if (t.name != "mps") EXPECT_TRUE(backend->Serves(t.name)) << t.name;
  }
  EXPECT_EQ(FindCollectiveBackend("gloo")->device_types, std::vector<std::string>{"cpu"});
  EXPECT_EQ(FindCollectiveBackend("nccl")->device_types, std::vector<std::string>{"cuda"});
  const CollectiveBackend* xccl = FindCollectiveBackend("xccl");
  ASSERT_NE(xccl, nullptr);
  std::string why_not;
  EXPECT_FALSE(BackendBuilt("xccl", &why_not));
  EXPECT_EQ(why_not, xccl->unavailable);
  EXPECT_NE(why_not.find("XCCL"), std::string::npos) << why_not;
  EXPECT_FALSE(BackendBuilt("mpi", &why_not));
  EXPECT_NE(why_not.find("no process group backend 'mpi' is built here"), std::string::npos) << why_not;
}

class NpuHooks final : public DeviceHooks {
 public:
  std::string type() const override { return "fakenpu"; }
  int Count() const override { return 0; }
  void Probe(int, DeviceInfo*) const override {}
  std::optional<MemoryReading> PeakMemory(int) const override { return std::nullopt; }
};

TEST(CollectiveBackendsTest, AnOutOfTreeTypeRegistersItsHooksAndBackendOnce) {
  DeviceTypeTraits npu;
  npu.name = "fakenpu";
  npu.takes_index = true;
  npu.distributed_backend = "fakeccl";
  ASSERT_TRUE(RegisterDeviceType(npu, std::make_unique<NpuHooks>()).ok());
  CollectiveBackend ccl;
  ccl.name = "fakeccl";
  ccl.device_types = {"fakenpu"};
  ccl.create = [](const c10::intrusive_ptr<c10d::Store>&, int, int, std::chrono::milliseconds) {
    return c10::intrusive_ptr<c10d::Backend>();
  };
  ASSERT_TRUE(RegisterCollectiveBackend(ccl).ok());
  EXPECT_TRUE(BackendBuilt("fakeccl"));
  EXPECT_TRUE(FindCollectiveBackend(FindDeviceType("fakenpu")->distributed_backend)->Serves("fakenpu"));
  EXPECT_EQ(HooksFor("fakenpu").type(), "fakenpu");

  // Duplicates, built-in or not, are refused with the name.
  EXPECT_EQ(RegisterCollectiveBackend(ccl).message(), "collective backend 'fakeccl' is registered twice");
  ccl.name = "gloo";
  EXPECT_EQ(RegisterCollectiveBackend(ccl).message(), "collective backend 'gloo' is registered twice");
  EXPECT_EQ(RegisterDeviceType(npu, std::make_unique<NpuHooks>()).message(),
            "device type 'fakenpu' is registered twice");
  // An entry must serve a device type and be creatable or say why not.
  ccl.name = "emptyccl";
  ccl.device_types.clear();
  EXPECT_NE(RegisterCollectiveBackend(ccl).message().find("serves no device type"), std::string::npos);
  ccl.device_types = {"fakenpu"};
  ccl.create = nullptr;
  EXPECT_NE(RegisterCollectiveBackend(ccl).message().find("no way to be created"), std::string::npos);

  UnregisterCollectiveBackend("fakeccl");
  UnregisterCollectiveBackend("gloo");  // built-in ones stay
  UnregisterDeviceType("fakenpu");
  EXPECT_EQ(FindCollectiveBackend("fakeccl"), nullptr);
  EXPECT_NE(FindCollectiveBackend("gloo"), nullptr);
  EXPECT_EQ(FindDeviceType("fakenpu"), nullptr);
}

}  // namespace
}  // namespace tmx::recipes
