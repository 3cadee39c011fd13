#include "harness/device_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include <c10/core/DeviceType.h>
#include <gtest/gtest.h>

#include "harness/device_hooks.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

std::string Plugin(const std::string& target) { return std::string(TM_TEST_PLUGIN_DIR) + "/lib" + target + ".so"; }

struct Ran {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs a shell command line, its output merged.
Ran RunShell(const std::string& command) {
  Ran ran;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return ran;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) ran.output.append(buffer, n);
  int status = pclose(pipe);
  ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

// `tune devices` with the given global options, TM_DEVICE_PLUGIN cleared unless `env` sets it.
Ran TuneDevices(const std::string& options, const std::string& env = "") {
  return RunShell("env -u TM_DEVICE_PLUGIN " + env + " " + TM_TUNE_PATH + " " + options + " devices");
}

TEST(DevicePluginTest, FlagsAreTakenOutAnywhereInBothSpellings) {
  std::vector<std::string> args = {"--device-plugin", "a.so", "run", "x", "--device-plugin=b.so", "device=sim"};
  std::vector<std::string> paths = {"env.so"};
  ASSERT_TRUE(ExtractDevicePluginFlags(&args, &paths).ok());
  EXPECT_EQ(args, (std::vector<std::string>{"run", "x", "device=sim"}));
  EXPECT_EQ(paths, (std::vector<std::string>{"env.so", "a.so", "b.so"}));
}

TEST(DevicePluginTest, AFlagWithoutAPathIsRefusedNamingTheFix) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"devices", "--device-plugin"}, {"--device-plugin", "--json"}, {"--device-plugin=", "devices"}}) {
    std::vector<std::string> paths;
    Status s = ExtractDevicePluginFlags(&args, &paths);
    EXPECT_FALSE(s.ok()) << args.front();
    EXPECT_NE(s.message().find("shared library"), std::string::npos) << s.message();
  }
}

TEST(DevicePluginTest, TheVariableListsColonSeparatedPaths) {
  setenv(kDevicePluginEnv, "/a/one.so::/b/two.so", 1);
  EXPECT_EQ(DevicePluginsFromEnvironment(), (std::vector<std::string>{"/a/one.so", "/b/two.so"}));
  unsetenv(kDevicePluginEnv);
  EXPECT_TRUE(DevicePluginsFromEnvironment().empty());
}

TEST(DevicePluginTest, AMissingFileIsRefusedNamingThePath) {
  StatusOr<std::string> r = LoadDevicePlugin("/nonexistent/libnothing.so");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device plugin /nonexistent/libnothing.so: No such file"), std::string::npos)
      << r.status().message();
}

TEST(DevicePluginTest, AFileThatIsNotALibraryIsRefusedWithDlerrorsText) {
  test::ScratchDir dir("tm_plugin");
  const std::string path = dir.path() + "/libfake.so";
  std::ofstream(path) << std::string(256, 'x');  // longer than an ELF header
  StatusOr<std::string> r = LoadDevicePlugin(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path + ": cannot be loaded: "), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("invalid ELF header"), std::string::npos) << r.status().message();
}

