#include "harness/matmul_peak.h"

#include <ATen/Parallel.h>

#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/device_hooks.h"
#include "harness/registry.h"
#include "harness/tune_cli.h"

namespace tmx {
namespace {

DeviceInfo Cpu() {
  StatusOr<DeviceInfo> cpu = ProbeDevice(*ParseDeviceSelector("cpu"));
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
  return *cpu;
}

MatmulPeakOptions Quick() {
  MatmulPeakOptions o;
  o.sizes = {64, 128};
  o.seconds_per_size = 0.02;
  return o;
}

TEST(MatmulPeakTest, MeasuresEachDtypeTheDeviceMultipliesAtItsThreads) {
  DeviceInfo cpu = Cpu();
  cpu.bf16_matmul_backward = true;
  ASSERT_TRUE(MeasureMatmulPeaks(Quick(), &cpu).ok());
  ASSERT_EQ(cpu.matmul_peak_flops.size(), 2u);
  EXPECT_GT(cpu.matmul_peak_flops.at("bf16"), 0);
  EXPECT_GT(cpu.matmul_peak_flops.at("fp32"), 0);
  EXPECT_EQ(cpu.matmul_peak_threads, at::get_num_threads());

  DeviceInfo without = Cpu();  // a device whose bf16 probe failed: no bf16 peak, the rest measured
  without.bf16_matmul_backward = false;
  ASSERT_TRUE(MeasureMatmulPeaks(Quick(), &without).ok());
  EXPECT_EQ(without.matmul_peak_flops.count("bf16"), 0u);
  EXPECT_EQ(without.matmul_peak_flops.count("fp32"), 1u);

  // What tune-matrix reads back from `tune devices --json --matmul-peak`.
  StatusOr<DeviceInfo> back = DeviceInfoFromJson(DeviceInfoToJson(cpu));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->matmul_peak_flops, cpu.matmul_peak_flops);
  EXPECT_EQ(back->matmul_peak_threads, cpu.matmul_peak_threads);
  EXPECT_FALSE(DeviceInfoToJson(Cpu()).contains("matmul_peak_flops"));  // not measured: not written
}

TEST(MatmulPeakTest, AnUnknownDtypeIsRefusedByName) {
  DeviceInfo cpu = Cpu();
  MatmulPeakOptions o = Quick();
  o.dtypes = {"fp8"};
  Status s = MeasureMatmulPeaks(o, &cpu);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "matmul peak: dtype 'fp8' is not one of fp32, bf16, fp16");
}

TEST(MatmulPeakTest, TuneDevicesMeasuresItWhenAsked) {
  Registry registry;
  std::ostringstream out, err;
  ASSERT_EQ(RunTune(registry, {"devices", "--device", "cpu", "--json", "--matmul-peak"}, out, err), 0) << err.str();
  nlohmann::json j = nlohmann::json::parse(out.str());
  ASSERT_EQ(j.size(), 1u);
  ASSERT_TRUE(j[0].contains("matmul_peak_flops")) << out.str();
  EXPECT_GT(j[0]["matmul_peak_flops"]["fp32"].get<double>(), 0);
  std::ostringstream plain, plain_err;
  ASSERT_EQ(RunTune(registry, {"devices", "--device", "cpu", "--json"}, plain, plain_err), 0) << plain_err.str();
  EXPECT_FALSE(nlohmann::json::parse(plain.str())[0].contains("matmul_peak_flops"));  // not measured unasked
}

}  // namespace
}  // namespace tmx
