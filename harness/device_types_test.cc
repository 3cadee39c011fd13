#include "harness/device_types.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(DeviceTypesTest, EveryBuiltinTypeIsInTheTable) {
  struct Row {
    const char* name;
    bool takes_index;
    const char* backend;
    bool offloading;
  } rows[] = {{"cpu", false, "gloo", false},
              {"cuda", true, "nccl", true},
              {"xpu", true, "xccl", true},
              {"mps", false, "gloo", false},
              {"meta", false, "", false}};
  for (const Row& r : rows) {
    const DeviceTypeTraits* t = FindDeviceType(r.name);
    ASSERT_NE(t, nullptr) << r.name;
    EXPECT_EQ(t->takes_index, r.takes_index) << r.name;
    EXPECT_EQ(t->distributed_backend, r.backend) << r.name;
    EXPECT_EQ(t->activation_offloading, r.offloading) << r.name;
    EXPECT_FALSE(t->doc.empty()) << r.name;
  }
  EXPECT_EQ(FindDeviceType("tpu"), nullptr);
  EXPECT_FALSE(FindDeviceType("meta")->trains);
  EXPECT_EQ(FindDeviceType("cpu")->peak_memory, DeviceTypeTraits::PeakMemory::kProcessRss);
  EXPECT_EQ(FindDeviceType("cuda")->peak_memory, DeviceTypeTraits::PeakMemory::kAllocator);
  EXPECT_TRUE(FindDeviceType("cpu")->HostMemory());
  EXPECT_FALSE(FindDeviceType("cuda")->HostMemory());
  EXPECT_FALSE(FindDeviceType("meta")->HostMemory());
}

TEST(DeviceTypesTest, ParsesEveryForm) {
  struct Case {
    std::string text, canonical;
  } cases[] = {{"cpu", "cpu"}, {"cuda", "cuda"}, {"cuda:1", "cuda:1"}, {"mps", "mps"},
               {"xpu", "xpu"}, {"xpu:0", "xpu:0"}, {"meta", "meta"},   {"auto", "auto"}};
  for (const Case& c : cases) {
    StatusOr<DeviceSelector> s = ParseDeviceSelector(c.text);
    ASSERT_TRUE(s.ok()) << c.text << ": " << s.status().ToString();
    EXPECT_EQ(s->ToString(), c.canonical);
  }
}

TEST(DeviceTypesTest, RejectsBadDevicesWithHintAndTheTablesForms) {
  EXPECT_EQ(ParseDeviceSelector("cdua").status().message(),
            "unknown device 'cdua'; did you mean 'cuda'? (accepted: cpu, cuda, cuda:N, xpu, xpu:N, mps, meta, auto)");
  // What users call a type is answered with its name.
  for (const char* word : {"gpu", "GPU", "nvidia"}) {
    EXPECT_EQ(ParseDeviceSelector(word).status().message(),
              "unknown device '" + std::string(word) +
                  "'; did you mean 'cuda'? (accepted: cpu, cuda, cuda:N, xpu, xpu:N, mps, meta, auto)");
  }
  EXPECT_NE(ParseDeviceSelector("metal").status().message().find("did you mean 'mps'?"), std::string::npos);
  EXPECT_EQ(ParseDeviceSelector("cpu:0").status().message(),
            "bad device 'cpu:0': only cuda and xpu take an index, written as cuda:0 (accepted: cpu, cuda, cuda:N, xpu, "
            "xpu:N, mps, meta, auto)");
  EXPECT_EQ(ParseDeviceSelector("cuda:x").status().message(),
            "bad device 'cuda:x': the index must be a number, as in cuda:0 (accepted: cpu, cuda, cuda:N, xpu, xpu:N, "
            "mps, meta, auto)");
  EXPECT_FALSE(ParseDeviceSelector("").ok());
}

TEST(DeviceTypesTest, AnOutOfTreeTypeRegistersOnceAndIsThenParsed) {
  DeviceTypeTraits npu;
  npu.name = "npu";
  npu.takes_index = true;
  npu.distributed_backend = "hccl";
  npu.report_rank = 4;
  ASSERT_TRUE(RegisterDeviceType(npu).ok());
  EXPECT_EQ(RegisterDeviceType(npu).message(), "device type 'npu' is registered twice");
  EXPECT_EQ(ParseDeviceSelector("npu:2")->ToString(), "npu:2");
  EXPECT_EQ(OrderDeviceTypes({"npu", "xpu", "cpu"}), (std::vector<std::string>{"cpu", "xpu", "npu"}));
  UnregisterDeviceType("npu");
  EXPECT_FALSE(ParseDeviceSelector("npu").ok());
  DeviceTypeTraits bad;
  bad.name = "Bad-Name";
  EXPECT_FALSE(RegisterDeviceType(bad).ok());
  bad.name = "auto";
  EXPECT_FALSE(RegisterDeviceType(bad).ok());
}

TEST(DeviceTypesTest, BuiltInTypesAreRegisteredAsAnyOtherAndStay) {
  // Re-registering a built-in name is refused like any duplicate, and unregistering one does nothing.
  DeviceTypeTraits cpu;
  cpu.name = "cpu";
  EXPECT_EQ(RegisterDeviceType(cpu).message(), "device type 'cpu' is registered twice");
  UnregisterDeviceType("cpu");
  ASSERT_NE(FindDeviceType("cpu"), nullptr);
  EXPECT_EQ(FindDeviceType("cpu")->distributed_backend, "gloo");
  // This torch-free program attaches no hooks; hooks for an unknown type are refused, naming the fix.
  EXPECT_EQ(FindDeviceType("cpu")->hooks, nullptr);
  EXPECT_EQ(AttachDeviceHooks("npu", nullptr).message(),
            "device hooks for 'npu': the type is not in the device table; call RegisterDeviceType first");
}

TEST(DeviceTypesTest, ReportOrderIsTheTablesThenAlphabetical) {
  EXPECT_EQ(OrderDeviceTypes({"tpu", "xpu", "hpu", "cuda", "mps", "cpu", "cuda"}),
            (std::vector<std::string>{"cpu", "cuda", "mps", "xpu", "hpu", "tpu"}));
  EXPECT_TRUE(OrderDeviceTypes({}).empty());
}

}  // namespace
}  // namespace tmx
