// The CPU class: which vector and matrix instructions ATen's and oneDNN's kernels use on this machine. CPU speeds
// differ by class far more than by model: a 512x512x512 bf16 matmul at 2 threads took 2,134 GFLOP/s with AMX,
// 231 with oneDNN capped to AVX512_CORE_BF16 and 2 with both libraries capped to AVX2 (issue 57), so records of
// different classes are different matrix columns (harness/column.h). Torch-free: the class is read from
// /proc/cpuinfo's flags and the two libraries' environment variables, which lower it.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tmx {

// One class, in CpuClasses() from the lowest up.
struct CpuClassInfo {
  const char* name;  // "amx": how records, columns and --cpu-class spell it
  // The /proc/cpuinfo flags it needs besides those of every class below it.
  std::vector<const char*> flags;
  // The environment values that cap ATen and oneDNN at this class in a child (CpuClassEnv).
  const char* aten_capability;  // ATEN_CPU_CAPABILITY
  const char* onednn_isa;       // ONEDNN_MAX_CPU_ISA
};
// default (below AVX2, or not x86), avx2, avx512, avx512_bf16, amx.
const std::vector<CpuClassInfo>& CpuClasses();
// The row named `name`, or nullptr.
const CpuClassInfo* FindCpuClass(const std::string& name);
// Its position in CpuClasses() (higher is faster); -1 for a name that is none.
int CpuClassRank(const std::string& name);
// "default, avx2, avx512, avx512_bf16, amx", for messages.
std::string CpuClassNames();

// The variables that lower the class, as the libraries read them: ATen's ATEN_CPU_CAPABILITY, and oneDNN's
// ONEDNN_MAX_CPU_ISA, or its older name DNNL_MAX_CPU_ISA where the new one is unset.
inline constexpr const char* kAtenCapabilityVariable = "ATEN_CPU_CAPABILITY";
inline constexpr const char* kOnednnIsaVariable = "ONEDNN_MAX_CPU_ISA";
inline constexpr const char* kDnnlIsaVariable = "DNNL_MAX_CPU_ISA";

// The values of those variables that are set (name -> value); an empty value counts as unset.
using CpuClassEnvironment = std::map<std::string, std::string>;
// This process's.
CpuClassEnvironment ReadCpuClassEnvironment();

// The flags of the first "flags" line of /proc/cpuinfo's text; empty where there is none (another architecture).
std::set<std::string> ParseCpuFlags(const std::string& cpuinfo);
// The highest class whose flags, and every lower class's, are all in `flags`.
std::string CpuClassOfFlags(const std::set<std::string>& flags);

// The highest class the libraries may use under `env`: the lowest of the caps its values set (ATen's avx512 and
// oneDNN's DEFAULT/ALL cap nothing), "amx" when none is set. InvalidArgument naming the variable, its value and
// the values the library takes for a value neither this table nor the library knows (the library would ignore it
// with a warning, and the class would be a guess).
StatusOr<std::string> CpuClassCap(const CpuClassEnvironment& env);

// The class the libraries use with these flags under `env`: the lower of CpuClassOfFlags and CpuClassCap.
StatusOr<std::string> EffectiveCpuClass(const std::set<std::string>& flags, const CpuClassEnvironment& env);

// This machine's flags (/proc/cpuinfo; none where it cannot be read).
std::set<std::string> MachineCpuFlags();
// This process's class: EffectiveCpuClass of the machine's flags and its environment.
StatusOr<std::string> DetectCpuClass();

// The variables that cap ATen and oneDNN at `cpu_class` in a child's environment (SubprocessOptions::env):
// ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA from its row (oneDNN reads DNNL_MAX_CPU_ISA only where
// ONEDNN_MAX_CPU_ISA is unset). Empty for a name that is no class.
std::vector<std::pair<std::string, std::string>> CpuClassEnv(const std::string& cpu_class);

// The class a run's children compute at, and what their environment needs for it.
struct CpuClassChoice {
  std::string cpu_class;
  // Added to each child's environment (CpuClassEnv of a class asked for); empty: they inherit this process's.
  std::vector<std::pair<std::string, std::string>> env;
};
// With `requested` (a class name), that class and its CpuClassEnv, so a lower class is measured on a higher
// machine; InvalidArgument for a name that is no class, or a class above what the machine's `flags` give (a cap
// only lowers). With `requested` empty, the class `env` leaves (EffectiveCpuClass) and no variables.
StatusOr<CpuClassChoice> ChooseCpuClass(const std::string& requested, const std::set<std::string>& flags,
                                        const CpuClassEnvironment& env);

// `env` as a child started with `overrides` (added or overriding variables) sees it.
CpuClassEnvironment WithOverrides(CpuClassEnvironment env,
                                  const std::vector<std::pair<std::string, std::string>>& overrides);

}  // namespace tmx
