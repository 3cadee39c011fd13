#include "harness/device_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "base/text.h"
#include "harness/device_hooks.h"

namespace tmx {
namespace {

// Plugins loaded in this process: real path -> the device type it registered (so a path given twice, or by
// the flag and the variable, loads once), in load order for TM_DEVICE_PLUGIN.
struct Loaded {
  std::map<std::string, std::string> type_of;
  std::vector<std::string> order;
};
Loaded& LoadedPlugins() {
  static Loaded loaded;
  return loaded;
}

// Which plugin registered each type, for the message when a second one takes its name.
std::string OwnerOf(const std::string& type) {
  for (const auto& [path, name] : LoadedPlugins().type_of) {
    if (name == type) return "plugin " + path;
  }
  return "a built-in type";
}

class Registrar final : public DevicePluginRegistrar {
 public:
  Status Register(DeviceTypeTraits traits, std::unique_ptr<DeviceHooks> hooks) override {
    if (!error_.ok()) return error_;
    const std::string name = traits.name;
    if (!registered_.empty()) {
      return Keep("registers a second device type '" + name + "' after '" + registered_ +
                  "'; a plugin adds one device type (a process has one PrivateUse1 backend)");
    }
    if (hooks == nullptr) {
      return Keep("registers device type '" + name + "' without its DeviceHooks (a required hook); pass "
                  "std::make_unique<YourHooks>() to Register (harness/device_hooks.h)");
    }
    if (FindDeviceType(name) != nullptr) {
      return Keep("device type '" + name + "' is taken (by " + OwnerOf(name) +
                  "); give the plugin's device type and its PrivateUse1 backend another name");
    }
    Status s = RegisterDeviceType(std::move(traits), std::move(hooks));
    if (!s.ok()) return Keep(s.message());
    registered_ = name;
    return Status::OK();
  }
  const Status& error() const { return error_; }
  const std::string& registered() const { return registered_; }

 private:
  Status Keep(const std::string& message) {
    error_ = Status::InvalidArgument(message);
    return error_;
  }
  Status error_;
  std::string registered_;
};

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

Status Refused(const std::string& path, const std::string& problem) {
  return Status::InvalidArgument("device plugin " + path + ": " + problem);
}

// The checks after the entry point ran: PrivateUse1 carries the type's name, has its DeviceGuardImpl and hooks.
Status CheckTorchSide(const std::string& name) {
  const std::string backend = c10::is_privateuse1_backend_registered() ? c10::get_privateuse1_backend() : "";
  if (backend != name) {
    return Status::InvalidArgument("registers device type '" + name + "' but PyTorch's PrivateUse1 backend is " +
                                   (backend.empty() ? "unnamed" : "named '" + backend + "'") +
                                   "; call c10::register_privateuse1_backend(\"" + name +
                                   "\") in the entry point, so tensors on '" + name + "' reach the plugin");
  }
  if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::PrivateUse1)) {
    return Status::InvalidArgument("registers no DeviceGuardImpl for PrivateUse1 (a required hook: devices, "
                                   "streams and synchronisation go through it); register one with "
                                   "C10_REGISTER_GUARD_IMPL(PrivateUse1, YourGuardImpl)");
  }
  // Autograd asks PrivateUse1's hooks on every backward once the backend exists (a cpu matmul's backward
  // raised "Please register PrivateUse1HooksInterface" in `tune devices` without them).
  if (!at::isPrivateUse1HooksRegistered()) {
    return Status::InvalidArgument("registers no PrivateUse1HooksInterface (a required hook: autograd asks it on "
                                   "every backward, cpu's included); register one with "
                                   "at::RegisterPrivateUse1HooksInterface(new YourHooks())");
  }
  // torch::manual_seed seeds every PrivateUse1 device's default generator (the cpu probe's matmul raised
  // "implement getDefaultGenerator" without one).
  try {
    (void)at::detail::getPrivateUse1Hooks().getDefaultGenerator(0);
  } catch (const c10::Error& e) {
    return Status::InvalidArgument("its PrivateUse1HooksInterface has no getDefaultGenerator (a required hook: "
                                   "torch::manual_seed seeds every device's generator): " +
                                   FirstLine(e.what_without_backtrace()) + "; override it to return a generator "
                                   "of the device (OpenReg's derives from at::CPUGeneratorImpl)");
  }
  return Status::OK();
}

// Runs the entry point; exceptions (c10::Error from a second PrivateUse1 rename, say) become the refusal.
Status CallEntryPoint(void (*entry)(DevicePluginRegistrar*), Registrar* registrar) {
  const std::string backend_before = c10::is_privateuse1_backend_registered() ? c10::get_privateuse1_backend() : "";
  std::string failure;
  try {
    entry(registrar);
  } catch (const c10::Error& e) {
    failure = e.what_without_backtrace();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (failure.empty()) return Status::OK();
  std::string message = "its entry point failed: " + FirstLine(failure);
  if (!backend_before.empty()) {
    message += " (PrivateUse1 was already '" + backend_before + "', from " + OwnerOf(backend_before) +
               "; a process holds one PrivateUse1 backend: load one such plugin)";
  }
  return Status::InvalidArgument(message);
}

}  // namespace

