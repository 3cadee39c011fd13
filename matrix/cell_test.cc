#include "matrix/cell.h"

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "base/clock.h"

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
  r.startup_time_s = 11.3875;
  r.step_times_s = {0.5, 0.3125, 0.3};
  r.warmup_steps = 1;
  r.step_time_median_s = 0.30625;
  r.step_time_spread_s = 0.00625;
  r.tokens_per_second = 812.4;
  r.time_to_first_token_s = 0.0625;
  r.prefill_tokens_per_second = 4096.5;
  r.scores = "truthfulqa_mc2 acc 0.2321 ± 0.1526";
  r.first_loss = 2.5;
  r.last_loss = 1.75;
  r.wall_time_s = 12.5;
  r.exit_code = 1;
  r.term_signal = 9;
  r.output_tail = "Traceback:\n  boom\t\xe2\x9c\x93";
  r.stand_in = "tokenizer: shipped sample tokenizer.model for /tmp/missing/tokenizer.model";
  r.world_size = 2;
  r.cpu_time_s = 41.5;
  r.threads = 2;
  r.others_cpu_share = 0.375;
  r.steal_share = 0.0625;
  r.disturbed = "other processes used 38% of the machine's CPU while it ran (more than 25%)";
  r.disturbed_accepted = true;  // --accept-disturbed published its speed, marked
  r.proxy_layers = {1, 2};
  r.real_layers = 16;
  r.proxy_vocab = {16064, 16064};
  r.real_vocab = 128256;
  r.proxy_cut = "model.num_layers 2 of 16, model.vocab_size 16064 of 128256";
  r.proxy_step_times_s = {0.25, 0.375};
  r.proxy_peak_memory_bytes = {1e9, 1.5e9};
  r.proxy_tokens_per_second = {1000, 750};
  r.extrapolated_step_time_s = 2.125;
  r.extrapolated_tokens_per_second = 125.5;
  r.flops_per_second = 3.2e11;
  r.peak_flops = 8.3e11;
  r.flops_dtype = "bf16";
  r.bytes_per_second = 8e9;
  r.peak_bandwidth = 2e10;
  r.prefill_flops_per_second = 8e10;
  r.proxy_flops_per_second = {3e11, 3.1e11};
  r.extrapolated_flops_per_second = 2.9e11;
  r.extrapolated_peak_memory_bytes = 8'500'000'000;
  r.ops_verified = false;
  r.proxy_note = "the proxy of 2 of its 16 layers stopped (timeout)";
  r.first_grad_norm = 1.5;
  r.numeric_loss = 2.5;
  r.numeric_grad_norm = 1.5;
  r.reference_loss = 2.4375;
  r.reference_grad_norm = 1.25;
  r.loss_delta = 0.025641;
  r.grad_norm_delta = 0.2;
  r.loss_tolerance = 0.02;
  r.grad_norm_tolerance = 0.1;
  r.numeric_dtype = "bf16";
  r.tensors_compared = 64;
  r.tensor_worst = "layers.0.attn.q_proj.lora_a.weight gradient";
  r.tensor_error = 0.094;
  r.tensor_cosine = 0.9951;
  r.tensor_tolerance = 0.05;
  r.numeric_note = "bf16 on cuda:0 against float32 on cpu: first loss off by 2.56%";
  r.reference_time_s = 47.25;
  r.provenance = {"host1", "ci-gpu", "abc123", "2.11.0", "NVIDIA H200", "2026-11-22T11:30:00Z"};
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

