#include "matrix/cell.h"

#include <cmath>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

namespace tmx::matrix {
namespace {

using nlohmann::json;

CellResult FullCell() {
  CellResult r;
  r.key = {"llama3_2/1B_lora_single_device", "cuda:0"};
  r.recipe = "lora_finetune_single_device";
  r.device_type = "cuda";
  r.status = CellStatus::kFails;
  r.reason = "CUDA out of memory: \"tried\" to allocate 2.00 GiB\nsecond line";
  r.problems = {"batch_size: must be positive", "dtype: bf16 unsupported"};
  r.config_hash = "0123456789abcdef";
  r.predicted_memory_bytes = 3'000'000'000;
  r.device_memory_bytes = 150'000'000'000;
  r.peak_memory_bytes = 2'500'000'123;
  r.init_time_s = 1.25;
  r.step_times_s = {0.5, 0.3125, 0.3};
  r.warmup_steps = 1;
  r.step_time_median_s = 0.30625;
  r.step_time_spread_s = 0.00625;
  r.tokens_per_second = 812.4;
  r.first_loss = 2.5;
  r.last_loss = 1.75;
  r.wall_time_s = 12.5;
  r.exit_code = 1;
  r.term_signal = 9;
  r.output_tail = "Traceback:\n  boom\t\xe2\x9c\x93";
  r.provenance = {"host1", "ci-gpu", "abc123", "2.11.0", "NVIDIA H200", "2026-12-02T11:30:00Z"};
  return r;
}

void ExpectSameCell(const CellResult& a, const CellResult& b) {
  EXPECT_EQ(ToJson(a).dump(), ToJson(b).dump());
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.provenance.verified_at, b.provenance.verified_at);
}

TEST(CellStatusTest, NamesRoundTrip) {
  struct Case {
    CellStatus status;
    const char* name;
  } cases[] = {{CellStatus::kRuns, "runs"},
               {CellStatus::kFails, "fails"},
               {CellStatus::kInvalid, "invalid"},
               {CellStatus::kTooLarge, "too_large"},
               {CellStatus::kTimeout, "timeout"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_STREQ(CellStatusName(c.status), c.name);
    EXPECT_EQ(ParseCellStatus(c.name), c.status);
  }
  EXPECT_EQ(ParseCellStatus("Runs"), std::nullopt);
  EXPECT_EQ(ParseCellStatus(""), std::nullopt);
}

TEST(CellJsonTest, FullRecordRoundTrips) {
  CellResult in = FullCell();
  json j = ToJson(in);
  EXPECT_EQ(j["schema_version"], kCellSchemaVersion);
  EXPECT_EQ(j["config"], "llama3_2/1B_lora_single_device");
  EXPECT_EQ(j["device"], "cuda:0");
  EXPECT_EQ(j["status"], "fails");
  EXPECT_EQ(j["peak_memory_bytes"], 2'500'000'123);
  EXPECT_EQ(j["provenance"]["device_name"], "NVIDIA H200");
  // Through text, as the journal stores it.
  StatusOr<CellResult> out = CellResultFromJson(json::parse(j.dump()), "j:1");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectSameCell(in, *out);
  EXPECT_EQ(out->reason, in.reason);
  EXPECT_EQ(out->problems, in.problems);
  EXPECT_EQ(out->step_times_s, in.step_times_s);
  EXPECT_EQ(out->tokens_per_second, in.tokens_per_second);
  EXPECT_EQ(out->output_tail, in.output_tail);
  EXPECT_EQ(out->term_signal, 9);
}

TEST(CellJsonTest, EmptyOptionalsAreOmittedAndStayEmpty) {
  CellResult in;
  in.key = {"c", "cpu"};
  in.status = CellStatus::kRuns;
  json j = ToJson(in);
  for (const char* key : {"peak_memory_bytes", "init_time_s", "step_time_median_s", "step_time_spread_s",
                          "tokens_per_second", "first_loss", "last_loss", "exit_code", "term_signal"}) {
    EXPECT_FALSE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.dump(),
            R"({"config":"c","config_hash":"","device":"cpu","device_memory_bytes":0,"device_type":"",)"
            R"("output_tail":"","predicted_memory_bytes":0,"problems":[],"provenance":{"commit":"",)"
            R"("device_name":"","host":"","job":"","torch_version":"","verified_at":""},"reason":"",)"
            R"("recipe":"","schema_version":1,"status":"runs","step_times_s":[],"wall_time_s":0.0,)"
            R"("warmup_steps":0})");
  StatusOr<CellResult> out = CellResultFromJson(j, "j:1");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectSameCell(in, *out);
  EXPECT_FALSE(out->peak_memory_bytes.has_value());
  EXPECT_FALSE(out->tokens_per_second.has_value());
  EXPECT_FALSE(out->exit_code.has_value());
}

TEST(CellJsonTest, NonFiniteNumbersSurvive) {
  CellResult in = FullCell();
  in.first_loss = std::numeric_limits<double>::quiet_NaN();
  in.last_loss = std::numeric_limits<double>::infinity();
  in.step_times_s = {-std::numeric_limits<double>::infinity()};
  json j = ToJson(in);
  EXPECT_EQ(j["first_loss"], "nan");
  EXPECT_EQ(j["last_loss"], "inf");
  EXPECT_EQ(j["step_times_s"][0], "-inf");
  StatusOr<CellResult> out = CellResultFromJson(json::parse(j.dump()), "j:1");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::isnan(*out->first_loss));
  EXPECT_EQ(*out->last_loss, std::numeric_limits<double>::infinity());
  EXPECT_EQ(out->step_times_s[0], -std::numeric_limits<double>::infinity());
}

TEST(CellJsonTest, RejectsBadRecordsNamingWhere) {
  struct Case {
    const char* name;
    std::function<void(json&)> mutate;
    const char* message;
  } cases[] = {
      {"not an object", [](json& j) { j = json::array(); },
       "runs.jsonl:7: cell record must be a JSON object, not array"},
      {"no schema", [](json& j) { j.erase("schema_version"); },
       "runs.jsonl:7: cell record has no \"schema_version\""},
      {"newer schema", [](json& j) { j["schema_version"] = 2; },
       "runs.jsonl:7: cell record has schema_version 2, but this tune-matrix reads only version 1 "
       "(fix: read it with the tune-matrix that wrote it, or rerun the cell)"},
      {"schema as string", [](json& j) { j["schema_version"] = "1"; },
       "runs.jsonl:7: cell record has schema_version \"1\", but this tune-matrix reads only version 1 "
       "(fix: read it with the tune-matrix that wrote it, or rerun the cell)"},
      {"missing config", [](json& j) { j.erase("config"); },
       "runs.jsonl:7: cell record has no field \"config\""},
      {"status wrong type", [](json& j) { j["status"] = 3; },
       "runs.jsonl:7: cell record field \"status\" must be a string, not number"},
      {"unknown status", [](json& j) { j["status"] = "crashed"; },
       "runs.jsonl:7: cell record field \"status\" is \"crashed\", expected one of runs, fails, invalid, "
       "too_large, timeout"},
      {"problems not strings", [](json& j) { j["problems"] = {1}; },
       "runs.jsonl:7: cell record field \"problems\" must be an array of strings, not number"},
      {"bytes as float", [](json& j) { j["predicted_memory_bytes"] = 1.5; },
       "runs.jsonl:7: cell record field \"predicted_memory_bytes\" must be an integer, not number"},
      {"bytes too large", [](json& j) { j["peak_memory_bytes"] = uint64_t{1} << 63; },
       "runs.jsonl:7: cell record field \"peak_memory_bytes\" is out of range"},
      {"exit code beyond int", [](json& j) { j["exit_code"] = int64_t{1} << 40; },
       "runs.jsonl:7: cell record field \"exit_code\" is out of range: 1099511627776"},
      {"tokens null", [](json& j) { j["tokens_per_second"] = nullptr; },
       "runs.jsonl:7: cell record field \"tokens_per_second\" must be a number (or \"nan\", \"inf\", "
       "\"-inf\"), not null"},
      {"loss bad string", [](json& j) { j["last_loss"] = "NaN"; },
       "runs.jsonl:7: cell record field \"last_loss\" must be a number (or \"nan\", \"inf\", \"-inf\"), "
       "not string"},
      {"step times not array", [](json& j) { j["step_times_s"] = 0.5; },
       "runs.jsonl:7: cell record field \"step_times_s\" must be an array of numbers, not number"},
      {"provenance missing", [](json& j) { j.erase("provenance"); },
       "runs.jsonl:7: cell record has no field \"provenance\""},
      {"provenance field missing", [](json& j) { j["provenance"].erase("verified_at"); },
       "runs.jsonl:7: cell record has no field \"provenance.verified_at\""},
      {"provenance field wrong type", [](json& j) { j["provenance"]["host"] = false; },
       "runs.jsonl:7: cell record field \"provenance.host\" must be a string, not boolean"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    json j = ToJson(FullCell());
    c.mutate(j);
    StatusOr<CellResult> out = CellResultFromJson(j, "runs.jsonl:7");
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(out.status().message(), c.message);
  }
}

TEST(CellJsonTest, IgnoresUnknownFields) {
  json j = ToJson(FullCell());
  j["added_by_a_later_minor_change"] = 1;
  EXPECT_TRUE(CellResultFromJson(j, "x").ok());
}

}  // namespace
}  // namespace tmx::matrix
