#include "matrix/support_entry.h"

#include <set>

#include <gtest/gtest.h>

#include "matrix/support_block.h"

namespace tmx::matrix {
namespace {

SupportEntry Entry(const std::string& status, const std::string& reason = "") {
  SupportEntry e;
  e.status = status;
  e.reason = reason;
  return e;
}

TEST(SupportFromCellTest, TakesTheReportedFields) {
  CellResult cell;
  cell.key = {"c", "cuda:1"};
  cell.device_type = "cuda";
  cell.status = CellStatus::kTooLarge;
  cell.reason = "needs 90 GiB";
  cell.tokens_per_second = 10.5;
  cell.step_time_median_s = 0.25;
  cell.step_time_spread_s = 0.0125;
  cell.wall_time_s = 42.5;
  cell.startup_time_s = 4.5;
  cell.peak_memory_bytes = int64_t{3} << 29;
  cell.config_hash = "h";
  cell.provenance = {"host", "job", "commit", "2.11.0", "NVIDIA H200", "2026-12-02T11:30:00Z"};
  SupportEntry want = Entry("too_large", "needs 90 GiB");
  want.tokens_per_second = 10.5;
  want.step_time_s = 0.25;
  want.step_time_spread_s = 0.0125;
  want.wall_time_s = 42.5;
  want.startup_time_s = 4.5;
  want.peak_memory_gib = 1.5;
  want.device_name = "NVIDIA H200";
  want.torch_version = "2.11.0";
  want.verified_at = "2026-12-02T11:30:00Z";
  want.config_hash = "h";
  want.host = "host";
  want.job = "job";
  want.commit = "commit";
  EXPECT_TRUE(SupportFromCell(cell) == want);
  cell.peak_memory_bytes.reset();
  EXPECT_FALSE(SupportFromCell(cell).peak_memory_gib.has_value());
}

TEST(SupportEntryTest, TheFieldTableCoversEveryFieldOnceAndDrivesEqualityAndJson) {
  std::set<std::string> names;
  for (const SupportField& f : SupportFields()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_NE(f.text == nullptr, f.number == nullptr) << f.name;
    EXPECT_EQ(f.number != nullptr, f.format != nullptr) << f.name;
  }
  EXPECT_EQ(names.size(), 17u);
  // Every field takes part in equality: changing any one makes entries differ.
  for (const SupportField& f : SupportFields()) {
    SupportEntry a = Entry("runs"), b = a;
    if (f.text) {
      b.*f.text += "x";
    } else {
      b.*f.number = 1.0;
    }
    EXPECT_FALSE(a == b) << f.name;
  }
  SupportEntry e = Entry("fails", "boom");
  e.tokens_per_second = 12.5;
  nlohmann::ordered_json j = SupportEntryToJson(e);
  EXPECT_EQ(j.dump(), "{\"status\":\"fails\",\"reason\":\"boom\",\"tokens_per_second\":12.5,\"step_time_s\":null,"
                      "\"step_time_spread_s\":null,\"peak_memory_gib\":null,\"wall_time_s\":null,\"startup_time_s\":null,\"ranks\":null,\"device_name\":\"\","
                      "\"torch_version\":\"\",\"verified_at\":\"\",\"config_hash\":\"\",\"host\":\"\",\"job\":\"\","
                      "\"commit\":\"\",\"stand_in\":\"\"}");
}

TEST(SupportEntryTest, AStandInIsWrittenOnlyWhenASampleStoodInForTheData) {
  SupportEntry real = Entry("runs");
  real.verified_at = "2026-12-02T11:30:00Z";
  StatusOr<std::string> text = RenderWithSupport("lr: 1\n", {{"cpu", real}}, "c.yaml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->find("stand_in"), std::string::npos) << *text;
  SupportEntry sample = real;
  sample.stand_in = "the shipped alpaca sample (alpaca_data.json not found)";
  text = RenderWithSupport("lr: 1\n", {{"cpu", sample}}, "c.yaml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("      stand_in: \"the shipped alpaca sample (alpaca_data.json not found)\"\n"),
            std::string::npos)
      << *text;
  StatusOr<SupportEntries> read = ReadSupportEntries(*text, "c.yaml");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->at("cpu") == sample);
}

}  // namespace
}  // namespace tmx::matrix