// The status table: one row per CellStatus in enum order (StatusInfo indexes it), names that round-trip,
// and distinct ranks and listing positions that cover 0..n-1 (the page sorts and lists by them).
TEST(CellStatusTest, TheTableHasOneRowPerStatus) {
  const std::vector<CellStatusInfo>& rows = CellStatuses();
  constexpr size_t kStatuses = static_cast<size_t>(CellStatus::kWrong) + 1;  // the enum's last value
  ASSERT_EQ(rows.size(), kStatuses);
  std::set<int> ranks, listed;
  std::set<std::string> names, symbols;
  for (size_t i = 0; i < rows.size(); ++i) {
    const CellStatusInfo& row = rows[i];
    SCOPED_TRACE(row.name);
    EXPECT_EQ(static_cast<size_t>(row.status), i) << "rows must be in enum order";
    EXPECT_EQ(&StatusInfo(row.status), &row);
    EXPECT_EQ(FindCellStatus(row.name), &row);
    EXPECT_EQ(ParseCellStatus(row.name), row.status);
    EXPECT_EQ(CellStarted(row.status), row.started);
    EXPECT_FALSE(std::string(row.description).empty());
    EXPECT_EQ(std::string(row.description).find('\n'), std::string::npos);
    ranks.insert(row.rank);
    listed.insert(row.listed);
    names.insert(row.name);
    symbols.insert(row.symbol);
  }
  EXPECT_EQ(names.size(), kStatuses);
  EXPECT_EQ(symbols.size(), kStatuses);
  EXPECT_EQ(ranks.size(), kStatuses);
  EXPECT_EQ(*ranks.begin(), 0);
  EXPECT_EQ(*ranks.rbegin(), static_cast<int>(kStatuses) - 1);
  EXPECT_EQ(listed.size(), kStatuses);
  EXPECT_EQ(*listed.begin(), 0);
  EXPECT_EQ(*listed.rbegin(), static_cast<int>(kStatuses) - 1);
  EXPECT_EQ(StatusInfo(CellStatus::kRuns).rank, 0);
  EXPECT_TRUE(IsRunsStatus("runs"));
  EXPECT_FALSE(IsRunsStatus("fails"));
  EXPECT_EQ(FindCellStatus("none"), nullptr);
  EXPECT_EQ(CellStatusNames(), "runs, fails, invalid, too_large, timeout, too_slow, wrong");
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
  EXPECT_EQ(out->stand_in, in.stand_in);
  EXPECT_EQ(out->world_size, in.world_size);
  EXPECT_EQ(out->term_signal, 9);
}

TEST(CellJsonTest, EmptyOptionalsAreOmittedAndStayEmpty) {
  CellResult in;
  in.key = {"c", "cpu"};
  in.recipe = "r";
  in.device_type = "cpu";
  in.status = CellStatus::kRuns;
  in.provenance.verified_at = "2026-11-22T11:30:00Z";
  json j = ToJson(in);
  for (const char* key : {"peak_memory_bytes", "init_time_s", "startup_time_s", "step_time_median_s", "step_time_spread_s",
                          "tokens_per_second", "first_loss", "last_loss", "exit_code", "term_signal", "stand_in",
                          "world_size", "time_to_first_token_s", "prefill_tokens_per_second", "scores"}) {
    EXPECT_FALSE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.dump(),
            R"({"config":"c","config_hash":"","device":"cpu","device_memory_bytes":0,"device_type":"cpu",)"
            R"("output_tail":"","predicted_memory_bytes":0,"problems":[],"provenance":{"commit":"",)"
            R"("device_name":"","host":"","job":"","torch_version":"","verified_at":"2026-11-22T11:30:00Z"},)"
            R"("reason":"","recipe":"r","schema_version":1,"status":"runs","step_times_s":[],"wall_time_s":0.0,)"
            R"("warmup_steps":0})");
  StatusOr<CellResult> out = CellResultFromJson(j, "j:1");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectSameCell(in, *out);
  EXPECT_FALSE(out->peak_memory_bytes.has_value());
  EXPECT_FALSE(out->tokens_per_second.has_value());
  EXPECT_FALSE(out->exit_code.has_value());
}

