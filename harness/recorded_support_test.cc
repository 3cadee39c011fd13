// Reading a config's recorded support entry back, as `tune` shows it.
#include "harness/recorded_support.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(RecordedSupportTest, ReadsTheScalarFieldsAndDescribesThemInOneLine) {
  YAML::Node entry = YAML::Load(
      "status: runs\ntokens_per_second: 38087\npeak_memory_gib: 0.54\nverified_at: 2026-12-03T13:08:45Z\n"
      "host: vm\ncommit: 0123456789abcdef0123\nsteps: [1, 2]\n");
  RecordedSupport r = ReadRecordedSupport(entry);
  EXPECT_TRUE(r.recorded());
  EXPECT_FALSE(r.blocks());
  EXPECT_EQ(r.tokens_per_second, "38087");
  EXPECT_EQ(DescribeRecordedSupport(r), "runs · 38087 tok/s · 0.54 GiB peak (2026-12-03T13:08:45Z, vm, 0123456789ab)");
}

TEST(RecordedSupportTest, AGenerationEntryNamesItsSpeedDecodeAndAddsItsPrefill) {
  RecordedSupport r = ReadRecordedSupport(
      YAML::Load("status: runs\ntokens_per_second: 812.5\ntime_to_first_token_s: 0.05234\n"
                 "prefill_tokens_per_second: 4100.0\npeak_memory_gib: 0.54\nhost: vm\n"));
  EXPECT_EQ(r.time_to_first_token_s, "0.05234");
  EXPECT_EQ(r.prefill_tokens_per_second, "4100.0");
  EXPECT_EQ(DescribeRecordedSupport(r),
            "runs · 812.5 decode tok/s · 0.05234 s to first token · 4100.0 prefill tok/s · 0.54 GiB peak (vm)");
  // A training entry has neither: its speed keeps its plain name.
  r = ReadRecordedSupport(YAML::Load("status: runs\ntokens_per_second: 38087\n"));
  EXPECT_EQ(r.time_to_first_token_s, "");
  EXPECT_EQ(r.prefill_tokens_per_second, "");
  EXPECT_EQ(DescribeRecordedSupport(r), "runs · 38087 tok/s");
}

TEST(RecordedSupportTest, AReasonFollowsTheStatusAndMissingFieldsAreLeftOut) {
  RecordedSupport r = ReadRecordedSupport(YAML::Load("status: too_large\nreason: 54 GiB predicted\n"));
  EXPECT_TRUE(r.blocks());
  EXPECT_EQ(DescribeRecordedSupport(r), "too_large: 54 GiB predicted");
}

TEST(RecordedSupportTest, NothingRecordedForANodeThatIsNotAMapOrAFieldThatIsNotAScalar) {
  EXPECT_FALSE(ReadRecordedSupport(YAML::Node()).recorded());
  EXPECT_FALSE(ReadRecordedSupport(YAML::Load("[runs]")).recorded());
  RecordedSupport r = ReadRecordedSupport(YAML::Load("status: [runs]\nreason: x\n"));
  EXPECT_FALSE(r.recorded());
  EXPECT_EQ(r.reason, "x");
}

// A block as tune-matrix writes it: an entry per column, each with its device column's torch axis.
const char kColumns[] =
    "\"cpu (amx, torch 2.11.0)\":\n  status: fails\n  torch_version: \"2.11.0\"\n"
    "  torch_versions: \"2.11.0 fails, 2.15.0 runs\"\n  min_torch: \"2.15.0\"\n"
    "\"cpu (amx, torch 2.15.0)\":\n  status: runs\n  torch_version: \"2.15.0\"\n"
    "  torch_versions: \"2.11.0 fails, 2.15.0 runs\"\n  min_torch: \"2.15.0\"\n"
    "\"cuda (torch 2.15.0)\":\n  status: too_large\n  torch_version: \"2.15.0\"\n"
    "  torch_versions: \"2.15.0 too_large\"\n";

TEST(RecordedSupportTest, EntriesAreFoundByTheirColumnOnly) {
  YAML::Node support = YAML::Load(kColumns);
  std::map<std::string, RecordedSupport> columns = RecordedColumns(support);
  ASSERT_EQ(columns.size(), 3u);
  EXPECT_EQ(FindRecordedSupport(support, "cpu (amx, torch 2.15.0)").status, "runs");
  EXPECT_EQ(FindRecordedSupport(support, "cpu (amx, torch 2.11.0)").status, "fails");
  EXPECT_FALSE(FindRecordedSupport(support, "cpu (avx2, torch 2.15.0)").recorded());
  // A block written before columns, keyed by device type: its entry is of the column its fields name.
  YAML::Node legacy = YAML::Load(
      "cpu:\n  status: too_slow\n  device_name: \"Intel(R) Xeon(R) Processor\"\n  host: \"vm\"\n"
      "  torch_version: \"2.11.0\"\nmps:\n  status: invalid\n");
  EXPECT_EQ(FindRecordedSupport(legacy, "cpu (amx, torch 2.11.0)").status, "too_slow");
  EXPECT_EQ(FindRecordedSupport(legacy, "mps").status, "invalid");
  EXPECT_FALSE(FindRecordedSupport(legacy, "cpu (avx512_bf16, torch 2.11.0)").recorded());
}

TEST(RecordedSupportTest, TheTorchAxisWarnsOfAnOlderOrUnmeasuredTorchAndAnUnmeasuredClass) {
  YAML::Node support = YAML::Load(kColumns);
  struct Case {
    Column running;
    std::string warning;
  };
  const std::vector<Case> cases = {
      {{"cpu", "amx", "2.15.0"}, ""},  // measured here, and runs
      {{"cpu", "amx", "2.11.0"},
       "c runs on cpu (amx) from torch 2.15.0 (its min_torch; measured there: 2.11.0 fails, 2.15.0 runs), and this "
       "is torch 2.11.0"},
      {{"cpu", "amx", "2.16.0"},
       "tune-matrix never measured c on cpu (amx) with torch 2.16.0 (measured there: 2.11.0 fails, 2.15.0 runs)"},
      {{"cpu", "avx512_bf16", "2.15.0"},
       "tune-matrix never measured c on cpu (avx512_bf16): its records are of cpu (amx, torch 2.11.0) (fails), cpu "
       "(amx, torch 2.15.0) (runs), cuda (torch 2.15.0) (too_large), another CPU class or device, and say nothing of "
       "this one"},
      {{"cuda", "", "2.15.0"}, ""},  // measured: too_large, which `tune run` says itself
      {{"cuda", "", "2.9.0"},
       "tune-matrix never measured c on cuda with torch 2.9.0 (measured there: 2.15.0 too_large)"},
  };
  for (const Case& c : cases) EXPECT_EQ(TorchAxisWarning(support, c.running, "c"), c.warning) << ColumnKey(c.running);
  // A config of no record at all: nothing to say.
  EXPECT_EQ(TorchAxisWarning(YAML::Node(), {"cpu", "amx", "2.11.0"}, "c"), "");
}

}  // namespace
}  // namespace tmx
