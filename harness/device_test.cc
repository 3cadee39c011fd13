#include "harness/device.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace tmx {
namespace {

TEST(DeviceTest, ParsesEveryForm) {
  struct Case {
    std::string text, canonical;
  } cases[] = {{"cpu", "cpu"}, {"cuda", "cuda"}, {"cuda:1", "cuda:1"}, {"mps", "mps"},
               {"xpu", "xpu"}, {"xpu:0", "xpu:0"}, {"meta", "meta"},   {"auto", "auto"}};
  for (const Case& c : cases) {
    StatusOr<DeviceSpec> spec = ParseDevice(c.text);
    ASSERT_TRUE(spec.ok()) << c.text << ": " << spec.status().ToString();
    EXPECT_EQ(spec->ToString(), c.canonical);
  }
}

TEST(DeviceTest, RejectsBadDevicesWithHint) {
  EXPECT_EQ(ParseDevice("cdua").status().message(),
            "unknown device 'cdua'; did you mean 'cuda'? (accepted: cpu, cuda, cuda:N, mps, xpu, xpu:N, meta, auto)");
  EXPECT_EQ(ParseDevice("cpu:0").status().message(),
            "bad device 'cpu:0': only cuda and xpu take an index, written as cuda:0 (accepted: cpu, cuda, cuda:N, mps, "
            "xpu, xpu:N, meta, auto)");
  EXPECT_FALSE(ParseDevice("cuda:x").ok());
  EXPECT_FALSE(ParseDevice("").ok());
}

TEST(DeviceTest, CpuIsProbedByRunningOps) {
  const std::vector<DeviceInfo>& devices = AvailableDevices();
  ASSERT_FALSE(devices.empty());
  const DeviceInfo& cpu = devices.front();
  EXPECT_EQ(cpu.id, "cpu");
  EXPECT_TRUE(cpu.probed);
  EXPECT_GT(cpu.total_memory_bytes, int64_t{1} << 28);
  EXPECT_TRUE(cpu.memory_stats);
  // LibTorch runs bf16 matmul with backward on every x86-64 CPU it supports.
  EXPECT_TRUE(cpu.bf16_matmul_backward) << (cpu.notes.empty() ? "" : cpu.notes.front());
  EXPECT_EQ(cpu.distributed_backend, "gloo");
}

TEST(DeviceTest, AutoPrefersAcceleratorsAndMissingDeviceIsExplained) {
  DeviceInfo cpu;
  cpu.id = "cpu";
  DeviceInfo cuda;
  cuda.id = "cuda:0";
  cuda.type = DeviceType::kCuda;
  cuda.index = 0;
  DeviceSpec automatic;
  automatic.is_auto = true;
  EXPECT_EQ(ResolveDevice(automatic, {cpu, cuda})->id, "cuda:0");
  EXPECT_EQ(ResolveDevice(automatic, {cpu})->id, "cpu");
  EXPECT_EQ(ResolveDevice(*ParseDevice("cuda"), {cpu, cuda})->id, "cuda:0");
  StatusOr<DeviceInfo> missing = ResolveDevice(*ParseDevice("cuda:1"), {cpu, cuda});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().ExitCode(), 2);
  EXPECT_EQ(missing.status().message(),
            "device 'cuda:1' is not available on this machine (available: cpu, cuda:0); override it with device=cpu or "
            "device=auto");
}

TEST(DeviceTest, CudaDevicesAreProbedWhenPresent) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  const std::vector<DeviceInfo>& devices = AvailableDevices();
  ASSERT_GE(devices.size(), 2u);
  const DeviceInfo& cuda = devices[1];
  EXPECT_EQ(cuda.id, "cuda:0");
  EXPECT_GT(cuda.total_memory_bytes, 0);
  EXPECT_TRUE(cuda.fp16_matmul_backward);
}

}  // namespace
}  // namespace tmx

namespace tmx {
namespace {

TEST(DeviceTest, JsonRoundTrip) {
  DeviceInfo d;
  d.id = "cuda:1";
  d.type = DeviceType::kCuda;
  d.index = 1;
  d.name = "NVIDIA H200";
  d.total_memory_bytes = int64_t{141} << 30;
  d.bf16_matmul_backward = true;
  d.memory_stats = true;
  d.distributed_backend = "nccl";
  d.notes = {"fp16 matmul+backward raised: x"};
  StatusOr<DeviceInfo> back = DeviceInfoFromJson(DeviceInfoToJson(d));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->id, "cuda:1");
  EXPECT_EQ(back->type, DeviceType::kCuda);
  EXPECT_EQ(back->index, 1);
  EXPECT_EQ(back->name, d.name);
  EXPECT_EQ(back->total_memory_bytes, d.total_memory_bytes);
  EXPECT_TRUE(back->bf16_matmul_backward);
  EXPECT_FALSE(back->fp16_matmul_backward);
  EXPECT_EQ(back->notes, d.notes);
  EXPECT_FALSE(DeviceInfoFromJson({{"id", "tpu"}}).ok());
}

}  // namespace
}  // namespace tmx
