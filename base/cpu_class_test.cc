#include "base/cpu_class.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

// Flags of real machines (/proc/cpuinfo, the vector and matrix ones that matter here).
const std::set<std::string> kAvx2Epyc = {"sse4_2", "avx", "avx2", "fma", "f16c"};
const std::set<std::string> kSkylakeXeon = {"avx", "avx2", "fma", "avx512f", "avx512dq", "avx512cd", "avx512bw",
                                            "avx512vl"};
const std::set<std::string> kZen4Epyc = {"avx",      "avx2",        "fma",        "avx512f", "avx512dq", "avx512bw",
                                         "avx512vl", "avx512_vnni", "avx512_bf16"};
const std::set<std::string> kSapphireRapids = {"avx",         "avx2",        "fma",      "avx512f",  "avx512dq",
                                               "avx512bw",    "avx512vl",    "avx512_vnni", "avx512_bf16",
                                               "avx512_fp16", "amx_tile",    "amx_int8", "amx_bf16"};

TEST(CpuClassTest, ClassesAreOrderedAndNamed) {
  EXPECT_EQ(CpuClassNames(), "default, avx2, avx512, avx512_bf16, amx");
  EXPECT_EQ(CpuClassRank("default"), 0);
  EXPECT_EQ(CpuClassRank("amx"), 4);
  EXPECT_EQ(CpuClassRank("avx512_vnni"), -1);
  EXPECT_EQ(FindCpuClass("sse"), nullptr);
}

TEST(CpuClassTest, ParsesTheFlagsLineOfCpuinfo) {
  const std::string cpuinfo =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"
      "flags\t\t: fpu sse4_2 avx2 fma avx512f\nbugs\t\t: sysret_ss_attrs\n\nprocessor\t: 1\nflags\t\t: fpu\n";
  EXPECT_EQ(ParseCpuFlags(cpuinfo), (std::set<std::string>{"fpu", "sse4_2", "avx2", "fma", "avx512f"}));
  // aarch64 names its line "Features": no x86 flags, the lowest class.
  const std::string arm = "processor\t: 0\nFeatures\t: fp asimd sve\n";
  EXPECT_TRUE(ParseCpuFlags(arm).empty());
  EXPECT_EQ(CpuClassOfFlags(ParseCpuFlags(arm)), "default");
  // "vmx flags" (a line of Intel's /proc/cpuinfo) is not the flags line.
  EXPECT_EQ(ParseCpuFlags("vmx flags\t: vnmi\nflags\t: avx2\n"), (std::set<std::string>{"avx2"}));
}

