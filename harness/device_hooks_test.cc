// The device table's torch side: every type has hooks, probing asks only the device a command needs, and a
// second device type (a fake one registered as an out-of-tree backend would be) does no work in a cpu run.
#include "harness/device_hooks.h"

#include <sstream>

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "base/file_util.h"
#include "harness/tune_cli.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

// Counts every call, so a test can tell whether anything touched this device type.
struct Calls {
  int count = 0, probe = 0, synchronize = 0, peak = 0, reset = 0;
  int total() const { return count + probe + synchronize + peak + reset; }
};

class FakeHooks final : public DeviceHooks {
 public:
  explicit FakeHooks(Calls* calls) : calls_(calls) {}
  std::string type() const override { return "fakegpu"; }
  int Count() const override {
    ++calls_->count;
    return 2;
  }
  void Probe(int index, DeviceInfo* info) const override {
    ++calls_->probe;
    info->name = "Fake GPU " + std::to_string(index);
    info->total_memory_bytes = int64_t{8} << 30;
    info->bf16_matmul_backward = true;
  }
  void Synchronize(int) const override { ++calls_->synchronize; }
  std::optional<MemoryReading> PeakMemory(int) const override {
    ++calls_->peak;
    return MemoryReading{123, "fakegpu_allocator"};
  }
  void ResetPeakMemory(int) const override { ++calls_->reset; }

 private:
  Calls* calls_;
};

class DeviceHooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceTypeTraits fake;
    fake.name = "fakegpu";
    fake.takes_index = true;
    fake.auto_rank = 5;
    fake.distributed_backend = "fakeccl";
    fake.peak_memory = DeviceTypeTraits::PeakMemory::kAllocator;
    fake.doc = "a fake accelerator registered by the test";
    ASSERT_TRUE(RegisterDeviceType(fake).ok());
    ASSERT_TRUE(RegisterDeviceHooks(std::make_unique<FakeHooks>(&calls_)).ok());
  }
  void TearDown() override {
    UnregisterDeviceHooks("fakegpu");
    UnregisterDeviceType("fakegpu");
  }
  Calls calls_;
};

TEST_F(DeviceHooksTest, EveryTypeInTheTableHasHooks) {
  for (const DeviceTypeTraits& t : DeviceTypes()) EXPECT_EQ(HooksFor(t.name).type(), t.name);
  EXPECT_EQ(RegisterDeviceHooks(std::make_unique<FakeHooks>(&calls_)).message(),
            "device hooks for 'fakegpu' registered twice");
}

