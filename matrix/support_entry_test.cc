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

// The FLOP rate in GFLOP/s and its share of the measured peak with the peak's dtype; no peak, no share (and no
// dtype), the rate still kept.
TEST(SupportFromCellTest, TakesTheFlopRateAndItsShareOfThePeak) {
  CellResult cell;
  cell.status = CellStatus::kRuns;
  cell.flops_per_second = 3e11;
  cell.peak_flops = 1.2e12;
  cell.flops_dtype = "bf16";
  SupportEntry e = SupportFromCell(cell);
  EXPECT_EQ(e.gflops_per_second, std::optional<double>(300));
  EXPECT_EQ(e.peak_share, std::optional<double>(0.25));
  EXPECT_FALSE(e.extrapolated_peak_share.has_value());
  EXPECT_EQ(e.peak_dtype, "bf16");
  StatusOr<std::string> text = RenderWithSupport("lr: 1\n", {{ColumnOfEntry("cpu", e), e}}, "c.yaml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("      gflops_per_second: 300.0\n      peak_share: 0.25\n      peak_dtype: \"bf16\"\n"),
            std::string::npos)
      << *text;
  StatusOr<SupportEntries> read = ReadSupportEntries(*text, "c.yaml");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->at(ColumnOfEntry("cpu", e)) == e);
  cell.peak_flops.reset();
  e = SupportFromCell(cell);
  EXPECT_EQ(e.gflops_per_second, std::optional<double>(300));
  EXPECT_FALSE(e.peak_share.has_value());
  EXPECT_EQ(e.peak_dtype, "");
}

// A proxied cell whose proxies drew no line to the real size keeps the share its deepest proxy measured, apart
// from an extrapolated one; one with an extrapolation has that alone.
TEST(SupportFromCellTest, AProxiedCellWithoutAnExtrapolationKeepsItsDeepestProxysShare) {
  CellResult cell;
  cell.status = CellStatus::kTooLarge;
  cell.ops_verified = true;
  cell.proxy_layers = {1, 2, 1};  // the third with fewer ids
  cell.proxy_vocab = {32064, 32064, 16064};
  cell.proxy_flops_per_second = {2e11, 3e11, 1.5e11};
  cell.peak_flops = 1.2e12;
  cell.flops_dtype = "bf16";
  SupportEntry e = SupportFromCell(cell);
  EXPECT_FALSE(e.extrapolated_peak_share.has_value());
  EXPECT_EQ(e.proxy_peak_share, std::optional<double>(0.25));  // the 2-layer proxy's
  EXPECT_EQ(e.peak_dtype, "bf16");
  cell.extrapolated_flops_per_second = 6e11;
  e = SupportFromCell(cell);
  EXPECT_EQ(e.extrapolated_peak_share, std::optional<double>(0.5));
  EXPECT_FALSE(e.proxy_peak_share.has_value());
  cell.extrapolated_flops_per_second.reset();
  cell.proxy_flops_per_second.pop_back();  // not every proxy counted: no share
  EXPECT_FALSE(SupportFromCell(cell).proxy_peak_share.has_value());
}

TEST(SupportEntryTest, TheNumericChecksWorstTensorIsInTheEntry) {
  CellResult cell;
  cell.status = CellStatus::kWrong;
  cell.tensor_worst = "layers.0.attn.q_proj.lora_a.weight gradient";
  cell.tensor_error = 0.09412;
  const SupportEntry e = SupportFromCell(cell);
  EXPECT_EQ(e.tensor_worst, "layers.0.attn.q_proj.lora_a.weight gradient");
  EXPECT_EQ(e.tensor_error, std::optional<double>(0.09412));
  const nlohmann::ordered_json j = SupportEntryToJson(e);
  EXPECT_EQ(j["tensor_worst"], "layers.0.attn.q_proj.lora_a.weight gradient");
  EXPECT_EQ(j["tensor_error"].get<double>(), 0.09412);
  EXPECT_FALSE(SupportEntryToJson(SupportFromCell(CellResult{})).contains("tensor_error"));  // an older record's
}

