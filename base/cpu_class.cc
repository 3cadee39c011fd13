#include "base/cpu_class.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/text.h"

namespace tmx {
namespace {

// A value of one of the variables and the class it caps the libraries at.
struct CapValue {
  const char* value;
  const char* cap;
};

// ATen's values on x86 (aten/src/ATen/native/DispatchStub.cpp; compared exactly). Its avx512 kernels serve every
// class from avx512 up: the classes above it differ in oneDNN's kernels only.
const std::vector<CapValue>& AtenValues() {
  static const std::vector<CapValue> values = {{"default", "default"}, {"avx2", "avx2"}, {"avx512", "amx"}};
  return values;
}

// oneDNN's ISA names (dnnl_cpu_isa_t; compared exactly, upper case), old and new spellings of one level alike.
const std::vector<CapValue>& OnednnValues() {
  static const std::vector<CapValue> values = {
      {"DEFAULT", "amx"},          {"ALL", "amx"},
      {"SSE41", "default"},        {"AVX", "default"},
      {"AVX2", "avx2"},            {"AVX2_VNNI", "avx2"},
      {"AVX2_VNNI_2", "avx2"},     {"AVX512_CORE", "avx512"},
      {"AVX512_CORE_VNNI", "avx512"}, {"AVX512_CORE_BF16", "avx512_bf16"},
      {"AVX512_CORE_FP16", "avx512_bf16"}, {"AVX10_1_512", "avx512_bf16"},
      {"AVX10_2_512", "avx512_bf16"}, {"AVX512_CORE_AMX", "amx"},
      {"AVX10_1_512_AMX", "amx"},  {"AVX512_CORE_AMX_FP16", "amx"},
      {"AVX10_1_512_AMX_FP16", "amx"}, {"AVX10_2_512_AMX_2", "amx"},
  };
  return values;
}

std::string Accepted(const std::vector<CapValue>& values) {
  std::vector<std::string> names;
  for (const CapValue& v : values) names.push_back(v.value);
  return JoinStrings(names, ", ");
}

// The cap `variable`'s value sets ("amx" when unset), or an error naming it.
StatusOr<std::string> CapOf(const CpuClassEnvironment& env, const std::string& variable,
                            const std::vector<CapValue>& values, const std::string& library) {
  auto it = env.find(variable);
  if (it == env.end() || it->second.empty()) return std::string(CpuClasses().back().name);
  for (const CapValue& v : values) {
    if (it->second == v.value) return std::string(v.cap);
  }
  return Status::InvalidArgument(variable + "=" + it->second + " is not a value " + library + " takes (" +
                                 Accepted(values) + "): " + library +
                                 " would ignore it with a warning, so the CPU class its kernels use is unknown; fix: "
                                 "unset it or set one of those values");
}

std::string Lower(const std::string& a, const std::string& b) { return CpuClassRank(a) <= CpuClassRank(b) ? a : b; }

}  // namespace

const std::vector<CpuClassInfo>& CpuClasses() {
  // ATen's AVX2 kernels need FMA too, its AVX-512 ones F, BW, VL and DQ; oneDNN's AVX512_CORE_BF16 is
  // AVX512_CORE_VNNI with BF16, its AMX level the tile, int8 and bf16 units.
  static const std::vector<CpuClassInfo> classes = {
      {"default", {}, "default", "SSE41"},
      {"avx2", {"avx2", "fma"}, "avx2", "AVX2"},
      {"avx512", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}, "avx512", "AVX512_CORE"},
      {"avx512_bf16", {"avx512_vnni", "avx512_bf16"}, "avx512", "AVX512_CORE_BF16"},
      {"amx", {"amx_tile", "amx_int8", "amx_bf16"}, "avx512", "AVX512_CORE_AMX"},
  };
  return classes;
}

