// A device plugin written outside the tree needs no change to harness/, recipes/ or matrix/: the test builds
// tests/device_plugin_project as a CMake project of its own against the device-plugin SDK this build generated
// (its headers and package file only), and loads the library into `tune devices` and `tune-matrix plan`.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli_exec.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

using test::Exec;
using test::Result;

TEST(DevicePluginE2eTest, APluginBuiltOutOfTreeAgainstTheSdkIsADeviceOfTuneAndTheMatrix) {
  test::ScratchDir dir("tm_plugin_project");
  const std::string build = dir.path() + "/build";
  std::vector<std::string> configure = {TM_CMAKE_COMMAND,
                                        "-S",
                                        std::string(TM_SOURCE_DIR) + "/tests/device_plugin_project",
                                        "-B",
                                        build,
                                        "-G",
                                        TM_CMAKE_GENERATOR,
                                        "-DCMAKE_BUILD_TYPE=Release",
                                        std::string("-DCMAKE_CXX_COMPILER=") + TM_CXX_COMPILER,
                                        std::string("-DTuneMatrixDevicePlugin_DIR=") + TM_DEVICE_PLUGIN_SDK};
  if (!std::string(TM_CCACHE).empty()) configure.push_back(std::string("-DCMAKE_CXX_COMPILER_LAUNCHER=") + TM_CCACHE);
  Result configured = Exec(configure);
  ASSERT_EQ(configured.code, 0) << configured.output;
  Result built = Exec({TM_CMAKE_COMMAND, "--build", build});
  ASSERT_EQ(built.code, 0) << built.output;
  const std::string plugin = build + "/libextdev.so";

  Result devices = Exec({test::kTune, "--device-plugin", plugin, "devices"});
  EXPECT_EQ(devices.code, 0) << devices.output;
  EXPECT_NE(devices.output.find("\nextdev:0  test device plugin  memory 1.00 GiB"), std::string::npos)
      << devices.output;

  // The matrix discovers devices through a child `tune devices --json`, which loads the plugin too.
  Result plan = Exec({test::kMatrix, "plan", "--device-plugin", plugin, "--devices", "extdev", "--configs",
                      "tiny/lora_single_device"});
  EXPECT_EQ(plan.code, 0) << plan.output;
  EXPECT_NE(plan.output.find("extdev:0 (torch "), std::string::npos) << plan.output;
  Result without = Exec({test::kMatrix, "plan", "--devices", "extdev", "--configs", "tiny/lora_single_device"});
  EXPECT_EQ(without.code, 2) << without.output;
  EXPECT_NE(without.output.find("extdev"), std::string::npos) << without.output;
}

}  // namespace
}  // namespace tmx