TEST(SupportEntryTest, TheFieldTableCoversEveryFieldOnceAndDrivesEqualityAndJson) {
  std::set<std::string> names;
  for (const SupportField& f : SupportFields()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_NE(f.text == nullptr, f.number == nullptr) << f.name;
    EXPECT_EQ(f.number != nullptr, f.format != nullptr) << f.name;
  }
  EXPECT_EQ(names.size(), 45u);
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

SupportEntry GenerationEntry() {
  SupportEntry e = Entry("runs");
  e.tokens_per_second = 812.46;
  e.time_to_first_token_s = 0.052349;
  e.prefill_tokens_per_second = 4100.26;
  e.peak_memory_gib = 0.5;
  e.verified_at = "2026-12-02T11:30:00Z";
  return e;
}

TEST(SupportFromCellTest, AGenerationCellCarriesItsPrefill) {
  CellResult cell;
  cell.status = CellStatus::kRuns;
  cell.tokens_per_second = 812.5;
  cell.time_to_first_token_s = 0.0625;
  cell.prefill_tokens_per_second = 4096;
  SupportEntry e = SupportFromCell(cell);
  EXPECT_EQ(e.tokens_per_second, std::optional<double>(812.5));
  EXPECT_EQ(e.time_to_first_token_s, std::optional<double>(0.0625));
  EXPECT_EQ(e.prefill_tokens_per_second, std::optional<double>(4096));
  EXPECT_FALSE(e.bandwidth_share.has_value());  // no bandwidth measured
  // Its decode's share of the memory bandwidth and its prefill's of the matmul peak, through the block.
  cell.bytes_per_second = 6e9;
  cell.peak_bandwidth = 2.4e10;
  cell.prefill_flops_per_second = 1.5e11;
  cell.peak_flops = 1e12;
  cell.flops_dtype = "bf16";
  e = SupportFromCell(cell);
  EXPECT_EQ(e.bandwidth_share, std::optional<double>(0.25));
  EXPECT_EQ(e.prefill_peak_share, std::optional<double>(0.15));
  EXPECT_FALSE(e.peak_share.has_value());  // no training steps
  EXPECT_EQ(e.peak_dtype, "bf16");
  StatusOr<std::string> text = RenderWithSupport("lr: 1\n", {{ColumnOfEntry("cpu", e), e}}, "c.yaml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("      bandwidth_share: 0.25\n      prefill_peak_share: 0.15\n"), std::string::npos) << *text;
  StatusOr<SupportEntries> read = ReadSupportEntries(*text, "c.yaml");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->at(ColumnOfEntry("cpu", e)) == e);
  cell.time_to_first_token_s.reset();
  cell.prefill_tokens_per_second.reset();
  e = SupportFromCell(cell);
  EXPECT_FALSE(e.time_to_first_token_s.has_value());
  EXPECT_FALSE(e.prefill_tokens_per_second.has_value());
}

// An evaluation cell's scores reach its entry, and from there the block and support.json; other entries keep
// their bytes (no scores key).
TEST(SupportFromCellTest, AnEvaluationCellCarriesItsScores) {
  CellResult cell;
  cell.status = CellStatus::kRuns;
  cell.tokens_per_second = 52867.9;
  cell.scores = "truthfulqa_mc2 acc 0.2321 ± 0.1526";
  SupportEntry e = SupportFromCell(cell);
  EXPECT_EQ(e.scores, "truthfulqa_mc2 acc 0.2321 ± 0.1526");
  EXPECT_EQ(SupportEntryToJson(e)["scores"], "truthfulqa_mc2 acc 0.2321 ± 0.1526");
  EXPECT_FALSE(SupportEntryToJson(SupportFromCell(CellResult())).contains("scores"));
  EXPECT_NE(e, SupportFromCell(CellResult()));
}

// support.json was published before generation cells: a training entry keeps its bytes (no prefill keys,
// not even null), and a generation entry has both after its tokens/s.
TEST(SupportEntryTest, ThePrefillIsInSupportJsonOnlyWhereMeasured) {
  nlohmann::ordered_json training = SupportEntryToJson(Entry("runs"));
  EXPECT_FALSE(training.contains("time_to_first_token_s"));
  EXPECT_FALSE(training.contains("prefill_tokens_per_second"));
  EXPECT_TRUE(training["step_time_s"].is_null());
  nlohmann::ordered_json j = SupportEntryToJson(GenerationEntry());
  const std::string start =
      "{\"status\":\"runs\",\"reason\":\"\",\"tokens_per_second\":812.46,\"time_to_first_token_s\":0.052349,"
      "\"prefill_tokens_per_second\":4100.26,\"step_time_s\":null,";
  EXPECT_EQ(j.dump().substr(0, start.size()), start);
}

TEST(SupportEntryTest, AGenerationEntryRoundTripsThroughTheBlock) {
  StatusOr<std::string> text =
      RenderWithSupport("lr: 1\n", {{ColumnOfEntry("cpu", GenerationEntry()), GenerationEntry()}}, "c.yaml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("      tokens_per_second: 812.5\n      time_to_first_token_s: 0.05235\n"
                       "      prefill_tokens_per_second: 4100.3\n      peak_memory_gib: 0.5\n"),
            std::string::npos)
      << *text;
  StatusOr<SupportEntries> read = ReadSupportEntries(*text, "c.yaml");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const SupportEntry& back = read->begin()->second;
  EXPECT_EQ(back.time_to_first_token_s, std::optional<double>(0.05235));
  EXPECT_EQ(back.prefill_tokens_per_second, std::optional<double>(4100.3));
  // A training entry's block has neither.
  text = RenderWithSupport("lr: 1\n", {{"cpu (class unknown)", Entry("runs")}}, "c.yaml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->find("first_token"), std::string::npos) << *text;
  EXPECT_EQ(text->find("prefill"), std::string::npos) << *text;
}

// A disturbed generation cell's prefill is a speed too: the previous entry's stays, or none.
TEST(SupportEntryTest, ADisturbedCellKeepsThePreviousPrefill) {
  SupportEntry previous = GenerationEntry();
  SupportEntry busy = GenerationEntry();
  busy.time_to_first_token_s = 0.5;
  busy.prefill_tokens_per_second = 400;
  KeepPreviousSpeeds(&previous, &busy);
  EXPECT_EQ(busy.time_to_first_token_s, previous.time_to_first_token_s);
  EXPECT_EQ(busy.prefill_tokens_per_second, previous.prefill_tokens_per_second);
  KeepPreviousSpeeds(nullptr, &busy);
  EXPECT_FALSE(busy.time_to_first_token_s.has_value());
  EXPECT_FALSE(busy.prefill_tokens_per_second.has_value());
  EXPECT_EQ(busy.peak_memory_gib, std::optional<double>(0.5));  // memory is no speed
}

TEST(SupportEntryTest, AStandInIsWrittenOnlyWhenASampleStoodInForTheData) {
  SupportEntry real = Entry("runs");
  real.verified_at = "2026-12-02T11:30:00Z";
  StatusOr<std::string> text = RenderWithSupport("lr: 1\n", {{ColumnOfEntry("cpu", real), real}}, "c.yaml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->find("stand_in"), std::string::npos) << *text;
  SupportEntry sample = real;
  sample.stand_in = "the shipped alpaca sample (alpaca_data.json not found)";
  text = RenderWithSupport("lr: 1\n", {{ColumnOfEntry("cpu", sample), sample}}, "c.yaml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("      stand_in: \"the shipped alpaca sample (alpaca_data.json not found)\"\n"),
            std::string::npos)
      << *text;
  StatusOr<SupportEntries> read = ReadSupportEntries(*text, "c.yaml");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->at(ColumnOfEntry("cpu", sample)) == sample);
}