TEST(DevicePluginTest, ALibraryWithoutTheEntryPointIsRefused) {
  StatusOr<std::string> r = LoadDevicePlugin(Plugin("tm_test_plugin_no_entry"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exports no tm_device_plugin_register"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(FindDeviceType("noentry"), nullptr);
}

// In this process: the plugin's type lands in this program's own table with its hooks, PrivateUse1 carries its
// name, a second load of the same file is the first, and children are told to load it by its absolute path.
TEST(DevicePluginTest, APluginRegistersIntoTheProgramsOwnTableAndChildrenInheritIt) {
  unsetenv(kDevicePluginEnv);
  std::vector<std::string> args = {"devices", "--device-plugin", Plugin("tm_test_plugin")};
  std::ostringstream err;
  ASSERT_TRUE(LoadDevicePluginsForCommandLine("tune", &args, err)) << err.str();
  EXPECT_EQ(args, (std::vector<std::string>{"devices"}));
  const DeviceTypeTraits* traits = FindDeviceType("testdev");
  ASSERT_NE(traits, nullptr);
  EXPECT_EQ(HooksFor("testdev").Count(), 1);
  EXPECT_EQ(DeviceTypeOf(c10::DeviceType::PrivateUse1), traits);
  StatusOr<std::string> again = LoadDevicePlugin(Plugin("tm_test_plugin"));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, "testdev");
  const char* env = std::getenv(kDevicePluginEnv);
  ASSERT_NE(env, nullptr);
  EXPECT_EQ(std::string(env).front(), '/');
  EXPECT_NE(std::string(env).find("libtm_test_plugin.so"), std::string::npos) << env;
}

TEST(DevicePluginTest, TuneDevicesListsAPluginsDeviceFromTheFlagOrTheVariable) {
  Ran by_flag = TuneDevices("--device-plugin " + Plugin("tm_test_plugin"));
  EXPECT_EQ(by_flag.exit_code, 0) << by_flag.output;
  EXPECT_NE(by_flag.output.find("test device plugin"), std::string::npos) << by_flag.output;
  Ran by_env = TuneDevices("", "TM_DEVICE_PLUGIN=" + Plugin("tm_test_plugin"));
  EXPECT_EQ(by_env.exit_code, 0) << by_env.output;
  EXPECT_NE(by_env.output.find("test device plugin"), std::string::npos) << by_env.output;
  Ran without = TuneDevices("");
  EXPECT_EQ(without.exit_code, 0) << without.output;
  EXPECT_EQ(without.output.find("test device plugin"), std::string::npos) << without.output;
  // cpu probes as it does without the plugin (its matmul backward once raised for want of PrivateUse1's hooks).
  auto cpu_lines = [](const std::string& output) { return output.substr(0, output.find("\ntestdev")); };
  EXPECT_EQ(cpu_lines(by_flag.output), cpu_lines(without.output.substr(0, without.output.find("\nLibTorch"))));
}

// Each refusal: exit 2, one message naming the plugin's path, the problem and the fix.
TEST(DevicePluginTest, TuneRefusesABrokenPluginNamingItAndTheFix) {
  struct Case {
    std::string options;
    std::string path;  // the plugin the message must name
    std::string problem;
  };
  const std::vector<Case> cases = {
      {"--device-plugin " + Plugin("tm_test_plugin_cuda"), Plugin("tm_test_plugin_cuda"),
       "device type 'cuda' is taken (by a built-in type); give the plugin's device type"},
      {"--device-plugin " + Plugin("tm_test_plugin_no_guard"), Plugin("tm_test_plugin_no_guard"),
       "registers no DeviceGuardImpl for PrivateUse1 (a required hook"},
      {"--device-plugin " + Plugin("tm_test_plugin_no_torch_hooks"), Plugin("tm_test_plugin_no_torch_hooks"),
       "registers no PrivateUse1HooksInterface (a required hook"},
      {"--device-plugin " + Plugin("tm_test_plugin_no_generator"), Plugin("tm_test_plugin_no_generator"),
       "has no getDefaultGenerator (a required hook"},
      {"--device-plugin " + Plugin("tm_test_plugin_no_hooks"), Plugin("tm_test_plugin_no_hooks"),
       "without its DeviceHooks (a required hook)"},
      {"--device-plugin " + Plugin("tm_test_plugin_no_entry"), Plugin("tm_test_plugin_no_entry"),
       "exports no tm_device_plugin_register"},
      {"--device-plugin " + Plugin("tm_test_plugin") + " --device-plugin " + Plugin("tm_test_plugin_other"),
       Plugin("tm_test_plugin_other"), "PrivateUse1 was already 'testdev'"},
      {"--device-plugin /nonexistent/lib.so", "/nonexistent/lib.so", "No such file"},
  };
  for (const Case& c : cases) {
    Ran ran = TuneDevices(c.options);
    EXPECT_EQ(ran.exit_code, 2) << c.options << "\n" << ran.output;
    EXPECT_NE(ran.output.find("tune: device plugin " + c.path + ": "), std::string::npos) << ran.output;
    EXPECT_NE(ran.output.find(c.problem), std::string::npos) << ran.output;
  }
}

}  // namespace
}  // namespace tmx
