#include "harness/device.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

DeviceInfo Present(const std::string& id) {
  DeviceSelector s = *ParseDeviceSelector(id);
  DeviceInfo d;
  d.id = id;
  d.type = s.type;
  d.index = s.index;
  d.probed = true;
  return d;
}

TEST(DeviceTest, AutoPrefersTheLowestAutoRankAndMissingDeviceIsExplained) {
  DeviceInfo cpu = Present("cpu"), cuda = Present("cuda:0"), mps = Present("mps");
  DeviceSelector automatic;
  automatic.is_auto = true;
  EXPECT_EQ(ResolveDevice(automatic, {cpu, cuda})->id, "cuda:0");
  EXPECT_EQ(ResolveDevice(automatic, {cpu, mps})->id, "mps");
  EXPECT_EQ(ResolveDevice(automatic, {cpu})->id, "cpu");
  EXPECT_EQ(ResolveDevice(*ParseDeviceSelector("cuda"), {cpu, cuda})->id, "cuda:0");
  StatusOr<DeviceInfo> missing = ResolveDevice(*ParseDeviceSelector("cuda:1"), {cpu, cuda});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().ExitCode(), 2);
  EXPECT_EQ(missing.status().message(),
            "device 'cuda:1' is not available on this machine (available: cpu, cuda:0); override it with device=cpu or "
            "device=auto");
  EXPECT_EQ(LookupAmong({cpu})(*ParseDeviceSelector("cpu"))->id, "cpu");
}

TEST(DeviceTest, NominalDevicesTakeTheirTraitsFromTheTable) {
  DeviceInfo xpu = NominalDeviceInfo(*ParseDeviceSelector("xpu:1"));
  EXPECT_EQ(xpu.id, "xpu:1");
  EXPECT_EQ(xpu.type, "xpu");
  EXPECT_EQ(xpu.index, 1);
  EXPECT_FALSE(xpu.probed);
  EXPECT_EQ(xpu.distributed_backend, "xccl");
  EXPECT_TRUE(xpu.bf16_matmul_backward);
  DeviceInfo meta = NominalDeviceInfo(*ParseDeviceSelector("meta"));
  EXPECT_FALSE(meta.bf16_matmul_backward);
  EXPECT_FALSE(meta.traits().trains);
}

TEST(DeviceTest, JsonRoundTrip) {
  DeviceInfo d = Present("cuda:1");
  d.name = "NVIDIA H200";
  d.total_memory_bytes = int64_t{141} << 30;
  d.bf16_matmul_backward = true;
  d.memory_stats = true;
  d.distributed_backend = "nccl";
  d.notes = {"fp16 matmul+backward raised: x"};
  StatusOr<DeviceInfo> back = DeviceInfoFromJson(DeviceInfoToJson(d));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->id, "cuda:1");
  EXPECT_EQ(back->type, "cuda");
  EXPECT_EQ(back->index, 1);
  EXPECT_EQ(back->name, d.name);
  EXPECT_EQ(back->total_memory_bytes, d.total_memory_bytes);
  EXPECT_TRUE(back->bf16_matmul_backward);
  EXPECT_FALSE(back->fp16_matmul_backward);
  EXPECT_EQ(back->notes, d.notes);
  EXPECT_FALSE(DeviceInfoFromJson({{"id", "tpu"}}).ok());
  EXPECT_FALSE(DeviceInfoFromJson({{"id", "auto"}}).ok());
}

}  // namespace
}  // namespace tmx
