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

}  // namespace
}  // namespace tmx