TEST(CpuClassTest, MapsFlagSetsToTheClassOfTheirMachine) {
  struct Case {
    const char* machine;
    std::set<std::string> flags;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"no flags", {}, "default"},
      {"AVX without AVX2", {"avx", "sse4_2"}, "default"},
      {"AVX2 without FMA (ATen's AVX2 needs both)", {"avx", "avx2"}, "default"},
      {"AMD EPYC with AVX2 only", kAvx2Epyc, "avx2"},
      {"AVX-512 F without BW", {"avx2", "fma", "avx512f", "avx512vl", "avx512dq"}, "avx2"},
      {"Skylake Xeon", kSkylakeXeon, "avx512"},
      {"Zen 4 EPYC", kZen4Epyc, "avx512_bf16"},
      {"bf16 without VNNI", {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16"}, "avx512"},
      {"Sapphire Rapids Xeon", kSapphireRapids, "amx"},
      {"AMX tiles without the AVX-512 below them", {"avx2", "fma", "amx_tile", "amx_int8", "amx_bf16"}, "avx2"},
  };
  for (const Case& c : cases) EXPECT_EQ(CpuClassOfFlags(c.flags), c.expected) << c.machine;
}

TEST(CpuClassTest, TheLibrariesVariablesLowerTheClass) {
  struct Case {
    CpuClassEnvironment env;
    std::set<std::string> flags;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {{}, kSapphireRapids, "amx"},
      // Issue 57's two capped runs on the AMX machine.
      {{{"ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16"}}, kSapphireRapids, "avx512_bf16"},
      {{{"ONEDNN_MAX_CPU_ISA", "AVX2"}, {"ATEN_CPU_CAPABILITY", "avx2"}}, kSapphireRapids, "avx2"},
      // Either library alone lowers it: the class is the lower of the two.
      {{{"ATEN_CPU_CAPABILITY", "avx2"}}, kSapphireRapids, "avx2"},
      {{{"ONEDNN_MAX_CPU_ISA", "AVX512_CORE"}}, kZen4Epyc, "avx512"},
      {{{"ATEN_CPU_CAPABILITY", "default"}}, kZen4Epyc, "default"},
      {{{"ONEDNN_MAX_CPU_ISA", "SSE41"}}, kAvx2Epyc, "default"},
      // A cap above the machine changes nothing.
      {{{"ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX"}, {"ATEN_CPU_CAPABILITY", "avx512"}}, kZen4Epyc, "avx512_bf16"},
      {{{"ONEDNN_MAX_CPU_ISA", "AVX10_1_512_AMX"}}, kSapphireRapids, "amx"},
      {{{"ONEDNN_MAX_CPU_ISA", "ALL"}}, kSapphireRapids, "amx"},
      // oneDNN's old name counts where the new one is unset, and not where it is set.
      {{{"DNNL_MAX_CPU_ISA", "AVX2"}}, kSapphireRapids, "avx2"},
      {{{"DNNL_MAX_CPU_ISA", "AVX2"}, {"ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16"}}, kSapphireRapids, "avx512_bf16"},
  };
  for (const Case& c : cases) {
    StatusOr<std::string> got = EffectiveCpuClass(c.flags, c.env);
    std::string env;
    for (const auto& [k, v] : c.env) env += k + "=" + v + " ";
    ASSERT_TRUE(got.ok()) << env << got.status().ToString();
    EXPECT_EQ(*got, c.expected) << env;
  }
}

TEST(CpuClassTest, AValueNeitherLibraryTakesIsRefusedNotGuessed) {
  StatusOr<std::string> aten = EffectiveCpuClass(kSapphireRapids, {{"ATEN_CPU_CAPABILITY", "AVX2"}});
  ASSERT_FALSE(aten.ok());
  EXPECT_EQ(aten.status().message(),
            "ATEN_CPU_CAPABILITY=AVX2 is not a value ATen takes (default, avx2, avx512): ATen would ignore it with a "
            "warning, so the CPU class its kernels use is unknown; fix: unset it or set one of those values");
  StatusOr<std::string> onednn = EffectiveCpuClass(kSapphireRapids, {{"DNNL_MAX_CPU_ISA", "avx2"}});
  ASSERT_FALSE(onednn.ok());
  EXPECT_NE(onednn.status().message().find("DNNL_MAX_CPU_ISA=avx2 is not a value oneDNN takes (DEFAULT, ALL, SSE41"),
            std::string::npos)
      << onednn.status().message();
  // Below AVX2 nothing can lower the class, so a value of another architecture's ATen is no matter.
  StatusOr<std::string> arm = EffectiveCpuClass({}, {{"ATEN_CPU_CAPABILITY", "sve256"}});
  ASSERT_TRUE(arm.ok());
  EXPECT_EQ(*arm, "default");
}

TEST(CpuClassTest, AChildsEnvironmentCapsItAtTheClassAskedFor) {
  EXPECT_EQ(CpuClassEnv("avx2"), (std::vector<std::pair<std::string, std::string>>{
                                     {"ATEN_CPU_CAPABILITY", "avx2"}, {"ONEDNN_MAX_CPU_ISA", "AVX2"}}));
  EXPECT_TRUE(CpuClassEnv("sse").empty());
  // Every class's variables give that class on the highest machine, whatever the parent's environment says.
  const CpuClassEnvironment parent = {{"ATEN_CPU_CAPABILITY", "default"}, {"DNNL_MAX_CPU_ISA", "SSE41"}};
  for (const CpuClassInfo& c : CpuClasses()) {
    StatusOr<std::string> got = EffectiveCpuClass(kSapphireRapids, WithOverrides(parent, CpuClassEnv(c.name)));
    ASSERT_TRUE(got.ok()) << c.name;
    EXPECT_EQ(*got, c.name);
  }
}

TEST(CpuClassTest, ARunAsksForAClassAtOrBelowTheMachines) {
  StatusOr<CpuClassChoice> capped = ChooseCpuClass("avx2", kZen4Epyc, {{"ONEDNN_MAX_CPU_ISA", "AVX512_CORE"}});
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_EQ(capped->cpu_class, "avx2");
  EXPECT_EQ(capped->env, CpuClassEnv("avx2"));
  StatusOr<CpuClassChoice> same = ChooseCpuClass("avx512_bf16", kZen4Epyc, {});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->env, CpuClassEnv("avx512_bf16"));
  // Nothing asked for: the class the inherited environment leaves, and no variables of its own.
  StatusOr<CpuClassChoice> inherited = ChooseCpuClass("", kZen4Epyc, {{"ONEDNN_MAX_CPU_ISA", "AVX512_CORE"}});
  ASSERT_TRUE(inherited.ok());
  EXPECT_EQ(inherited->cpu_class, "avx512");
  EXPECT_TRUE(inherited->env.empty());

  StatusOr<CpuClassChoice> above = ChooseCpuClass("amx", kZen4Epyc, {});
  ASSERT_FALSE(above.ok());
  EXPECT_EQ(above.status().message(),
            "CPU class amx is above this machine's class avx512_bf16 (its CPU lacks amx_tile, amx_int8, amx_bf16): "
            "capping ATen and oneDNN can only lower a class; fix: run it on a machine of class amx, or choose one of "
            "default, avx2, avx512, avx512_bf16");
  StatusOr<CpuClassChoice> unknown = ChooseCpuClass("avx3", kSapphireRapids, {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "'avx3' is not a CPU class (default, avx2, avx512, avx512_bf16, amx)");
}

TEST(CpuClassTest, ThisMachineHasAClass) {
  StatusOr<std::string> here = DetectCpuClass();
  ASSERT_TRUE(here.ok()) << here.status().ToString();
  EXPECT_GE(CpuClassRank(*here), 0);
  EXPECT_LE(CpuClassRank(*here), CpuClassRank(CpuClassOfFlags(MachineCpuFlags())));
}

}  // namespace
}  // namespace tmx