// Each entry carries its device column's torch axis: every torch measured there with its status, oldest first, and
// the oldest on which the config runs; another class's or device's entries are another axis.
TEST(SupportEntryTest, EachEntryCarriesTheTorchAxisOfItsDeviceColumn) {
  std::map<std::string, SupportEntry> support = {{"cpu (amx, torch 2.15.0)", Entry("runs")},
                                                 {"cpu (amx, torch 2.9.0)", Entry("fails")},
                                                 {"cpu (amx, torch 2.11.0)", Entry("runs")},
                                                 {"cpu (avx2, torch 2.11.0)", Entry("too_slow")},
                                                 {"cuda", Entry("runs")}};
  AddTorchSummaries(&support);
  for (const char* amx : {"cpu (amx, torch 2.15.0)", "cpu (amx, torch 2.9.0)", "cpu (amx, torch 2.11.0)"}) {
    EXPECT_EQ(support[amx].torch_versions, "2.9.0 fails, 2.11.0 runs, 2.15.0 runs") << amx;
    EXPECT_EQ(support[amx].min_torch, "2.11.0") << amx;
  }
  EXPECT_EQ(support["cpu (avx2, torch 2.11.0)"].torch_versions, "2.11.0 too_slow");
  EXPECT_EQ(support["cpu (avx2, torch 2.11.0)"].min_torch, "");  // it runs on none
  EXPECT_EQ(support["cuda"].torch_versions, "");                 // no torch recorded
}

}  // namespace
}  // namespace tmx::matrix
