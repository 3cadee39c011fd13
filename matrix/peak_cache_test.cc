#include "matrix/peak_cache.h"

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

DeviceInfo Device(const std::string& id, double bf16) {
  DeviceInfo d;
  d.id = id;
  d.type = id.substr(0, id.find(':'));
  if (bf16 > 0) {
    d.matmul_peak_flops = {{"bf16", bf16}, {"fp32", bf16 / 4}};
    d.matmul_peak_threads = 2;
    d.memory_bandwidth = {{"copy", bf16 / 100}, {"triad", bf16 / 90}};
  }
  return d;
}

TEST(PeakCacheTest, PeaksKeptWhenQuietAreReadBackByDevice) {
  test::ScratchDir scratch{"peak_cache_test"};
  const std::string path = scratch.path() + "/peaks/host_amx_torch2.11.0.json";
  std::vector<DeviceInfo> measured = {Device("cpu", 2.1e12), Device("cuda:0", 9e14), Device("cuda:1", 0)};
  ASSERT_TRUE(SavePeaks(path, measured).ok());
  std::vector<DeviceInfo> busy = {Device("cpu", 0), Device("cuda:1", 0), Device("xpu:0", 0)};
  StatusOr<int> set = LoadPeaks(path, &busy);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(*set, 1);  // cpu; cuda:1 had none, xpu:0 is not in the file
  EXPECT_EQ(busy[0].matmul_peak_flops.at("bf16"), 2.1e12);
  EXPECT_EQ(busy[0].matmul_peak_flops.at("fp32"), 2.1e12 / 4);
  EXPECT_EQ(busy[0].matmul_peak_threads, 2);
  EXPECT_EQ(busy[0].memory_bandwidth.at("copy"), 2.1e10);  // the bandwidth is kept beside the peak
  EXPECT_EQ(busy[0].BestBandwidth(), 2.1e12 / 90);
  EXPECT_TRUE(busy[1].matmul_peak_flops.empty());
  // A device measured now at other threads (a lane's) keeps its own reading.
  std::vector<DeviceInfo> lane = {Device("cpu", 1e12)};
  lane[0].matmul_peak_threads = 1;
  EXPECT_EQ(LoadPeaks(path, &lane).value(), 0);
  EXPECT_EQ(lane[0].matmul_peak_flops.at("bf16"), 1e12);
  // No file yet: nothing set, no error.
  EXPECT_EQ(LoadPeaks(scratch.path() + "/none.json", &busy).value(), 0);
}

TEST(PeakCacheTest, ADamagedFileIsRefusedNamingTheField) {
  test::ScratchDir scratch{"peak_cache_test"};
  const std::string path = scratch.path() + "/peaks.json";
  ASSERT_TRUE(WriteFileAtomically(path, R"({"cpu": {"matmul_peak_flops": {"bf16": -1}, "matmul_peak_threads": 2}})").ok());
  std::vector<DeviceInfo> devices = {Device("cpu", 0)};
  StatusOr<int> set = LoadPeaks(path, &devices);
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find(path + ": cpu: matmul_peak_flops.bf16 is not a positive number; fix: delete"),
            std::string::npos)
      << set.status().ToString();
  EXPECT_TRUE(devices[0].matmul_peak_flops.empty());
  ASSERT_TRUE(WriteFileAtomically(path, R"({"cpu": {"matmul_peak_flops": {"bf16": 1e12}, "matmul_peak_threads": 2,
                                            "memory_bandwidth": {"copy": "fast"}}})")
                  .ok());
  set = LoadPeaks(path, &devices);
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("cpu: memory_bandwidth.copy is not a positive number"), std::string::npos)
      << set.status().ToString();
}

TEST(PeakCacheTest, OneFilePerHostClassAndTorch) {
  EXPECT_NE(PeakCachePath("vm", "amx", "2.11.0"), PeakCachePath("vm", "avx2", "2.11.0"));
  EXPECT_NE(PeakCachePath("vm", "amx", "2.11.0"), PeakCachePath("vm", "amx", "2.15.0"));
  const std::string odd = PeakCachePath("../etc/x", "amx", "2.11.0");
  EXPECT_EQ(odd.substr(odd.rfind('/') + 1), ".._etc_x_amx_torch2.11.0.json");
}

}  // namespace
}  // namespace tmx::matrix