// A generation cell: decode steps with no loss, and the prefill's time to first token and tokens/s.
TEST(CellJsonTest, AGenerationRecordRoundTripsItsPrefillWithoutLosses) {
  CellResult in = FullCell();
  in.status = CellStatus::kRuns;
  in.reason.clear();
  in.first_loss.reset();
  in.last_loss.reset();
  in.time_to_first_token_s = 0.125;
  in.prefill_tokens_per_second = 2048.25;
  json j = ToJson(in);
  EXPECT_FALSE(j.contains("first_loss"));
  EXPECT_FALSE(j.contains("last_loss"));
  EXPECT_EQ(j["time_to_first_token_s"], 0.125);
  EXPECT_EQ(j["prefill_tokens_per_second"], 2048.25);
  StatusOr<CellResult> out = CellResultFromJson(json::parse(j.dump()), "j:1");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectSameCell(in, *out);
  EXPECT_FALSE(out->first_loss.has_value());
  EXPECT_FALSE(out->last_loss.has_value());
  EXPECT_EQ(out->time_to_first_token_s, std::optional<double>(0.125));
  EXPECT_EQ(out->prefill_tokens_per_second, std::optional<double>(2048.25));
  // Ill-typed, each is refused naming the field.
  for (const char* key : {"time_to_first_token_s", "prefill_tokens_per_second"}) {
    json bad = j;
    bad[key] = "fast";
    EXPECT_EQ(CellResultFromJson(bad, "j:1").status().message(),
              std::string("j:1: cell record field \"") + key +
                  "\" must be a number (or \"nan\", \"inf\", \"-inf\"), not string");
  }
}

TEST(CellJsonTest, NonFiniteNumbersSurvive) {
  CellResult in = FullCell();
  in.first_loss = std::numeric_limits<double>::quiet_NaN();
  in.last_loss = std::numeric_limits<double>::infinity();
  in.tokens_per_second = std::numeric_limits<double>::infinity();  // tokens over a step too short to time
  json j = ToJson(in);
  EXPECT_EQ(j["first_loss"], "nan");
  EXPECT_EQ(j["last_loss"], "inf");
  EXPECT_EQ(j["tokens_per_second"], "inf");
  StatusOr<CellResult> out = CellResultFromJson(json::parse(j.dump()), "j:1");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::isnan(*out->first_loss));
  EXPECT_EQ(*out->last_loss, std::numeric_limits<double>::infinity());
  EXPECT_EQ(*out->tokens_per_second, std::numeric_limits<double>::infinity());
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
       "too_large, timeout, too_slow, wrong"},
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

