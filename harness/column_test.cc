#include "harness/column.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(ColumnTest, KeysNameTheClassAndTheTorchBesideTheDevice) {
  struct Case {
    Column column;
    const char* key;
    const char* device;
  };
  const std::vector<Case> cases = {
      {{"cpu", "amx", "2.11.0"}, "cpu (amx, torch 2.11.0)", "cpu (amx)"},
      {{"cpu", "avx512_bf16", "2.15.0"}, "cpu (avx512_bf16, torch 2.15.0)", "cpu (avx512_bf16)"},
      {{"cpu", "", "2.11.0"}, "cpu (class unknown, torch 2.11.0)", "cpu (class unknown)"},
      {{"cpu", "avx2", ""}, "cpu (avx2)", "cpu (avx2)"},
      {{"cpu", "", ""}, "cpu (class unknown)", "cpu (class unknown)"},
      {{"cuda", "", "2.11.0+cu130"}, "cuda (torch 2.11.0+cu130)", "cuda"},
      {{"mps", "", ""}, "mps", "mps"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ColumnKey(c.column), c.key);
    EXPECT_EQ(DeviceColumnKey(c.column), c.device) << c.key;
    std::optional<Column> back = ParseColumnKey(c.key);
    ASSERT_TRUE(back.has_value()) << c.key;
    EXPECT_TRUE(*back == c.column) << c.key;
    EXPECT_EQ(ColumnDeviceType(c.key), c.column.device_type);
  }
}

TEST(ColumnTest, StringsThatAreNoKeyAreRefused) {
  for (const char* bad : {"", "cpu", "cpu (avx3, torch 2.11.0)", "cpu (torch 2.11.0)", "cpu (amx,torch 2.11.0)",
                          "cpu (amx, torch 2.11.0", "cuda (amx, torch 2.11.0)", "cuda (torch )", "Cuda",
                          "cuda:0 (torch 2.11.0)", "cpu (amx, torch 2.11.0, extra)", "cpu (amx, torch 2 11)"}) {
    EXPECT_FALSE(ParseColumnKey(bad).has_value()) << bad;
    EXPECT_EQ(ColumnDeviceType(bad), "") << bad;
  }
}

TEST(ColumnTest, TorchVersionsCompareAsNumbers) {
  EXPECT_LT(CompareTorchVersions("2.9.1", "2.11.0"), 0);
  EXPECT_LT(CompareTorchVersions("2.11.0", "2.15.0"), 0);
  EXPECT_GT(CompareTorchVersions("2.15.0", "2.11.0"), 0);
  EXPECT_EQ(CompareTorchVersions("2.11.0", "2.11.0"), 0);
  EXPECT_LT(CompareTorchVersions("2.11", "2.11.0"), 0);
  EXPECT_GT(CompareTorchVersions("2.11.0+cpu", "2.11.0"), 0);
  EXPECT_LT(CompareTorchVersions("", "2.11.0"), 0);
}

TEST(ColumnTest, ColumnsAreOrderedByDeviceThenClassThenTorch) {
  EXPECT_EQ(OrderColumns({"cuda (torch 2.11.0)", "cpu (avx2, torch 2.11.0)", "cpu (class unknown, torch 2.11.0)",
                          "cpu (amx, torch 2.15.0)", "cpu (amx, torch 2.9.0)", "cpu (amx, torch 2.15.0)", "junk"}),
            (std::vector<std::string>{"cpu (amx, torch 2.9.0)", "cpu (amx, torch 2.15.0)", "cpu (avx2, torch 2.11.0)",
                                      "cpu (class unknown, torch 2.11.0)", "cuda (torch 2.11.0)", "junk"}));
}

TEST(ColumnTest, ARecordWithoutAClassTakesItOnlyFromTheLegacyTable) {
  EXPECT_EQ(RecordedCpuClass("cpu", "avx2", "vm", "Intel(R) Xeon(R) Processor"), "avx2");  // recorded: as recorded
  EXPECT_EQ(RecordedCpuClass("cpu", "", "vm", "Intel(R) Xeon(R) Processor"), "amx");
  EXPECT_EQ(RecordedCpuClass("cpu", "", "vm", "AMD EPYC"), "");                        // both kinds of EPYC recorded so
  EXPECT_EQ(RecordedCpuClass("cpu", "", "laptop", "Intel(R) Xeon(R) Processor"), "");  // another host: unknown
  EXPECT_EQ(RecordedCpuClass("cuda", "", "vm", "Intel(R) Xeon(R) Processor"), "");
  for (const LegacyCpuClass& row : LegacyCpuClasses()) EXPECT_NE(std::string(row.evidence), "") << row.device_name;
}

}  // namespace
}  // namespace tmx
