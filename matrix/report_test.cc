#include "matrix/report.h"

#include <limits>
#include <sstream>

#include <gtest/gtest.h>

namespace tmx::matrix {
namespace {

SupportEntry Entry(const std::string& status, const std::string& verified_at, const std::string& reason = "") {
  SupportEntry e;
  e.status = status;
  e.reason = reason;
  e.verified_at = verified_at;
  e.torch_version = "2.11.0";
  return e;
}

std::vector<ConfigSupport> Sample() {
  SupportEntry cpu = Entry("runs", "2026-12-02T11:30:00Z");
  cpu.tokens_per_second = 812.4;
  cpu.step_time_s = 0.315;
  cpu.peak_memory_gib = 0.42;
  cpu.device_name = "Intel Xeon";
  cpu.config_hash = "0123456789abcdef";
  cpu.host = "ci-7";
  cpu.job = "cpu-nightly";
  cpu.commit = "0123456789abcdef0123456789abcdef01234567";
  SupportEntry cuda_runs = Entry("runs", "2026-12-01T08:00:00Z");
  cuda_runs.tokens_per_second = 15234.56;
  SupportEntry big = Entry("too_large", "2026-12-02T10:00:00Z", "needs 152.3 GiB, device has 139.8 GiB");
  return {
      {"qwen2_5/0_5B_full_single_device", "full_finetune_single_device",
       {{"cpu", Entry("timeout", "2026-12-01T23:00:00Z", "killed after 600s")}, {"cuda", cuda_runs}}},
      {"llama3_2/1B_lora_single_device", "lora_finetune_single_device",
       {{"cpu", cpu},
        {"cuda", Entry("fails", "2026-12-02T11:00:00Z", "RuntimeError: a|b <tensor> *x* `y`\nnext line")},
        {"mps", Entry("invalid", "2026-11-30T09:00:00Z")}}},
      {"llama3_1/70B_full", "full_finetune_distributed", {{"cuda", big}}},
  };
}

// A too_large cell whose proxies ran shows what they verified and the real depth's extrapolations (marked
// ≈), and the report says once what those mean; one whose proxy never ran shows its status alone.
TEST(MarkdownReporterTest, AProxiedCellShowsItsExtrapolationsMarkedAsSuch) {
  SupportEntry proxied = Entry("too_large", "2026-12-05T05:00:00Z", "predicted 30 GiB");
  proxied.ops_verified = "yes";
  proxied.proxy = "1 and 2 of 32 layers (model.num_layers 2 of 32)";
  proxied.extrapolated_tokens_per_second = 12.4;
  proxied.extrapolated_peak_memory_gib = 16.014;
  SupportEntry unproxied = Entry("too_slow", "2026-12-05T05:00:00Z", "predicted 10m");
  std::vector<ConfigSupport> configs = {{"llama3_1/8B_lora_single_device", "lora_finetune_single_device",
                                         {{"cpu", proxied}}},
                                        {"llama3_1/70B_lora", "lora_finetune_distributed", {{"cpu", unproxied}}}};
  std::ostringstream out;
  MarkdownReporter().Report(configs, {"cpu"}, out);
  EXPECT_NE(out.str().find("| ⛔ too_large · ops verified by proxy · ≈12 tok/s · ≈16.01 GiB |"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("| 🐢 too_slow |"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\nA cell too large or too slow for its device ran proxies instead"), std::string::npos);
  // Nothing extrapolated: the share its deepest proxy measured, said to be at the proxy's size.
  SupportEntry noisy = proxied;
  noisy.extrapolated_tokens_per_second.reset();
  noisy.extrapolated_peak_memory_gib.reset();
  noisy.proxy_peak_share = 0.123;
  noisy.peak_dtype = "bf16";
  std::ostringstream shares;
  MarkdownReporter().Report({{"c", "lora_finetune_single_device", {{"cpu", noisy}}}}, {"cpu"}, shares);
  EXPECT_NE(shares.str().find("| ⛔ too_large · ops verified by proxy · 12% of the bf16 peak at proxy size |"),
            std::string::npos)
      << shares.str();
  EXPECT_NE(shares.str().find("\"% of the peak\" is the share"), std::string::npos) << shares.str();
  std::ostringstream plain;
  MarkdownReporter().Report({configs[1]}, {"cpu"}, plain);
  EXPECT_EQ(plain.str().find("ran proxies instead"), std::string::npos);
}

// A repaired cell reads "invalid as written", then what its repair got and that run's numbers; the report says
// once what that means. A repaired cell that is itself too large shows its proxies' extrapolations.
TEST(MarkdownReporterTest, ARepairedCellShowsWhatItsRepairGot) {
  SupportEntry ran = Entry("invalid", "2026-12-05T08:00:00Z", "a paged optimizer needs a cuda device");
  ran.repair = "optimizer._component_=torch.optim.AdamW optimizer.fused=True";
  ran.repaired_status = "runs";
  ran.tokens_per_second = 44.3;
  ran.peak_memory_gib = 10.185;
  SupportEntry big = Entry("invalid", "2026-12-05T08:00:00Z", "a paged optimizer needs a cuda device");
  big.repair = "optimizer._component_=bitsandbytes.optim.AdamW8bit";
  big.repaired_status = "too_large";
  big.ops_verified = "yes";
  big.proxy = "1 and 4 of 32 layers (model.num_layers 4 of 32)";
  big.extrapolated_tokens_per_second = 3.3;
  std::vector<ConfigSupport> configs = {{"qwen2/1.5B_full_single_device", "full_finetune_single_device", {{"cpu", ran}}},
                                        {"llama3/8B_full_single_device", "full_finetune_single_device", {{"cpu", big}}}};
  std::ostringstream out;
  MarkdownReporter().Report(configs, {"cpu"}, out);
  EXPECT_NE(out.str().find("| 🚫 invalid as written · runs with 2 overrides · 44 tok/s · 10.19 GiB |"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("| 🚫 invalid as written · too_large with 1 override · ops verified by proxy · ≈3.3 tok/s |"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("\nA cell invalid as written whose every problem has a known override"), std::string::npos);
  std::ostringstream plain;
  MarkdownReporter().Report(Sample(), {"cpu", "cuda", "mps"}, plain);
  EXPECT_EQ(plain.str().find("known override"), std::string::npos);
}

// Each CPU class and torch version is a column of its own, named beside the device, in OrderColumns' order; one
// never stands in for another.
TEST(MarkdownReporterTest, EachCpuClassAndTorchVersionIsAColumnOfItsOwn) {
  SupportEntry amx = Entry("runs", "2026-12-02T11:30:00Z");
  amx.tokens_per_second = 812.4;
  SupportEntry avx2 = Entry("too_slow", "2026-12-03T11:30:00Z", "predicted 40m");
  avx2.cpu_class = "avx2";
  SupportEntry newer = Entry("fails", "2026-12-04T11:30:00Z", "boom");
  newer.torch_version = "2.15.0";
  std::vector<ConfigSupport> configs = {
      {"c",
       "lora_finetune_single_device",
       {{"cpu (avx2, torch 2.11.0)", avx2}, {"cpu (amx, torch 2.15.0)", newer}, {"cpu (amx, torch 2.11.0)", amx}}}};
  std::ostringstream out;
  MarkdownReporter().Report(configs, {}, out);
  EXPECT_NE(
      out.str().find("| config | recipe | cpu (amx, torch 2.11.0) | cpu (amx, torch 2.15.0) | cpu (avx2, torch "
                     "2.11.0) |\n|---|---|---|---|---|\n| `c` | `lora_finetune_single_device` | ✅ runs · 812 tok/s "
                     "| ❌ fails | 🐢 too_slow |\n"),
      std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("| `c` | cpu (avx2, torch 2.11.0) | 🐢 too_slow | predicted 40m |"), std::string::npos);
  EXPECT_NE(out.str().find("Peak memory is the high-water mark of resident memory summed over the cell's processes on "
                           "cpu.\n"),
            std::string::npos)
      << out.str();
}

TEST(MarkdownReporterTest, WritesTheSupportTable) {
  std::ostringstream out;
  MarkdownReporter().Report(Sample(), {"cpu", "cuda", "mps"}, out);
  EXPECT_EQ(out.str(),
            "# Support matrix\n"
            "\n"
            "Generated by tune-matrix from the `metadata.support` block of each config; do not edit by hand. "
            "Verified between 2026-11-30 and 2026-12-02 (UTC).\n"
            "\n"
            "| config | recipe | cpu | cuda | mps |\n"
            "|---|---|---|---|---|\n"
            "| `llama3_1/70B_full` | `full_finetune_distributed` | — | ⛔ too_large | — |\n"
            "| `llama3_2/1B_lora_single_device` | `lora_finetune_single_device` | ✅ runs · 812 tok/s · 0.42 GiB "
            "| ❌ fails | 🚫 invalid |\n"
            "| `qwen2_5/0_5B_full_single_device` | `full_finetune_single_device` | ⏱ timeout "
            "| ✅ runs · 15235 tok/s | — |\n"
            "\n"
            "Peak memory is the high-water mark of resident memory summed over the cell's processes on cpu and the "
            "device allocator's peak of the largest rank on cuda.\n"
            "\n"
            "## Cells that do not run\n"
            "\n"
            "| config | device | status | reason |\n"
            "|---|---|---|---|\n"
            "| `llama3_1/70B_full` | cuda | ⛔ too_large | needs 152.3 GiB, device has 139.8 GiB |\n"
            "| `llama3_2/1B_lora_single_device` | cuda | ❌ fails "
            "| RuntimeError: a\\|b \\<tensor\\> \\*x\\* \\`y\\` next line |\n"
            "| `llama3_2/1B_lora_single_device` | mps | 🚫 invalid | (no reason recorded) |\n"
            "| `qwen2_5/0_5B_full_single_device` | cpu | ⏱ timeout | killed after 600s |\n"
            "\n"
            "## Where it was measured\n"
            "\n"
            "| device | model | torch | host | job | commit | cells |\n"
            "|---|---|---|---|---|---|---|\n"
            "| cpu | — | 2.11.0 | — | — | — | 1 |\n"
            "| cpu | Intel Xeon | 2.11.0 | ci-7 | cpu-nightly | 0123456789ab | 1 |\n"
            "| cuda | — | 2.11.0 | — | — | — | 3 |\n"
            "| mps | — | 2.11.0 | — | — | — | 1 |\n");
}

TEST(MarkdownReporterTest, EdgeCases) {
  struct Case {
    const char* name;
    std::vector<ConfigSupport> configs;
    std::vector<std::string> device_types;
    std::string expected;
  } cases[] = {
      {"nothing measured", {{"a", "r", {}}}, {"cpu"},
       "# Support matrix\n\nGenerated by tune-matrix from the `metadata.support` block of each config; do not edit "
       "by hand. No cell has been verified yet.\n\n| config | recipe | cpu |\n|---|---|---|\n| `a` | `r` | — |\n"
       "\nPeak memory is the high-water mark of resident memory summed over the cell's processes on cpu.\n"
       "\n## Cells that do not run\n\nEvery measured cell runs.\n"},
      {"columns from the data, one date, odd names",
       {{"we|ird`name", "", {{"xpu", Entry("runs", "2026-12-02T01:00:00Z")}, {"cpu", Entry("odd", "2026-12-02T02:00:00Z")}}}},
       {},
       "# Support matrix\n\nGenerated by tune-matrix from the `metadata.support` block of each config; do not edit "
       "by hand. Verified on 2026-12-02 (UTC).\n\n| config | recipe | cpu | xpu |\n|---|---|---|---|\n"
       "| we\\|ird\\`name |  | odd | ✅ runs |\n\nPeak memory is the high-water mark of resident memory summed over the cell's processes on "
       "cpu and the device allocator's peak of the largest rank on xpu.\n\n## Cells that do not run\n\n"
       "| config | device | status | reason |\n"
       "|---|---|---|---|\n| we\\|ird\\`name | cpu | odd | (no reason recorded) |\n"
       "\n## Where it was measured\n\n| device | model | torch | host | job | commit | cells |\n|---|---|---|---|---|---|---|\n"
       "| cpu | — | 2.11.0 | — | — | — | 1 |\n| xpu | — | 2.11.0 | — | — | — | 1 |\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::ostringstream out;
    MarkdownReporter().Report(c.configs, c.device_types, out);
    EXPECT_EQ(out.str(), c.expected);
  }
}

TEST(JsonReporterTest, WritesEveryFieldInFixedOrder) {
  std::vector<ConfigSupport> configs = Sample();
  configs.resize(2);
  configs[0].entries.at("cuda").step_time_s = std::numeric_limits<double>::quiet_NaN();
  std::ostringstream out;
  JsonReporter().Report(configs, {"cuda", "cpu"}, out);
  EXPECT_EQ(out.str(), R"({
  "schema_version": 2,
  "configs": [
    {
      "config": "llama3_2/1B_lora_single_device",
      "recipe": "lora_finetune_single_device",
      "support": {
        "cuda": {
          "status": "fails",
          "reason": "RuntimeError: a|b <tensor> *x* `y`\nnext line",
          "tokens_per_second": null,
          "step_time_s": null,
          "step_time_spread_s": null,
          "peak_memory_gib": null,
          "wall_time_s": null,
          "startup_time_s": null,
          "ranks": null,
          "device_name": "",
          "torch_version": "2.11.0",
          "verified_at": "2026-12-02T11:00:00Z",
          "config_hash": "",
          "host": "",
          "job": "",
          "commit": "",
          "stand_in": ""
        },
        "cpu": {
          "status": "runs",
          "reason": "",
          "tokens_per_second": 812.4,
          "step_time_s": 0.315,
          "step_time_spread_s": null,
          "peak_memory_gib": 0.42,
          "wall_time_s": null,
          "startup_time_s": null,
          "ranks": null,
          "device_name": "Intel Xeon",
          "torch_version": "2.11.0",
          "verified_at": "2026-12-02T11:30:00Z",
          "config_hash": "0123456789abcdef",
          "host": "ci-7",
          "job": "cpu-nightly",
          "commit": "0123456789abcdef0123456789abcdef01234567",
          "stand_in": ""
        }
      }
    },
    {
      "config": "qwen2_5/0_5B_full_single_device",
      "recipe": "full_finetune_single_device",
      "support": {
        "cuda": {
          "status": "runs",
          "reason": "",
          "tokens_per_second": 15234.56,
          "step_time_s": null,
          "step_time_spread_s": null,
          "peak_memory_gib": null,
          "wall_time_s": null,
          "startup_time_s": null,
          "ranks": null,
          "device_name": "",
          "torch_version": "2.11.0",
          "verified_at": "2026-12-01T08:00:00Z",
          "config_hash": "",
          "host": "",
          "job": "",
          "commit": "",
          "stand_in": ""
        },
        "cpu": {
          "status": "timeout",
          "reason": "killed after 600s",
          "tokens_per_second": null,
          "step_time_s": null,
          "step_time_spread_s": null,
          "peak_memory_gib": null,
          "wall_time_s": null,
          "startup_time_s": null,
          "ranks": null,
          "device_name": "",
          "torch_version": "2.11.0",
          "verified_at": "2026-12-01T23:00:00Z",
          "config_hash": "",
          "host": "",
          "job": "",
          "commit": "",
          "stand_in": ""
        }
      }
    }
  ]
}
)");
}

TEST(JsonReporterTest, AGenerationEntryHasItsPrefillAfterItsSpeed) {
  SupportEntry generate = Entry("runs", "2026-12-02T11:30:00Z");
  generate.tokens_per_second = 812.4;
  generate.time_to_first_token_s = 0.0625;
  generate.prefill_tokens_per_second = 4100.5;
  std::ostringstream out;
  JsonReporter().Report({{"tiny/generation", "generate", {{"cpu", generate}}}}, {"cpu"}, out);
  EXPECT_NE(out.str().find("          \"tokens_per_second\": 812.4,\n"
                           "          \"time_to_first_token_s\": 0.0625,\n"
                           "          \"prefill_tokens_per_second\": 4100.5,\n"
                           "          \"step_time_s\": null,\n"),
            std::string::npos)
      << out.str();
}

TEST(JsonReporterTest, EmptyInput) {
  std::ostringstream out;
  JsonReporter().Report({}, {}, out);
  EXPECT_EQ(out.str(), "{\n  \"schema_version\": 2,\n  \"configs\": []\n}\n");
}

TEST(EstimateRemainingTest, ScalesThePlanByTheRunSoFarWithoutBlowingUpOnShortCells) {
  EXPECT_FALSE(EstimateRemaining(0, 0, 600, false).has_value());
  // Two tiny cells predicted at 0 s took 7 s: the 1000 s left are about 1.1 x the plan, not 23 hours.
  EXPECT_NEAR(*EstimateRemaining(7, 0.001, 1000, true), 1000 * 67 / 60.001, 1e-6);
  // Long into a run the measured ratio dominates: planned 600 s took 1200 s.
  EXPECT_NEAR(*EstimateRemaining(1200, 600, 300, true), 300 * 1260.0 / 660.0, 1e-9);
  EXPECT_EQ(*EstimateRemaining(100, 100, 0, true), 0);
}

TEST(FormatProgressLineTest, Lines) {
  struct Case {
    size_t i, n;
    const char* device;
    double elapsed;
    std::optional<double> eta;
    const char* expected;
  } cases[] = {
      {3, 12, "cpu", 65, 250, "[3/12] cpu  llama3_2/1B_lora_single_device  elapsed 1m05s  eta 4m10s"},
      {1, 12, "cuda:0", 0.4, std::nullopt, "[1/12] cuda:0  llama3_2/1B_lora_single_device  elapsed 0s"},
      {12, 12, "cpu", 59.5, 0, "[12/12] cpu  llama3_2/1B_lora_single_device  elapsed 1m00s  eta 0s"},
      {5, 40, "mps", 7384, 36000, "[5/40] mps  llama3_2/1B_lora_single_device  elapsed 2h03m04s  eta 10h00m00s"},
      {2, 3, "cpu", -3, std::numeric_limits<double>::quiet_NaN(),
       "[2/3] cpu  llama3_2/1B_lora_single_device  elapsed 0s  eta 0s"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    EXPECT_EQ(FormatProgressLine(c.i, c.n, c.device, "llama3_2/1B_lora_single_device", c.elapsed, c.eta),
              c.expected);
  }
}

// A generation cell shows decode tokens/s, then its time to first token and prefill tokens/s; a training cell
// beside it renders as before; the note on what the speeds mean is added only where a generation cell is shown.
TEST(MarkdownReporterTest, AGenerationCellShowsDecodeSpeedTimeToFirstTokenAndPrefill) {
  SupportEntry generate = Entry("runs", "2026-12-02T11:30:00Z");
  generate.tokens_per_second = 812.4;
  generate.time_to_first_token_s = 0.05234;
  generate.prefill_tokens_per_second = 4100.2;
  generate.peak_memory_gib = 0.42;
  SupportEntry train = Entry("runs", "2026-12-02T11:30:00Z");
  train.tokens_per_second = 38000;
  std::vector<ConfigSupport> configs = {{"tiny/generation", "generate", {{"cpu", generate}}},
                                        {"tiny/lora_single_device", "lora_finetune_single_device", {{"cpu", train}}}};
  std::ostringstream out;
  MarkdownReporter().Report(configs, {"cpu"}, out);
  const std::string table =
      "| `tiny/generation` | `generate` | ✅ runs · 812 decode tok/s · 52.3 ms to first token · 4100 prefill tok/s · "
      "0.42 GiB |\n"
      "| `tiny/lora_single_device` | `lora_finetune_single_device` | ✅ runs · 38000 tok/s |\n"
      "\n"
      "Peak memory is the high-water mark of resident memory summed over the cell's processes on cpu.\n"
      "\n"
      "A generation cell's tok/s is its decode speed (one new token per sequence per step); its time to first "
      "token runs from the start of the prompt's forward to the first new token, and its prefill tok/s counts the "
      "prompt tokens of every sequence over that time.\n"
      "\n"
      "## Cells that do not run\n";
  EXPECT_NE(out.str().find(table), std::string::npos) << out.str();

  // Without a generation cell there is no note.
  configs.erase(configs.begin());
  std::ostringstream training;
  MarkdownReporter().Report(configs, {"cpu"}, training);
  EXPECT_EQ(training.str().find("generation"), std::string::npos) << training.str();
  EXPECT_EQ(GenerationSentence({}, {"cpu"}), "");
}

TEST(MeasurementsTest, NamesAGenerationSpeedDecodeAndLeavesOutWhatIsUnknown) {
  SupportEntry e;
  e.status = "runs";
  e.tokens_per_second = 200;
  e.time_to_first_token_s = 1.5;
  EXPECT_EQ(Measurements(e), "200 decode tok/s · 1.50 s to first token");
  e.bandwidth_share = 0.614;
  e.prefill_peak_share = 0.042;
  e.peak_dtype = "bf16";
  EXPECT_EQ(Measurements(e), "200 decode tok/s · 61% of the memory bandwidth · 1.50 s to first token · prefill 4.2% "
                             "of the bf16 peak");
  ConfigSupport generation;
  generation.entries["cpu"] = e;
  EXPECT_NE(GenerationSentence({&generation}, {"cpu"}).find("\"% of the memory bandwidth\" is the bytes a decode step"),
            std::string::npos);
  generation.entries["cpu"].bandwidth_share.reset();
  EXPECT_EQ(GenerationSentence({&generation}, {"cpu"}).find("memory bandwidth"), std::string::npos);
  e.bandwidth_share.reset();
  e.prefill_peak_share.reset();
  e.peak_dtype.clear();
  e.prefill_tokens_per_second = std::numeric_limits<double>::infinity();  // a prefill too short to time
  EXPECT_EQ(Measurements(e), "200 decode tok/s · 1.50 s to first token");
  e.time_to_first_token_s.reset();
  e.prefill_tokens_per_second.reset();
  EXPECT_EQ(Measurements(e), "200 tok/s");
  e.peak_share = 0.403;
  e.peak_dtype = "bf16";
  EXPECT_EQ(Measurements(e), "200 tok/s · 40% of the bf16 peak");
  ConfigSupport c;
  c.entries["cpu"] = e;
  EXPECT_EQ(PeakShareSentence({&c}, {"cpu"}).rfind("\"% of the peak\" is the share", 0), 0u);
  EXPECT_EQ(PeakShareSentence({&c}, {"cuda"}), "");
  e.peak_share.reset();
  e.status = "fails";
  e.time_to_first_token_s = 1.5;
  EXPECT_EQ(Measurements(e), "");
}

TEST(MeasurementsTest, AnEvaluationShowsItsScoresAfterItsSpeed) {
  SupportEntry e;
  e.status = "runs";
  e.tokens_per_second = 52867.9;
  e.peak_memory_gib = 0.38;
  e.scores = "truthfulqa_mc2 acc 0.2321 ± 0.1526";
  EXPECT_EQ(Measurements(e), "52868 tok/s · truthfulqa_mc2 acc 0.2321 ± 0.1526 · 0.38 GiB");
}

TEST(FormatLatencyTest, MillisecondsUnderASecondThenFewerDecimalsAsItGrows) {
  EXPECT_EQ(FormatLatency(0), "0.0 ms");
  EXPECT_EQ(FormatLatency(0.0523), "52.3 ms");
  EXPECT_EQ(FormatLatency(2.514), "2.51 s");
  EXPECT_EQ(FormatLatency(12.34), "12.3 s");
  EXPECT_EQ(FormatLatency(123.4), "123 s");
}

// Peak memory is named from the device table, one way in SUPPORT.md and on the page.
TEST(PeakMemoryMeaningTest, FollowsWhereTheDeviceTypeReadsPeakMemory) {
  EXPECT_EQ(PeakMemoryMeaning("cpu"), "high-water mark of resident memory summed over the cell's processes");
  EXPECT_EQ(PeakMemoryMeaning("cuda"), "device allocator's peak of the largest rank");
  EXPECT_EQ(PeakMemoryMeaning("no-such-type"), "");
  EXPECT_EQ(PeakMemorySentence({"cpu", "cuda", "xpu"}),
            "Peak memory is the high-water mark of resident memory summed over the cell's processes on cpu and the "
            "device allocator's peak of the largest rank on cuda, xpu.");
  EXPECT_EQ(PeakMemorySentence({"cuda"}), "Peak memory is the device allocator's peak of the largest rank on cuda.");
  EXPECT_EQ(PeakMemorySentence({"no-such-type"}), "");
}

}  // namespace
}  // namespace tmx::matrix