// Every reader takes records through CellResultFromJson, so a record that would make a reader crash, claim
// something false or outrank every later record is refused there, once, naming the field and the fix.
TEST(CellValidationTest, ValuesOutOfRangeOrInconsistentAreRefused) {
  const int64_t now = *ParseUtc("2026-11-22T12:00:00Z");
  struct Case {
    const char* name;
    std::function<void(json&)> mutate;
    const char* message;  // after "runs.jsonl:7: cell record "
  } cases[] = {
      {"negative bytes", [](json& j) { j["predicted_memory_bytes"] = -1; },
       "field \"predicted_memory_bytes\" is -1, expected bytes from 0 to 1152921504606846976"},
      {"huge bytes", [](json& j) { j["device_memory_bytes"] = int64_t{1} << 62; },
       "field \"device_memory_bytes\" is 4611686018427387904, expected bytes from 0 to 1152921504606846976"},
      {"negative peak", [](json& j) { j["peak_memory_bytes"] = -5; },
       "field \"peak_memory_bytes\" is -5, expected bytes from 0 to 1152921504606846976"},
      {"negative wall time", [](json& j) { j["wall_time_s"] = -1; },
       "field \"wall_time_s\" is -1, expected seconds from 0 to 1e+09"},
      {"infinite wall time", [](json& j) { j["wall_time_s"] = "inf"; },
       "field \"wall_time_s\" is inf, expected seconds from 0 to 1e+09"},
      {"huge init time", [](json& j) { j["init_time_s"] = 1e12; },
       "field \"init_time_s\" is 1e+12, expected seconds from 0 to 1e+09"},
      {"negative start-up", [](json& j) { j["startup_time_s"] = -1.0; },
       "field \"startup_time_s\" is -1, expected seconds from 0 to 1e+09"},
      {"negative step time",
       [](json& j) {
         j["step_times_s"] = {0.5, -0.1, 0.3};
       },
       "field \"step_times_s\" is -0.1, expected seconds from 0 to 1e+09"},
      {"nan median", [](json& j) { j["step_time_median_s"] = "nan"; },
       "field \"step_time_median_s\" is nan, expected seconds from 0 to 1e+09"},
      {"negative warm-up", [](json& j) { j["warmup_steps"] = -1; },
       "field \"warmup_steps\" is -1, expected 0 to the 3 steps recorded"},
      {"warm-up past the steps", [](json& j) { j["warmup_steps"] = 4; },
       "field \"warmup_steps\" is 4, expected 0 to the 3 steps recorded"},
      {"exit code past 255", [](json& j) { j["exit_code"] = 256; }, "field \"exit_code\" is 256, expected 0 to 255"},
      {"negative exit code", [](json& j) { j["exit_code"] = -1; }, "field \"exit_code\" is -1, expected 0 to 255"},
      {"signal 0", [](json& j) { j["term_signal"] = 0; }, "field \"term_signal\" is 0, expected 1 to 127"},
      {"negative tokens", [](json& j) { j["tokens_per_second"] = -3; },
       "field \"tokens_per_second\" is -3, expected tokens per second from 0 (inf for a step too short to time)"},
      {"nan tokens", [](json& j) { j["tokens_per_second"] = "nan"; },
       "field \"tokens_per_second\" is nan, expected tokens per second from 0 (inf for a step too short to time)"},
      {"negative time to first token", [](json& j) { j["time_to_first_token_s"] = -0.5; },
       "field \"time_to_first_token_s\" is -0.5, expected seconds from 0 to 1e+09"},
      {"infinite time to first token", [](json& j) { j["time_to_first_token_s"] = "inf"; },
       "field \"time_to_first_token_s\" is inf, expected seconds from 0 to 1e+09"},
      {"negative prefill", [](json& j) { j["prefill_tokens_per_second"] = -1; },
       "field \"prefill_tokens_per_second\" is -1, expected tokens per second from 0 (inf for a step too short "
       "to time)"},
      {"nan prefill", [](json& j) { j["prefill_tokens_per_second"] = "nan"; },
       "field \"prefill_tokens_per_second\" is nan, expected tokens per second from 0 (inf for a step too short "
       "to time)"},
      {"no config", [](json& j) { j["config"] = ""; }, "field \"config\" is empty"},
      {"device not a device", [](json& j) { j["device"] = "gpu0"; },
       "field \"device\" is \"gpu0\", not a device such as cpu or cuda:0"},
      {"device auto", [](json& j) { j["device"] = "auto"; },
       "field \"device\" is \"auto\", not a device such as cpu or cuda:0"},
      {"device and type disagree", [](json& j) { j["device_type"] = "cpu"; },
       "device type \"cpu\" does not match device \"cuda:0\""},
      {"a CPU class on a cuda record", [](json& j) { j["provenance"]["cpu_class"] = "amx"; },
       "provenance.cpu_class \"amx\" is set on a cuda record; only cpu records have one"},
      {"no CPU class",
       [](json& j) {
         j["device"] = "cpu";
         j["device_type"] = "cpu";
         j["provenance"]["cpu_class"] = "avx3";
       },
       "provenance.cpu_class \"avx3\" is not a CPU class (default, avx2, avx512, avx512_bf16, amx)"},
      {"not a date", [](json& j) { j["provenance"]["verified_at"] = "2026-02-30T00:00:00Z"; },
       "provenance.verified_at \"2026-02-30T00:00:00Z\" is not a UTC time of the form 2026-12-02T11:30:00Z"},
      {"fraction", [](json& j) { j["provenance"]["verified_at"] = "2026-11-22T10:00:00.5Z"; },
       "provenance.verified_at \"2026-11-22T10:00:00.5Z\" is not a UTC time of the form 2026-12-02T11:30:00Z"},
      {"far future", [](json& j) { j["provenance"]["verified_at"] = "2036-12-02T12:00:00Z"; },
       "provenance.verified_at \"2036-12-02T12:00:00Z\" is later than this machine's clock "
       "(2026-11-22T12:00:00Z) by more than 900 s"},
      {"an hour ahead", [](json& j) { j["provenance"]["verified_at"] = "2026-11-22T13:00:00Z"; },
       "provenance.verified_at \"2026-11-22T13:00:00Z\" is later than this machine's clock"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    json j = ToJson(FullCell());
    c.mutate(j);
    StatusOr<CellResult> out = CellResultFromJson(json::parse(j.dump()), "runs.jsonl:7", now);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(out.status().message().rfind(std::string("runs.jsonl:7: cell record ") + c.message, 0), 0u)
        << out.status().message();
    EXPECT_NE(out.status().message().find("; fix: "), std::string::npos) << out.status().message();
  }
}

TEST(CellValidationTest, SmallClockSkewAndEveryValidEdgeAreAccepted) {
  const int64_t now = *ParseUtc("2026-11-22T12:00:00Z");
  json j = ToJson(FullCell());
  j["provenance"]["verified_at"] = "2026-11-22T12:10:00Z";  // ten minutes ahead: a clock a little fast
  j["warmup_steps"] = 3;
  j["exit_code"] = 255;
  j["term_signal"] = 127;
  j["predicted_memory_bytes"] = 0;
  j["wall_time_s"] = 0;
  j["first_loss"] = "nan";
  j["last_loss"] = "-inf";
  StatusOr<CellResult> out = CellResultFromJson(j, "x", now);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(ValidateCellResult(FullCell(), "x", now).ok());
}

// The JSON value of a JournalFields key ("provenance.host" inside "provenance"), or null when left out.
json At(const json& record, const std::string& key) {
  size_t dot = key.find('.');
  if (dot != std::string::npos) {
    auto parent = record.find(key.substr(0, dot));
    return parent == record.end() ? json(nullptr) : At(*parent, key.substr(dot + 1));
  }
  auto it = record.find(key);
  return it == record.end() ? json(nullptr) : *it;
}

// The table is the whole record: a record with every row set to something other than its default is
// written with exactly the table's keys (and schema_version), and reads back equal in every row.
TEST(JournalFieldsTest, ARecordWithEveryFieldSetRoundTrips) {
  CellResult in = FullCell();
  // A cpu record, which alone has a CPU class.
  in.key.device = in.device_type = "cpu";
  in.provenance.cpu_class = "avx512_bf16";
  // Invalid as written (FullCell's kFails is also the default), and timed out with its repair.
  in.status = CellStatus::kInvalid;
  in.repair = {"optimizer._component_=torch.optim.AdamW", "~optimizer.optim_bits"};
  in.repaired_status = CellStatus::kTimeout;
  json j = ToJson(in);
  json defaults = ToJson(CellResult{});
  std::set<std::string> rows, keys = {"schema_version"};
  for (const JournalField& field : JournalFields()) {
    SCOPED_TRACE(field.key);
    EXPECT_TRUE(rows.insert(field.key).second) << "keys must be distinct";
    std::string key = field.key;
    keys.insert(key.substr(0, key.find('.')));  // "provenance.host" is written inside "provenance"
    ASSERT_FALSE(At(j, field.key).is_null()) << "FullCell must set every field";
    EXPECT_NE(At(j, field.key), At(defaults, field.key)) << "FullCell must set every field to a non-default value";
  }
  std::set<std::string> written;
  for (const auto& item : j.items()) written.insert(item.key());
  EXPECT_EQ(written, keys) << "every key written comes from a row";

  StatusOr<CellResult> out = CellResultFromJson(json::parse(j.dump()), "j:1");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (const JournalField& field : JournalFields()) {
    SCOPED_TRACE(field.key);
    std::visit([&](const auto& slot) { EXPECT_TRUE(slot.get(*out) == slot.get(in)); }, field.value);
  }
  EXPECT_EQ(ToJson(*out).dump(), j.dump());
}

// Only a kOptional field may be left out; a std::optional one must be, or an unknown value would be
// written as null, which no reader takes.
TEST(JournalFieldsTest, OptionalValuesAreOptionalFields) {
  json defaults = ToJson(CellResult{});
  for (const JournalField& field : JournalFields()) {
    SCOPED_TRACE(field.key);
    json value = At(defaults, field.key);
    if (field.kind == JournalKind::kOptional) {
      EXPECT_TRUE(value.is_null()) << "a default record leaves an optional field out";
    } else {
      EXPECT_FALSE(value.is_null()) << "a required field is always written";
    }
  }
}

TEST(CellJsonTest, IgnoresUnknownFields) {
  json j = ToJson(FullCell());
  j["added_by_a_later_minor_change"] = 1;
  EXPECT_TRUE(CellResultFromJson(j, "x").ok());
}

}  // namespace
}  // namespace tmx::matrix