TEST_F(DeviceHooksTest, ProbingCpuDoesNoWorkOnAnotherType) {
  StatusOr<DeviceInfo> cpu = ProbeDevice(*ParseDeviceSelector("cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->id, "cpu");
  EXPECT_TRUE(cpu->probed);
  EXPECT_GT(cpu->total_memory_bytes, int64_t{1} << 28);
  // LibTorch runs bf16 matmul with backward on every x86-64 CPU it supports.
  EXPECT_TRUE(cpu->bf16_matmul_backward) << (cpu->notes.empty() ? "" : cpu->notes.front());
  EXPECT_EQ(cpu->distributed_backend, "gloo");
  EXPECT_EQ(calls_.total(), 0);
}

TEST_F(DeviceHooksTest, TheNamedDeviceIsProbedAloneAndAnAbsentOneNamesThePresent) {
  StatusOr<DeviceInfo> one = ProbeDevice(*ParseDeviceSelector("fakegpu:1"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->id, "fakegpu:1");
  EXPECT_EQ(one->name, "Fake GPU 1");
  EXPECT_EQ(one->distributed_backend, "fakeccl");
  EXPECT_EQ(calls_.probe, 1);
  StatusOr<DeviceInfo> absent = ProbeDevice(*ParseDeviceSelector("fakegpu:7"));
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(calls_.probe, 1);  // counted, not probed
  EXPECT_NE(absent.status().message().find("(available: cpu, "), std::string::npos) << absent.status().message();
  EXPECT_NE(absent.status().message().find("fakegpu:0, fakegpu:1)"), std::string::npos) << absent.status().message();
}

TEST_F(DeviceHooksTest, AutoTakesTheLowestAutoRankPresent) {
  if (HooksFor("cuda").Count() > 0 || HooksFor("xpu").Count() > 0 || HooksFor("mps").Count() > 0) {
    GTEST_SKIP() << "a real accelerator outranks the fake one on this machine";
  }
  StatusOr<DeviceInfo> chosen = ProbeDevice(*ParseDeviceSelector("auto"));
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->id, "fakegpu:0");
  EXPECT_EQ(PeakMemory(*chosen)->source, "fakegpu_allocator");
}

TEST_F(DeviceHooksTest, TuneRunOnCpuDoesNoWorkOnTheFakeType) {
  test::ScratchDir dir("device_hooks_test");
  std::string config = dir.path() + "/c.yaml";
  ASSERT_TRUE(WriteFileAtomically(config, "device: cpu\n").ok());
  Registry registry;
  RecipeSpec recipe;
  recipe.name = "probe_recipe";
  recipe.fields = {Field("device", FieldType::kString, "cuda", "where to run")};
  std::string used;
  recipe.run = [&used](const Config&, const RunContext& context) {
    // What a recipe does with its device: synchronise and read memory through the device's own hooks.
    HooksFor(context.device.type).Synchronize(context.device.index);
    used = context.device.id + " " + PeakMemory(context.device)->source;
    return Status::OK();
  };
  ASSERT_TRUE(registry.AddRecipe(recipe).ok());
  std::ostringstream out, err;
  EXPECT_EQ(RunTune(registry, {"run", "probe_recipe", "--config", config}, out, err), 0) << err.str();
  EXPECT_EQ(used, "cpu process_rss");
  EXPECT_EQ(calls_.total(), 0) << "count " << calls_.count << ", probe " << calls_.probe;
  EXPECT_EQ(RunTune(registry, {"run", "probe_recipe", "--config", config, "device=fakegpu:1"}, out, err), 0)
      << err.str();
  EXPECT_EQ(used, "fakegpu:1 fakegpu_allocator");
  EXPECT_EQ(calls_.probe, 1);
  EXPECT_EQ(calls_.synchronize, 1);
}

TEST(DeviceRegistrationTest, AnOutOfTreeTypeRegistersWithItsHooksInOneEntry) {
  Calls calls;
  DeviceTypeTraits npu;
  npu.name = "fakegpu";
  npu.takes_index = true;
  npu.distributed_backend = "fakeccl";
  ASSERT_TRUE(RegisterDeviceType(npu, std::make_unique<FakeHooks>(&calls)).ok());
  const DeviceTypeTraits* entry = FindDeviceType("fakegpu");
  ASSERT_NE(entry, nullptr);
  ASSERT_NE(entry->hooks, nullptr);
  EXPECT_EQ(&HooksFor("fakegpu"), entry->hooks.get());
  EXPECT_EQ(HooksFor("fakegpu").Count(), 2);
  // A second registration of the name, with or without hooks, and second hooks are refused, naming it.
  EXPECT_EQ(RegisterDeviceType(npu, std::make_unique<FakeHooks>(&calls)).message(),
            "device type 'fakegpu' is registered twice");
  EXPECT_EQ(RegisterDeviceHooks(std::make_unique<FakeHooks>(&calls)).message(),
            "device hooks for 'fakegpu' registered twice");
  UnregisterDeviceType("fakegpu");
  EXPECT_EQ(FindDeviceType("fakegpu"), nullptr);

  // Hooks must serve the type they are registered with.
  npu.name = "othergpu";
  Status mismatched = RegisterDeviceType(npu, std::make_unique<FakeHooks>(&calls));
  EXPECT_EQ(mismatched.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(mismatched.message().find("its hooks serve 'fakegpu'"), std::string::npos) << mismatched.message();
  EXPECT_EQ(FindDeviceType("othergpu"), nullptr);
}

TEST(DeviceRegistrationTest, BuiltInTypesHoldTheirHooksAndRefuseSecondOnes) {
  for (const DeviceTypeTraits& t : DeviceTypes()) {
    HooksFor(t.name);
    EXPECT_NE(t.hooks, nullptr) << t.name;
  }
  class SecondCpuHooks final : public DeviceHooks {
   public:
    std::string type() const override { return "cpu"; }
    int Count() const override { return 1; }
    void Probe(int, DeviceInfo*) const override {}
    std::optional<MemoryReading> PeakMemory(int) const override { return std::nullopt; }
  };
  EXPECT_EQ(RegisterDeviceHooks(std::make_unique<SecondCpuHooks>()).message(), "device hooks for 'cpu' registered twice");
  UnregisterDeviceHooks("cpu");  // built-in types keep their hooks
  EXPECT_EQ(HooksFor("cpu").Count(), 1);
  EXPECT_EQ(dynamic_cast<const SecondCpuHooks*>(&HooksFor("cpu")), nullptr);
}

TEST(DeviceRegistrationTest, TorchDeviceTypesFindTheirEntries) {
  ASSERT_NE(DeviceTypeOf(c10::DeviceType::CPU), nullptr);
  EXPECT_EQ(DeviceTypeOf(c10::DeviceType::CPU)->name, "cpu");
  EXPECT_FALSE(DeviceTypeOf(c10::DeviceType::CPU)->own_generator);
  EXPECT_TRUE(DeviceTypeOf(c10::DeviceType::CPU)->native_gqa_attention);
  ASSERT_NE(DeviceTypeOf(c10::DeviceType::CUDA), nullptr);
  EXPECT_EQ(DeviceTypeOf(c10::DeviceType::CUDA)->name, "cuda");
  EXPECT_TRUE(DeviceTypeOf(c10::DeviceType::CUDA)->own_generator);
  EXPECT_TRUE(DeviceTypeOf(c10::DeviceType::CUDA)->native_gqa_attention);
  EXPECT_EQ(DeviceTypeOf(c10::DeviceType::Vulkan), nullptr);  // a LibTorch type the table does not know
}

TEST(DeviceProbeTest, ProbeAllFindsCpuFirstAndCudaWhenPresent) {
  std::vector<DeviceInfo> devices = ProbeAllDevices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices.front().id, "cpu");
  for (const DeviceInfo& d : devices) EXPECT_NE(d.type, "meta");
  if (!torch::cuda::is_available()) return;
  ASSERT_GE(devices.size(), 2u);
  EXPECT_EQ(devices[1].id, "cuda:0");
  EXPECT_GT(devices[1].total_memory_bytes, 0);
  EXPECT_TRUE(devices[1].fp16_matmul_backward);
}

}  // namespace
}  // namespace tmx