StatusOr<std::string> LoadDevicePlugin(const std::string& path) {
  char real[PATH_MAX];
  if (realpath(path.c_str(), real) == nullptr) {
    return Refused(path, std::string(std::strerror(errno)) +
                             "; give the path of the plugin's shared library (e.g. build/plugins/sim/libtm_sim.so)");
  }
  Loaded& loaded = LoadedPlugins();
  if (auto it = loaded.type_of.find(real); it != loaded.type_of.end()) return it->second;
  // RTLD_NOW: a symbol the program does not export is reported here, not at the first call. Never closed: the
  // plugin's registrations in PyTorch (guard, allocator, kernels) point into it for the life of the process.
  void* handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Refused(path, "cannot be loaded: " + std::string(why ? why : "unknown error") +
                             "; build it as a shared library against this program's LibTorch and headers");
  }
  auto entry = reinterpret_cast<void (*)(DevicePluginRegistrar*)>(dlsym(handle, kDevicePluginEntryPoint));
  if (entry == nullptr) {
    return Refused(path, std::string("exports no ") + kDevicePluginEntryPoint + "; define extern \"C\" void " +
                             kDevicePluginEntryPoint + "(tmx::DevicePluginRegistrar*) (harness/device_plugin.h)");
  }
  Registrar registrar;
  Status status = CallEntryPoint(entry, &registrar);
  if (status.ok() && !registrar.error().ok()) status = registrar.error();
  if (status.ok() && registrar.registered().empty()) {
    status = Status::InvalidArgument("its entry point registered no device type; call registrar->Register(traits, "
                                     "std::make_unique<YourHooks>())");
  }
  if (status.ok()) status = CheckTorchSide(registrar.registered());
  if (!status.ok()) {
    if (!registrar.registered().empty()) UnregisterDeviceType(registrar.registered());
    return Refused(path, status.message());
  }
  loaded.type_of[real] = registrar.registered();
  loaded.order.push_back(real);
  return registrar.registered();
}

std::vector<std::string> DevicePluginsFromEnvironment() {
  const char* value = std::getenv(kDevicePluginEnv);
  return value == nullptr ? std::vector<std::string>{} : SplitList(value, ':');
}

Status ExtractDevicePluginFlags(std::vector<std::string>* args, std::vector<std::string>* paths) {
  const std::string flag = kDevicePluginFlag;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args->size(); ++i) {
    const std::string& a = (*args)[i];
    if (a.rfind(flag + "=", 0) == 0) {
      paths->push_back(a.substr(flag.size() + 1));
    } else if (a == flag) {
      if (i + 1 >= args->size() || (*args)[i + 1].empty() || (*args)[i + 1].rfind("--", 0) == 0) {
        return Status::InvalidArgument(flag + " needs the path of a plugin's shared library after it, e.g. " +
                                       flag + " build/plugins/sim/libtm_sim.so");
      }
      paths->push_back((*args)[++i]);
    } else {
      rest.push_back(a);
    }
  }
  for (const std::string& p : *paths) {
    if (p.empty()) return Status::InvalidArgument(flag + "= names no file; give the path of a plugin's shared library");
  }
  *args = std::move(rest);
  return Status::OK();
}

bool LoadDevicePluginsForCommandLine(const std::string& program, std::vector<std::string>* args,
                                     std::ostream& err) {
  std::vector<std::string> paths = DevicePluginsFromEnvironment();
  Status flags = ExtractDevicePluginFlags(args, &paths);
  if (!flags.ok()) {
    err << program << ": " << flags.message() << "\n";
    return false;
  }
  for (const std::string& path : paths) {
    StatusOr<std::string> type = LoadDevicePlugin(path);
    if (!type.ok()) {
      err << program << ": " << type.status().message() << "\n";
      return false;
    }
  }
  // Children (the matrix's cells, `tune devices` for discovery, the launcher's ranks) inherit the environment.
  if (!LoadedPlugins().order.empty()) setenv(kDevicePluginEnv, JoinStrings(LoadedPlugins().order, ":").c_str(), 1);
  return true;
}

std::string DevicePluginHelp() {
  return std::string("Device plugins: ") + kDevicePluginFlag + " PATH (repeatable, anywhere) or " + kDevicePluginEnv +
         "=PATH[:PATH...] loads a shared library that adds a device type (a PyTorch PrivateUse1 backend).";
}

}  // namespace tmx
