// Device plugins: shared libraries that add a device type to this program's device table, loaded by `tune` and
// `tune-matrix` from `--device-plugin PATH` (repeatable, anywhere on the command line: a global option) and from
// TM_DEVICE_PLUGIN (colon-separated paths), and by every child process they start (the loader sets
// TM_DEVICE_PLUGIN to the absolute paths it loaded, which children inherit).
//
// A plugin is an out-of-tree PyTorch backend (PrivateUse1 renamed, as PyTorch's OpenReg test backend does)
// together with its device-table entry. It exports one C entry point,
//
//   extern "C" void tm_device_plugin_register(tmx::DevicePluginRegistrar* registrar);
//
// which calls registrar->Register(traits, hooks) once, renames PrivateUse1 (c10::register_privateuse1_backend)
// and registers its DeviceGuardImpl and at::PrivateUse1HooksInterface (and allocator, kernels: whatever its
// tensors need). The loader refuses it, naming the file and the fix, when the file cannot be loaded, exports no
// entry point, registers a name already taken, leaves PrivateUse1 under another name, or lacks a required hook
// (DeviceHooks, DeviceGuardImpl, PrivateUse1HooksInterface: autograd asks the last on every backward).
//
// Why the plugin binds to the host program instead of linking a copy of the harness: the device table is a
// process-wide object in tm_harness_core, a static library. A plugin that linked its own copy would register
// into a second table the program never reads. So `tune`, `tune-matrix` and the tests that load plugins export
// their tmx:: symbols (a linker dynamic list, harness/device_plugin_exports.map: tmx:: only, so that the
// program's copies of template code never take the place of LibTorch's), and the plugin's references to tmx::
// functions (AcceleratorHooks' methods and vtable, ProbeDtypes) bind to the program's one copy. A plugin needs
// only the headers (device_types.h, device_hooks.h and what they include) and LibTorch, which the program has
// already loaded: dlopen finds the same libtorch by its soname. Passing a table of function pointers instead
// would not do: a plugin's hooks derive from AcceleratorHooks, whose vtable and methods live in the program.
// Registration itself goes through the registrar's virtual method, so the loader sees what a plugin registered.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/device_types.h"

namespace tmx {

class DeviceHooks;

// The name of the C function every plugin exports.
inline constexpr const char* kDevicePluginEntryPoint = "tm_device_plugin_register";
// The environment variable listing plugins (colon-separated paths), read by both programs and set for children.
inline constexpr const char* kDevicePluginEnv = "TM_DEVICE_PLUGIN";
// The global option naming one plugin.
inline constexpr const char* kDevicePluginFlag = "--device-plugin";

// What a plugin's entry point is handed. Register is virtual so that a plugin calls it through the object,
// whichever program loads it.
class DevicePluginRegistrar {
 public:
  virtual ~DevicePluginRegistrar() = default;
  // Adds `traits` with `hooks` to the device table. The first error is kept and refuses the plugin.
  virtual Status Register(DeviceTypeTraits traits, std::unique_ptr<DeviceHooks> hooks) = 0;
};

// Loads the plugin at `path` (dlopen, the entry point, the checks above). On success returns the name of the
// device type it registered. Every failure names the path, the problem and the fix; a plugin refused after its
// entry point ran has its type removed from the table again.
StatusOr<std::string> LoadDevicePlugin(const std::string& path);

// The paths TM_DEVICE_PLUGIN lists (empty entries skipped).
std::vector<std::string> DevicePluginsFromEnvironment();

// Takes every `--device-plugin PATH` and `--device-plugin=PATH` out of `args` and appends the paths to
// `paths`. InvalidArgument when the flag has no path after it.
Status ExtractDevicePluginFlags(std::vector<std::string>* args, std::vector<std::string>* paths);

// The global option's handling for both programs: takes the flags out of `args`, loads TM_DEVICE_PLUGIN's
// plugins and then the flags' (each real path once; one already loaded in this process is skipped), and sets
// TM_DEVICE_PLUGIN to the absolute paths of all of them so that child processes load the same. Returns false
// after printing the refusal to `err` ("<program>: device plugin <path>: ..."); the caller exits with
// kExitUsage.
bool LoadDevicePluginsForCommandLine(const std::string& program, std::vector<std::string>* args,
                                     std::ostream& err);

// One line for the programs' help: the global option and the variable.
std::string DevicePluginHelp();

}  // namespace tmx