const CpuClassInfo* FindCpuClass(const std::string& name) {
  for (const CpuClassInfo& c : CpuClasses()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

int CpuClassRank(const std::string& name) {
  const CpuClassInfo* c = FindCpuClass(name);
  return c == nullptr ? -1 : static_cast<int>(c - CpuClasses().data());
}

std::string CpuClassNames() {
  std::vector<std::string> names;
  for (const CpuClassInfo& c : CpuClasses()) names.push_back(c.name);
  return JoinStrings(names, ", ");
}

CpuClassEnvironment ReadCpuClassEnvironment() {
  CpuClassEnvironment env;
  for (const char* name : {kAtenCapabilityVariable, kOnednnIsaVariable, kDnnlIsaVariable}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') env[name] = value;
  }
  return env;
}

std::set<std::string> ParseCpuFlags(const std::string& cpuinfo) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream key(line.substr(0, colon));
    std::string word, extra;
    if (!(key >> word) || word != "flags" || key >> extra) continue;
    std::set<std::string> flags;
    std::istringstream words(line.substr(colon + 1));
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

std::string CpuClassOfFlags(const std::set<std::string>& flags) {
  std::string found = CpuClasses().front().name;
  for (const CpuClassInfo& c : CpuClasses()) {
    bool has = std::all_of(c.flags.begin(), c.flags.end(), [&](const char* f) { return flags.count(f) > 0; });
    if (!has) break;
    found = c.name;
  }
  return found;
}

StatusOr<std::string> CpuClassCap(const CpuClassEnvironment& env) {
  StatusOr<std::string> aten = CapOf(env, kAtenCapabilityVariable, AtenValues(), "ATen");
  if (!aten.ok()) return aten.status();
  // oneDNN reads its old name only where the new one is unset.
  auto onednn_set = env.find(kOnednnIsaVariable);
  const bool new_name = onednn_set != env.end() && !onednn_set->second.empty();
  StatusOr<std::string> onednn =
      CapOf(env, new_name ? kOnednnIsaVariable : kDnnlIsaVariable, OnednnValues(), "oneDNN");
  if (!onednn.ok()) return onednn.status();
  return Lower(*aten, *onednn);
}

StatusOr<std::string> EffectiveCpuClass(const std::set<std::string>& flags, const CpuClassEnvironment& env) {
  const std::string machine = CpuClassOfFlags(flags);
  // Nothing is below the lowest class: the caps (and values of other architectures) change nothing.
  if (CpuClassRank(machine) == 0) return machine;
  StatusOr<std::string> cap = CpuClassCap(env);
  if (!cap.ok()) return cap.status();
  return Lower(machine, *cap);
}

std::set<std::string> MachineCpuFlags() {
  // A /proc file reports no size, so it is read as a stream (as harness/device_cpu.cc reads the model name).
  std::ifstream in("/proc/cpuinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseCpuFlags(text.str());
}

StatusOr<std::string> DetectCpuClass() { return EffectiveCpuClass(MachineCpuFlags(), ReadCpuClassEnvironment()); }

std::vector<std::pair<std::string, std::string>> CpuClassEnv(const std::string& cpu_class) {
  const CpuClassInfo* c = FindCpuClass(cpu_class);
  if (c == nullptr) return {};
  return {{kAtenCapabilityVariable, c->aten_capability}, {kOnednnIsaVariable, c->onednn_isa}};
}

StatusOr<CpuClassChoice> ChooseCpuClass(const std::string& requested, const std::set<std::string>& flags,
                                        const CpuClassEnvironment& env) {
  CpuClassChoice choice;
  if (requested.empty()) {
    StatusOr<std::string> here = EffectiveCpuClass(flags, env);
    if (!here.ok()) return here.status();
    choice.cpu_class = *here;
    return choice;
  }
  if (FindCpuClass(requested) == nullptr) {
    return Status::InvalidArgument("'" + requested + "' is not a CPU class (" + CpuClassNames() + ")");
  }
  const std::string machine = CpuClassOfFlags(flags);
  if (CpuClassRank(requested) > CpuClassRank(machine)) {
    std::vector<std::string> lacking, lower;
    for (int rank = CpuClassRank(machine) + 1; rank <= CpuClassRank(requested); ++rank) {
      for (const char* f : CpuClasses()[rank].flags) {
        if (!flags.count(f)) lacking.push_back(f);
      }
    }
    for (int rank = 0; rank <= CpuClassRank(machine); ++rank) lower.push_back(CpuClasses()[rank].name);
    const std::string fix = "fix: run it on a machine of class " + requested + ", or choose one of " +
                            JoinStrings(lower, ", ");
    return Status::InvalidArgument("CPU class " + requested + " is above this machine's class " + machine +
                                   " (its CPU lacks " + JoinStrings(lacking, ", ") +
                                   "): capping ATen and oneDNN can only lower a class; " + fix);
  }
  choice.cpu_class = requested;
  choice.env = CpuClassEnv(requested);
  return choice;
}

CpuClassEnvironment WithOverrides(CpuClassEnvironment env,
                                  const std::vector<std::pair<std::string, std::string>>& overrides) {
  for (const auto& [name, value] : overrides) {
    if (value.empty()) {
      env.erase(name);
    } else {
      env[name] = value;
    }
  }
  return env;
}

}  // namespace tmx
