// A support matrix for the page tests (html_report_test, html_report_browser_test): six configs in three
// families and two recipes on cpu, cuda and mps, every status, a cell that is not measured, a sample that
// stood in for data, names and reasons that need escaping, and histories with status changes. At the newest
// measurements: tiny/lora_single_device on cpu newly fixed, llama3_2/1B_lora_single_device on cuda newly broken,
// llama3_2/1B_full_single_device on cpu slower, llama3_1/8B_lora_single_device on cuda disturbed.
#pragma once

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "matrix/history.h"
#include "matrix/support_entry.h"

namespace tmx::matrix::testing {

// The fixture's columns (harness/column.h): its cpu records are of a Zen 4 EPYC's class, all on torch 2.11.0.
inline const std::string kFixtureCpu = "cpu (avx512_bf16, torch 2.11.0)";
inline const std::string kFixtureCuda = "cuda (torch 2.11.0)";
inline const std::string kFixtureMps = "mps (torch 2.11.0)";

inline CellResult FixtureRecord(const std::string& config, const std::string& recipe, const std::string& device,
                                CellStatus status, const std::string& verified_at, double tps, double peak_gib,
                                const std::string& commit) {
  CellResult r;
  r.key = {config, device};
  r.recipe = recipe;
  r.device_type = device.substr(0, device.find(':'));
  r.status = status;
  r.predicted_memory_bytes = static_cast<int64_t>(peak_gib * 1.1 * (int64_t{1} << 30));
  r.device_memory_bytes = int64_t{80} << 30;
  if (status == CellStatus::kRuns) {
    r.tokens_per_second = tps;
    r.step_time_median_s = 2048 / tps;
    r.step_time_spread_s = 2048 / tps * 0.02;
    r.step_times_s = {2048 / tps};  // the speed's timed step (matrix/record_rules.h)
    r.peak_memory_bytes = static_cast<int64_t>(peak_gib * (int64_t{1} << 30));
    r.first_loss = 11.5;
    r.last_loss = 10.25;
    r.exit_code = 0;
    r.wall_time_s = std::max(60.0, 2048 / tps + 10);  // the wall time holds the step
    r.output_tail = "Training " + config + " on " + device + "\nepoch 1 step 3 | loss 10.25 | tok/s " +
                    std::to_string(static_cast<int>(tps)) + "\nFinished: 3 steps\n";
  } else if (status == CellStatus::kFails) {
    r.reason = "exited with code 1: RuntimeError: CUDA out of memory <tried 2 GiB> & \"more\"";
    r.exit_code = 1;
    r.output_tail = "Traceback (most recent call last):\n  step()\nRuntimeError: CUDA out of memory </script>\n";
  } else {
    r.reason = std::string(CellStatusName(status)) + ": not started";
  }
  r.config_hash = "0123456789abcdef";
  r.provenance = {"ci-" + r.device_type,
                  "nightly-" + r.device_type,
                  commit,
                  "2.11.0",
                  r.device_type == "cpu" ? "AMD EPYC" : "NVIDIA H200",
                  verified_at};
  if (r.device_type == "cpu") r.provenance.cpu_class = "avx512_bf16";
  return r;
}

struct ReportFixture {
  std::vector<ConfigSupport> configs;
  History history;
};

// Adds `records` (oldest first) as one cell's history, and the newest as the config's entry.
inline void AddCell(ReportFixture* f, const std::string& config, const std::string& recipe,
                    const std::vector<CellResult>& records, const std::string& stand_in = "") {
  ConfigSupport* c = nullptr;
  for (ConfigSupport& existing : f->configs) {
    if (existing.config == config) c = &existing;
  }
  if (c == nullptr) {
    f->configs.push_back(ConfigSupport{config, recipe, {}, {}, "", "", 0, {}, 0});
    c = &f->configs.back();
  }
  SupportEntry e = SupportFromCell(records.back());
  e.stand_in = stand_in;
  c->entries[ColumnOf(records.back())] = e;
  f->history[{config, ColumnOf(records.back())}] = records;
}

inline ReportFixture MakeReportFixture() {
  ReportFixture f;
  const std::string lora = "lora_finetune_single_device", full = "full_finetune_single_device";
  const std::string c1 = "1111111111111111111111111111111111111111", c2 = "2222222222222222222222222222222222222222",
                    c3 = "3333333333333333333333333333333333333333", c4 = "4444444444444444444444444444444444444444";
  auto R = [](const std::string& config, const std::string& recipe, const std::string& device, CellStatus s,
              const std::string& day, double tps, double gib, const std::string& commit) {
    return FixtureRecord(config, recipe, device, s, "2026-12-0" + day + "T10:00:00Z", tps, gib, commit);
  };
  const CellStatus runs = CellStatus::kRuns, fails = CellStatus::kFails;
  // tiny/lora on cpu: runs, gets slower, breaks, is fixed: two status changes.
  AddCell(&f, "tiny/lora_single_device", lora,
          {R("tiny/lora_single_device", lora, "cpu", runs, "1", 40000, 0.59, c1),
           R("tiny/lora_single_device", lora, "cpu", runs, "2", 36000, 0.61, c2),
           R("tiny/lora_single_device", lora, "cpu", fails, "3", 0, 0, c3),
           R("tiny/lora_single_device", lora, "cpu", runs, "4", 38000, 0.60, c4)},
          "the shipped alpaca sample (alpaca_data.json not found)");
  AddCell(&f, "tiny/lora_single_device", lora,
          {R("tiny/lora_single_device", lora, "cuda:0", runs, "4", 250000, 0.8, c4)});
  AddCell(&f, "tiny/full_single_device", full, {R("tiny/full_single_device", full, "cpu", runs, "4", 26000, 0.53, c4)});
  AddCell(&f, "tiny/full_single_device", full,
          {R("tiny/full_single_device", full, "mps", CellStatus::kInvalid, "4", 0, 0, c4)});
  AddCell(&f, "llama3_2/1B_lora_single_device", lora,
          {R("llama3_2/1B_lora_single_device", lora, "cpu", CellStatus::kTimeout, "3", 0, 0, c3)});
  AddCell(&f, "llama3_2/1B_lora_single_device", lora,
          {R("llama3_2/1B_lora_single_device", lora, "cuda:0", runs, "1", 5200, 7.1, c1),
           R("llama3_2/1B_lora_single_device", lora, "cuda:1", runs, "2", 5300, 7.1, c2),
           R("llama3_2/1B_lora_single_device", lora, "cuda:0", fails, "4", 0, 0, c4)});
  // Slower beyond the noise (40 -> 28 tok/s, steps over a minute long).
  AddCell(&f, "llama3_2/1B_full_single_device", full,
          {R("llama3_2/1B_full_single_device", full, "cpu", runs, "1", 40, 11.40, c1),
           R("llama3_2/1B_full_single_device", full, "cpu", runs, "2", 28, 11.46, c2)});
  AddCell(&f, "llama3_2/1B_full_single_device", full,
          {R("llama3_2/1B_full_single_device", full, "cuda:0", runs, "2", 3100, 15.2, c2)});
  AddCell(&f, "llama3_1/8B_lora_single_device", lora,
          {R("llama3_1/8B_lora_single_device", lora, "cpu", CellStatus::kTooLarge, "2", 0, 0, c2)});
  // Measured beside other work.
  CellResult busy = R("llama3_1/8B_lora_single_device", lora, "cuda:0", runs, "2", 1900, 21.5, c2);
  busy.others_cpu_share = 0.4;
  busy.steal_share = 0.0;
  busy.disturbed = "other processes used 40% of the machine's CPU while it ran (more than 25%)";
  AddCell(&f, "llama3_1/8B_lora_single_device", lora, {busy});
  // A name and a reason a page must escape; no history for it.
  f.configs.push_back(ConfigSupport{"odd/<b>\"name\"&", lora, {}, {}, "", "", 0, {}, 0});
  SupportEntry odd;
  odd.status = "fails";
  odd.reason = "<img src=x onerror=alert(1)> & </script> \u2028 line";
  odd.verified_at = "2026-12-04T10:00:00Z";
  f.configs.back().entries[kFixtureCuda] = odd;
  return f;
}

// Adds a generation cell, tiny/generation on cpu (recipe "generate"), measured twice: decode tokens/s, a time
// to first token and prefill tokens/s, and no loss. Left out of MakeReportFixture, whose counts the page tests
// check; the tests of generation cells add it.
inline void AddGenerationCell(ReportFixture* f) {
  std::vector<CellResult> records;
  for (const auto& [day, tps, ttft, prefill] :
       std::vector<std::tuple<std::string, double, double, double>>{{"3", 790.5, 0.0581, 3900.5},
                                                                   {"4", 812.4, 0.0523, 4100.2}}) {
    const std::string verified_at = "2026-12-0" + day + "T10:00:00Z";
    CellResult r = FixtureRecord("tiny/generation", "generate", "cpu", CellStatus::kRuns, verified_at, tps, 0.25,
                                 std::string(40, '5'));
    r.time_to_first_token_s = ttft;
    r.prefill_tokens_per_second = prefill;
    r.first_loss.reset();
    r.last_loss.reset();
    r.output_tail = "Generating tiny/generation on cpu\nFinished: 8 new tokens per sequence\n";
    records.push_back(r);
  }
  AddCell(f, "tiny/generation", "generate", records);
}

// Adds what ran beside or instead of two configs (left out of MakeReportFixture, whose counts the page tests
// check; the tests of the details add it):
//   - llama3_3/70B_lora on cpu: too_large, proxies of 1 and 4 of its 80 layers ran (the deepest one's output is
//     the record's), every operation verified, the real depth extrapolated;
//   - tiny/qlora_single_device on cpu: invalid as written (a paged optimizer), repaired with an override it
//     runs with, and checked against its float32 reference; it failed the day before, so its newest change
//     (2026-12-05, a status change) is the newest of the page.
inline void AddProxiedAndRepairedCells(ReportFixture* f) {
  const std::string lora = "lora_finetune_distributed";
  CellResult proxied = FixtureRecord("llama3_3/70B_lora", lora, "cpu", CellStatus::kTooLarge, "2026-12-03T10:00:00Z",
                                     0, 0, std::string(40, '6'));
  proxied.reason = "predicted peak memory 140 GiB exceeds 85% of cpu's 23 GiB";
  proxied.real_layers = 80;
  proxied.proxy_layers = {1, 4};
  proxied.proxy_cut = "model.num_layers 4 of 80";
  proxied.proxy_step_times_s = {2.0, 3.5};
  proxied.proxy_tokens_per_second = {1024, 585.1};
  proxied.proxy_peak_memory_bytes = {2.0 * (int64_t{1} << 30), 4.5 * (int64_t{1} << 30)};
  proxied.extrapolated_step_time_s = 41.5;
  proxied.extrapolated_tokens_per_second = 49.3;
  proxied.extrapolated_peak_memory_bytes = int64_t{100} << 30;
  proxied.ops_verified = true;
  proxied.wall_time_s = 95;
  proxied.output_tail = "Training llama3_3/70B_lora (4 of 80 layers) on cpu\nFinished: 3 steps\n";
  AddCell(f, "llama3_3/70B_lora", lora, {proxied});

  const std::string single = "lora_finetune_single_device";
  CellResult failed = FixtureRecord("tiny/qlora_single_device", single, "cpu", CellStatus::kFails,
                                    "2026-12-04T10:00:00Z", 0, 0, std::string(40, '7'));
  CellResult repaired = FixtureRecord("tiny/qlora_single_device", single, "cpu", CellStatus::kRuns,
                                      "2026-12-05T10:00:00Z", 30000, 0.4, std::string(40, '8'));
  repaired.status = CellStatus::kInvalid;
  repaired.reason = "optimizer: a paged optimizer needs cuda; repaired with optimizer=torch.optim.AdamW: runs";
  repaired.repair = {"optimizer=torch.optim.AdamW"};
  repaired.repaired_status = CellStatus::kRuns;
  repaired.numeric_dtype = "bf16";
  repaired.numeric_note = "bf16 on cpu against float32 on cpu: first loss off by 0.12% (tolerance 2%)";
  repaired.reference_time_s = 12.5;
  repaired.output_tail = "Training tiny/qlora_single_device (repaired) on cpu\nFinished: 3 steps\n";
  AddCell(f, "tiny/qlora_single_device", single, {failed, repaired});
}

}  // namespace tmx::matrix::testing
