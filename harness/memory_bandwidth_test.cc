#include "harness/memory_bandwidth.h"

#include <gtest/gtest.h>

#include "harness/device_hooks.h"

namespace tmx {
namespace {

DeviceInfo Cpu() { return ProbeDevice(*ParseDeviceSelector("cpu")).value(); }

TEST(MemoryBandwidthTest, CopyAndTriadOnTheHostArePlausibleAndTravelAsJson) {
  DeviceInfo cpu = Cpu();
  MemoryBandwidthOptions o;
  o.buffer_bytes = int64_t{64} << 20;  // beyond this machine's caches, quicker than the default
  o.repeats = 3;
  ASSERT_TRUE(MeasureMemoryBandwidth(o, &cpu).ok());
  ASSERT_EQ(cpu.memory_bandwidth.size(), 2u);
  // Any host memory of this century streams between 1 GB/s and 2 TB/s (a laptop's DDR4 ~20, a server socket's
  // DDR5 ~400); a number outside says bytes or seconds were miscounted.
  for (const char* kernel : {"copy", "triad"}) {
    EXPECT_GT(cpu.memory_bandwidth.at(kernel), 1e9) << kernel;
    EXPECT_LT(cpu.memory_bandwidth.at(kernel), 2e12) << kernel;
  }
  EXPECT_EQ(cpu.BestBandwidth(), std::max(cpu.memory_bandwidth.at("copy"), cpu.memory_bandwidth.at("triad")));
  StatusOr<DeviceInfo> back = DeviceInfoFromJson(DeviceInfoToJson(cpu));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->memory_bandwidth, cpu.memory_bandwidth);
  EXPECT_FALSE(DeviceInfoToJson(Cpu()).contains("memory_bandwidth"));  // not measured: not written
  EXPECT_EQ(Cpu().BestBandwidth(), 0);
}

TEST(MemoryBandwidthTest, ADeviceThatCannotHoldTheBuffersIsSkippedWithANote) {
  DeviceInfo cpu = Cpu();
  MemoryBandwidthOptions o;
  o.buffer_bytes = int64_t{1} << 62;  // no machine allocates three of these
  ASSERT_TRUE(MeasureMemoryBandwidth(o, &cpu).ok());
  EXPECT_TRUE(cpu.memory_bandwidth.empty());
  ASSERT_FALSE(cpu.notes.empty());
  EXPECT_EQ(cpu.notes.back().rfind("memory bandwidth not measured: ", 0), 0u) << cpu.notes.back();
  o.repeats = 0;
  EXPECT_EQ(MeasureMemoryBandwidth(o, &cpu).message(), "memory bandwidth: repeats is 0; fix: time at least one pass");
}

}  // namespace
}  // namespace tmx
