// Proxy cells: the record made of the proxies' records, and the scheduler running a cell's
// proxies one after the other (against the fake runner).
#include "matrix/proxy_cell.h"

#include <gtest/gtest.h>

#include "harness/run_summary.h"
#include "matrix/journal.h"
#include "matrix/scheduler.h"
#include "matrix/testdata/fake_runner.h"
#include "matrix/testdata/planned_cell.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

PlannedCell ProxiedCell(const std::string& dir) {
  PlannedCell c = RunnableCpuCell("llama3_1/8B_lora_single_device", "lora_finetune_single_device", dir);
  c.preset.status = CellStatus::kTooLarge;
  c.preset.reason = "predicted peak memory 30 GiB exceeds 85% of cpu's 23 GiB";
  c.preset.real_layers = 32;
  for (int64_t layers : {1, 2}) {  // depths of the example (the plan's are kProxyLayers)
    ProxyRun run;
    run.layers = layers;
    run.cut = "model.num_layers " + std::to_string(layers) + " of 32";
    run.argv = {"tune", "run", "model.num_layers=" + std::to_string(layers)};
    run.output_dir = c.output_dir + "__proxy" + std::to_string(layers);
    c.proxies.push_back(run);
  }
  return c;
}

CellResult ProxyRan(double step_s, double tokens_per_s, int64_t peak) {
  CellResult r;
  r.status = CellStatus::kRuns;
  r.step_time_median_s = step_s;
  r.tokens_per_second = tokens_per_s;
  r.peak_memory_bytes = peak;
  r.wall_time_s = 10;
  r.cpu_time_s = 15;
  r.provenance.torch_version = "2.11.0";
  return r;
}

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(ProxyCellTest, EveryProxyRanKeepsTheStatusAndRecordsExtrapolations) {
  PlannedCell cell = ProxiedCell("/tmp");
  // 1 layer: 2 s a step, 3 GiB; 2 layers: 2.5 s, 3.5 GiB. 32 layers: 17.5 s and 18.5 GiB.
  std::vector<CellResult> runs = {ProxyRan(2, 500, 3 * kGiB), ProxyRan(2.5, 400, 7 * kGiB / 2)};
  runs[0].output_tail = "proxy of 1 layer: Finished: 3 steps\n";
  runs[1].output_tail = "proxy of 2 layers: Finished: 3 steps\n";
  CellResult r = ResultFromProxies(cell, runs);
  EXPECT_EQ(r.status, CellStatus::kTooLarge);
  EXPECT_EQ(r.output_tail, "proxy of 2 layers: Finished: 3 steps\n");  // the deepest proxy's, for the page
  EXPECT_EQ(r.ops_verified, true);
  EXPECT_EQ(r.proxy_layers, (std::vector<double>{1, 2}));
  EXPECT_EQ(r.real_layers, 32);
  EXPECT_EQ(r.proxy_cut, "model.num_layers 2 of 32");
  EXPECT_EQ(r.proxy_step_times_s, (std::vector<double>{2, 2.5}));
  EXPECT_DOUBLE_EQ(*r.extrapolated_step_time_s, 17.5);
  // 1000 tokens a step (400 tok/s x 2.5 s) over 17.5 s.
  EXPECT_NEAR(*r.extrapolated_tokens_per_second, 1000 / 17.5, 1e-9);
  EXPECT_EQ(*r.extrapolated_peak_memory_bytes, 37 * kGiB / 2);
  // Nothing of the config itself was measured.
  EXPECT_FALSE(r.peak_memory_bytes);
  EXPECT_FALSE(r.tokens_per_second);
  EXPECT_TRUE(r.step_times_s.empty());
  EXPECT_DOUBLE_EQ(r.wall_time_s, 20);
  EXPECT_DOUBLE_EQ(*r.cpu_time_s, 30);
  EXPECT_EQ(r.reason,
            "predicted peak memory 30 GiB exceeds 85% of cpu's 23 GiB; proxies of 1 and 2 of its 32 layers ran every "
            "operation, extrapolated 18.50 GiB peak, 57.1 tok/s, 18s a step");
}

// The proxies train the same batches, but a step's tokens vary with its data: each proxy's median step can be
// another batch. Time is extrapolated per token (gemma2/2B_full's readings: 1 layer 24.07 s for a median step of
// 1114 tokens, 4 layers 23.54 s for one of 982; per token 21.6 and 24.0 ms, rising).
TEST(ProxyCellTest, TimeIsExtrapolatedPerTokenWhereTheMedianStepsAreDifferentBatches) {
  PlannedCell cell = ProxiedCell("/tmp");
  cell.proxies[1].layers = 4;
  cell.preset.real_layers = 26;
  CellResult r = ResultFromProxies(cell, {ProxyRan(24.07, 46.27, 15 * kGiB), ProxyRan(23.54, 41.70, 19 * kGiB)});
  EXPECT_EQ(r.proxy_note, "");
  const double shallow = 1 / 46.27, deep = 1 / 41.70;
  const double per_token = shallow + (deep - shallow) / 3 * 25;  // 41.6 ms
  ASSERT_TRUE(r.extrapolated_tokens_per_second.has_value());
  EXPECT_NEAR(*r.extrapolated_tokens_per_second, 1 / per_token, 1e-9);
  // A step of the deepest proxy's typical 982 tokens.
  EXPECT_NEAR(*r.extrapolated_step_time_s, per_token * 41.70 * 23.54, 1e-9);

  // A deeper proxy reading less time per token is noise, and is not extrapolated.
  CellResult noisy = ResultFromProxies(cell, {ProxyRan(24.07, 46.27, 15 * kGiB), ProxyRan(23.54, 47, 19 * kGiB)});
  EXPECT_FALSE(noisy.extrapolated_step_time_s);
  EXPECT_FALSE(noisy.extrapolated_tokens_per_second);
  EXPECT_TRUE(noisy.extrapolated_peak_memory_bytes);
  EXPECT_EQ(noisy.proxy_note,
            "not extrapolated: the deeper proxy read less time per token than the shallower (a cost per layer below "
            "the readings' noise)");
}

// The real size's FLOPs per step are the line through the proxies' (rate x step time), over the extrapolated
// step time; the peak and its dtype are the proxies' (same device, same dtype), so the share follows.
TEST(ProxyCellTest, TheRealSizesFlopRateAndShareComeFromTheProxiesCounts) {
  PlannedCell cell = ProxiedCell("/tmp");
  CellResult one = ProxyRan(2, 500, 3 * kGiB), two = ProxyRan(2.5, 400, 7 * kGiB / 2);
  one.flops_per_second = 3e11;  // 6e11 FLOPs a step
  two.flops_per_second = 4e11;  // 1e12: 4e11 a layer, so 32 layers 1.3e13 FLOPs over 17.5 s
  for (CellResult* r : {&one, &two}) {
    r->peak_flops = 1e12;
    r->flops_dtype = "bf16";
  }
  CellResult r = ResultFromProxies(cell, {one, two});
  EXPECT_EQ(r.proxy_flops_per_second, (std::vector<double>{3e11, 4e11}));
  ASSERT_TRUE(r.extrapolated_flops_per_second.has_value());
  EXPECT_NEAR(*r.extrapolated_flops_per_second, 1.3e13 / 17.5, 1);
  EXPECT_EQ(r.flops_dtype, "bf16");
  EXPECT_NEAR(*PeakShare(r, true), 1.3e13 / 17.5 / 1e12, 1e-12);
  EXPECT_FALSE(PeakShare(r).has_value());  // nothing of the config itself was measured
  EXPECT_EQ(PeakShareText(*PeakShare(r, true), r.flops_dtype), "74% of the bf16 peak");
  EXPECT_EQ(PeakShareText(0.0423, ""), "4.2% of peak");
  r.provenance.verified_at = "2026-12-01T05:00:00Z";
  r.config_hash = "abc";
  StatusOr<CellResult> back = CellResultFromJson(ToJson(r), "j:1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->proxy_flops_per_second, r.proxy_flops_per_second);
  EXPECT_EQ(back->extrapolated_flops_per_second, r.extrapolated_flops_per_second);
  EXPECT_EQ(back->peak_flops, r.peak_flops);
  EXPECT_EQ(back->flops_dtype, "bf16");
}

// Where even one layer with its embeddings did not fit, the proxies cut the vocabulary too: the record keeps each
// proxy's ids and the config's, and extrapolates over both.
TEST(ProxyCellTest, AProxyWithACutVocabularyExtrapolatesOverDepthAndIds) {
  PlannedCell cell = ProxiedCell("/tmp");
  cell.preset.real_vocab = 128256;
  cell.proxies.push_back(cell.proxies[0]);
  const int64_t ids[] = {16064, 16064, 8064};
  for (size_t i = 0; i < 3; ++i) {
    cell.proxies[i].vocab = ids[i];
    cell.proxies[i].cut += ", model.vocab_size " + std::to_string(ids[i]) + " of 128256";
  }
  // Per layer 0.5 s and 0.5 GiB; per id 0.0001 s and 1/8000 GiB (1000 tokens a step).
  CellResult r = ResultFromProxies(
      cell, {ProxyRan(2, 500, 3 * kGiB), ProxyRan(2.5, 400, 7 * kGiB / 2), ProxyRan(1.2, 1000 / 1.2, 2 * kGiB)});
  EXPECT_EQ(r.ops_verified, true);
  EXPECT_EQ(r.proxy_layers, (std::vector<double>{1, 2, 1}));
  EXPECT_EQ(r.proxy_vocab, (std::vector<double>{16064, 16064, 8064}));
  EXPECT_EQ(r.real_vocab, 128256);
  EXPECT_EQ(r.proxy_cut, "model.num_layers 2 of 32, model.vocab_size 16064 of 128256");  // the deepest
  EXPECT_NEAR(*r.extrapolated_step_time_s, 17.5 + 0.0001 * (128256 - 16064), 1e-9);
  EXPECT_NEAR(static_cast<double>(*r.extrapolated_peak_memory_bytes),
              18.5 * kGiB + (128256.0 - 16064) / 8000 * kGiB, 2.0);
  EXPECT_EQ(ProxyDepths(r), "1 at 16064 ids, 2 at 16064 ids and 1 at 8064 ids");
  EXPECT_NE(r.reason.find("; proxies of 1 at 16064 ids, 2 at 16064 ids and 1 at 8064 ids of its 32 layers and "
                          "128256 ids ran every operation, extrapolated "),
            std::string::npos)
      << r.reason;
  // Through the journal.
  r.provenance.verified_at = "2026-12-01T05:00:00Z";
  StatusOr<CellResult> back = CellResultFromJson(ToJson(r), "j:1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->proxy_vocab, r.proxy_vocab);
  EXPECT_EQ(back->real_vocab, 128256);
  // The proxy with fewer ids peaking above the one with more: noise, not extrapolated.
  CellResult noisy = ResultFromProxies(
      cell, {ProxyRan(2, 500, 3 * kGiB), ProxyRan(2.5, 400, 7 * kGiB / 2), ProxyRan(1.2, 800, 4 * kGiB)});
  EXPECT_FALSE(noisy.extrapolated_peak_memory_bytes);
  EXPECT_TRUE(noisy.extrapolated_step_time_s);
  EXPECT_EQ(noisy.proxy_note,
            "not extrapolated: a deeper proxy, or one with more ids, read less peak memory than the other (a cost "
            "per layer or per id below the readings' noise)");
}

// A deeper proxy that peaked lower than a shallower one: the difference is noise, and extrapolating it over 30
// layers would publish noise times 30. The memory is not extrapolated (the step time still is).
TEST(ProxyCellTest, ADeeperProxyReadingLessIsNotExtrapolated) {
  PlannedCell cell = ProxiedCell("/tmp");
  CellResult r = ResultFromProxies(cell, {ProxyRan(2, 500, 3 * kGiB), ProxyRan(2.5, 400, 3 * kGiB - (1 << 27))});
  EXPECT_EQ(r.ops_verified, true);
  EXPECT_FALSE(r.extrapolated_peak_memory_bytes);
  EXPECT_TRUE(r.extrapolated_step_time_s);
  EXPECT_EQ(r.proxy_note,
            "not extrapolated: the deeper proxy read less peak memory than the shallower (a cost per layer below the "
            "readings' noise)");
}

// Where only one depth fits the memory, the plan runs that proxy alone with a note: the operations are
// verified, nothing is extrapolated, and the reason says why.
TEST(ProxyCellTest, AShallowProxyAloneVerifiesTheOperationsAndSaysWhyNothingIsExtrapolated) {
  PlannedCell cell = ProxiedCell("/tmp");
  cell.proxies.resize(1);
  cell.preset.proxy_note =
      "only the proxy of 1 layer (model.num_layers 1 of 32) fits the memory here, so nothing is extrapolated";
  CellResult r = ResultFromProxies(cell, {ProxyRan(2, 500, 3 * kGiB)});
  EXPECT_EQ(r.status, CellStatus::kTooLarge);
  EXPECT_EQ(r.ops_verified, true);
  EXPECT_EQ(r.proxy_layers, (std::vector<double>{1}));
  EXPECT_FALSE(r.extrapolated_step_time_s);
  EXPECT_FALSE(r.extrapolated_peak_memory_bytes);
  EXPECT_EQ(r.reason, cell.preset.reason + "; proxies of 1 of its 32 layers ran every operation; " +
                          cell.preset.proxy_note);
}

TEST(ProxyCellTest, AFailingProxyMakesTheCellFailWithItsError) {
  PlannedCell cell = ProxiedCell("/tmp");
  CellResult failed;
  failed.status = CellStatus::kFails;
  failed.reason = "aten::_scaled_dot_product_attention: not implemented for 'Half'";
  failed.exit_code = 1;
  failed.output_tail = "RuntimeError: not implemented";
  CellResult r = ResultFromProxies(cell, {failed});
  EXPECT_EQ(r.status, CellStatus::kFails);
  EXPECT_EQ(r.ops_verified, false);
  EXPECT_EQ(r.reason,
            "the proxy of 1 of its 32 layers (model.num_layers 1 of 32) failed, so the config cannot run here with any "
            "memory or time: aten::_scaled_dot_product_attention: not implemented for 'Half'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output_tail, "RuntimeError: not implemented");
  EXPECT_TRUE(r.proxy_layers.empty());
}

// A deeper proxy stopped at a limit: the shallower one ran every operation (verified), but one depth gives no
// line, so nothing is extrapolated; the first proxy stopped verifies nothing.
TEST(ProxyCellTest, AProxyStoppedAtTheLimitLeavesOnlyWhatRanBeforeIt) {
  PlannedCell cell = ProxiedCell("/tmp");
  CellResult slow;
  slow.status = CellStatus::kTimeout;
  slow.reason = "killed at the wall-clock limit of 15m";
  CellResult r = ResultFromProxies(cell, {ProxyRan(2, 500, 3 * kGiB), slow});
  EXPECT_EQ(r.status, CellStatus::kTooLarge);
  EXPECT_EQ(r.ops_verified, true);
  EXPECT_EQ(r.reason, cell.preset.reason + "; " + r.proxy_note);
  EXPECT_EQ(r.proxy_note,
            "the proxy of 2 of its 32 layers (model.num_layers 2 of 32) stopped (timeout): killed at the wall-clock "
            "limit of 15m, so nothing was extrapolated; the proxy of 1 of its 32 layers (model.num_layers 1 of 32) "
            "ran every operation");
  EXPECT_EQ(r.proxy_layers, (std::vector<double>{1}));
  EXPECT_FALSE(r.extrapolated_step_time_s);
  EXPECT_FALSE(r.extrapolated_peak_memory_bytes);

  CellResult first = ResultFromProxies(cell, {slow});
  EXPECT_EQ(first.status, CellStatus::kTooLarge);
  EXPECT_FALSE(first.ops_verified);
  EXPECT_EQ(first.proxy_note,
            "the proxy of 1 of its 32 layers (model.num_layers 1 of 32) stopped (timeout): killed at the wall-clock "
            "limit of 15m");
  EXPECT_TRUE(first.proxy_layers.empty());
}

TEST(ProxyCellTest, TheProxyFieldsRoundTripThroughTheJournal) {
  PlannedCell cell = ProxiedCell("/tmp");
  CellResult r = ResultFromProxies(cell, {ProxyRan(2, 500, 3 * kGiB), ProxyRan(2.5, 400, 7 * kGiB / 2)});
  r.provenance.verified_at = "2026-12-01T05:00:00Z";
  r.config_hash = "abc";
  StatusOr<CellResult> back = CellResultFromJson(ToJson(r), "j:1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ops_verified, true);
  EXPECT_EQ(back->proxy_layers, r.proxy_layers);
  EXPECT_EQ(back->real_layers, 32);
  EXPECT_EQ(back->proxy_cut, r.proxy_cut);
  EXPECT_EQ(back->proxy_peak_memory_bytes, r.proxy_peak_memory_bytes);
  EXPECT_EQ(back->extrapolated_peak_memory_bytes, r.extrapolated_peak_memory_bytes);
  EXPECT_EQ(back->extrapolated_tokens_per_second, r.extrapolated_tokens_per_second);
  // A record without proxies writes none of their fields.
  CellResult plain;
  plain.key = cell.key;
  plain.device_type = "cpu";
  plain.provenance.verified_at = "2026-12-01T05:00:00Z";
  nlohmann::json j = ToJson(plain);
  EXPECT_FALSE(j.contains("ops_verified"));
  EXPECT_FALSE(j.contains("proxy_layers"));
  j["ops_verified"] = "yes";
  EXPECT_EQ(CellResultFromJson(j, "j:2").status().message(),
            "j:2: cell record field \"ops_verified\" must be true or false, not string");
}

TEST(ProxyCellTest, TheSchedulerRunsTheProxiesInOrderAndRecordsOneCell) {
  test::ScratchDir scratch("proxy_cell_test");
  MatrixOptions options;
  options.journal_path = scratch.path() + "/journal.jsonl";
  PlannedCell cell = ProxiedCell(scratch.path());
  FakeRunner runner;
  std::vector<std::vector<std::string>> argvs;
  runner.on_start = [&](const CellCommand& cmd) {
    argvs.push_back(cmd.argv);
    const bool deeper = cmd.log_path.find("__proxy2") != std::string::npos;
    const RunSummary s = deeper ? TrainedSummary({3, 2.5, 2.5}, 7 * kGiB / 2) : TrainedSummary({3, 2, 2}, 3 * kGiB);
    ASSERT_TRUE(WriteRunSummary(cell.output_dir + (deeper ? "__proxy2" : "__proxy1"), s).ok());
  };
  runner.outcomes[cell.key.config].exit_code = 0;
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells({cell}, {}, runner, options, Provenance{}, progress, [] {
    return std::string("2026-12-01T05:00:00Z");
  });
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(argvs.size(), 2u);
  EXPECT_EQ(argvs[0].back(), "model.num_layers=1");
  EXPECT_EQ(argvs[1].back(), "model.num_layers=2");
  ASSERT_EQ(run->recorded.size(), 1u);
  const CellResult& r = run->recorded[0];
  EXPECT_EQ(r.status, CellStatus::kTooLarge);
  EXPECT_EQ(r.ops_verified, true);
  EXPECT_DOUBLE_EQ(*r.extrapolated_step_time_s, 17.5);
  EXPECT_EQ(*r.extrapolated_peak_memory_bytes, 37 * kGiB / 2);
  EXPECT_NE(progress.str().find("too_large  proxies of 32 layers: ops verified, about 57 tok/s, about 18.50 GiB"),
            std::string::npos)
      << progress.str();
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(journal->size(), 1u);
  EXPECT_EQ((*journal)[0].proxy_layers, (std::vector<double>{1, 2}));
}

// A cell that runs in full and is stopped at the memory limit (its prediction fell short of its peak) goes on
// with the proxies the plan kept ready for it, so its record still verifies its operations and extrapolates.
TEST(ProxyCellTest, ARunStoppedAtTheMemoryLimitGoesOnWithItsProxies) {
  test::ScratchDir scratch("proxy_cell_stopped_test");
  MatrixOptions options;
  options.journal_path = scratch.path() + "/journal.jsonl";
  PlannedCell cell = RunnableCpuCell("qwen3/1.7B_full", "full_finetune_distributed", scratch.path());
  cell.argv = {"tune", "run", "full"};
  auto stopped = std::make_shared<PlannedCell>(ProxiedCell(scratch.path()));
  stopped->key = cell.key;
  stopped->preset.reason = "planned, replaced by the stopped run's";
  cell.if_stopped_at_memory_limit = stopped;
  FakeRunner runner;
  std::vector<std::string> order;
  runner.on_start = [&](const CellCommand& cmd) {
    order.push_back(cmd.argv.back());
    if (cmd.argv.back() == "full") return;  // stopped before it wrote a summary
    const bool deeper = cmd.argv.back() == "model.num_layers=2";
    const RunSummary s = deeper ? TrainedSummary({3, 2.5, 2.5}, 7 * kGiB / 2) : TrainedSummary({3, 2, 2}, 3 * kGiB);
    ASSERT_TRUE(WriteRunSummary(cell.output_dir + (deeper ? "__proxy2" : "__proxy1"), s).ok());
  };
  runner.outcome_of = [](const CellCommand& cmd) {
    SubprocessResult r;
    if (cmd.argv.back() == "full") {
      r.memory_exceeded = true;
      r.peak_rss_bytes = 21 * kGiB;
      r.wall_time_s = 80;
      r.term_signal = 9;
    } else {
      r.exit_code = 0;
      r.wall_time_s = 10;
    }
    return r;
  };
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells({cell}, {}, runner, options, Provenance{}, progress, [] {
    return std::string("2026-12-06T11:00:00Z");
  });
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(order, (std::vector<std::string>{"full", "model.num_layers=1", "model.num_layers=2"}));
  ASSERT_EQ(run->recorded.size(), 1u);
  const CellResult& r = run->recorded[0];
  EXPECT_EQ(r.status, CellStatus::kTooLarge);
  EXPECT_EQ(r.ops_verified, true);
  EXPECT_EQ(r.peak_memory_bytes, 21 * kGiB);  // where it was stopped
  EXPECT_EQ(*r.extrapolated_peak_memory_bytes, 37 * kGiB / 2);
  EXPECT_DOUBLE_EQ(r.wall_time_s, 100);  // the stopped run and both proxies
  EXPECT_EQ(r.reason.rfind("resident memory passed the limit of 85% of cpu's memory and the run was stopped; "
                           "proxies of 1 and 2 of its 32 layers ran every operation, extrapolated 18.50 GiB peak",
                           0),
            0u)
      << r.reason;
  EXPECT_NE(progress.str().find("qwen3/1.7B_full on cpu was stopped at the memory limit; its proxies run instead"),
            std::string::npos)
      << progress.str();
  StatusOr<std::vector<CellResult>> journal = ReadJournal(options.journal_path, nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  ASSERT_EQ(journal->size(), 1u);  // one record for the cell, not one for the stop and one for the proxies

  // Without proxies ready (none fits, or proxies off) the stop is the record.
  cell.if_stopped_at_memory_limit = nullptr;
  order.clear();
  run = RunCells({cell}, {}, runner, options, Provenance{}, progress);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(order, (std::vector<std::string>{"full"}));
  ASSERT_EQ(run->recorded.size(), 1u);
  EXPECT_EQ(run->recorded[0].status, CellStatus::kTooLarge);
  EXPECT_FALSE(run->recorded[0].ops_verified);
}

// A cell too large by its last proxies' extrapolation quotes the new one its proxies measured, and says when
// that fits the limit the last one did not.
TEST(ProxyCellTest, AReasonQuotesTheExtrapolationItsRecordCarries) {
  PlannedCell cell = ProxiedCell("/tmp");
  cell.memory.basis = MemoryJudgement::Basis::kExtrapolated;
  cell.memory.bytes = 30 * kGiB;
  cell.memory.limit_bytes = 21 * kGiB;
  cell.memory.limit = "85% of cpu's 23.54 GiB";
  cell.preset.reason = TooLargeReason(cell.memory, cell.memory.bytes);
  EXPECT_EQ(cell.preset.reason, "extrapolated (from its proxies) peak memory 30.00 GiB exceeds 85% of cpu's 23.54 GiB");
  // 1 layer 3 GiB, 2 layers 4 GiB: 34 GiB at 32 layers.
  CellResult r = ResultFromProxies(cell, {ProxyRan(2, 500, 3 * kGiB), ProxyRan(2.5, 400, 4 * kGiB)});
  EXPECT_EQ(r.reason.rfind("extrapolated (from its proxies) peak memory 34.00 GiB exceeds 85% of cpu's 23.54 GiB; "
                           "proxies of 1 and 2",
                           0),
            0u)
      << r.reason;
  // 1 layer 3 GiB, 2 layers 3.5 GiB: 18.5 GiB, within the limit.
  r = ResultFromProxies(cell, {ProxyRan(2, 500, 3 * kGiB), ProxyRan(2.5, 400, 7 * kGiB / 2)});
  EXPECT_EQ(r.status, CellStatus::kTooLarge);
  EXPECT_EQ(r.reason.rfind("extrapolated (from its proxies) peak memory 18.50 GiB is within 85% of cpu's 23.54 GiB "
                           "(the last proxies' 30.00 GiB was not): the next run tries it in full; proxies of",
                           0),
            0u)
      << r.reason;
  // A cell too large by its prediction keeps the prediction's reason: it is why the proxies ran.
  cell.memory.basis = MemoryJudgement::Basis::kPredicted;
  cell.preset.reason = TooLargeReason(cell.memory, cell.memory.bytes);
  r = ResultFromProxies(cell, {ProxyRan(2, 500, 3 * kGiB), ProxyRan(2.5, 400, 4 * kGiB)});
  EXPECT_EQ(r.reason.rfind("predicted peak memory 30.00 GiB exceeds 85% of cpu's 23.54 GiB; proxies of", 0), 0u)
      << r.reason;
}

// --calibrate: a cell that runs in full runs its proxies first; the record is the full run's, with the
// extrapolation beside its measurements.
TEST(ProxyCellTest, ACalibratedCellRunsItsProxiesThenItselfAndKeepsItsOwnVerdict) {
  test::ScratchDir scratch("proxy_cell_calibrate_test");
  MatrixOptions options;
  options.journal_path = scratch.path() + "/journal.jsonl";
  PlannedCell cell = ProxiedCell(scratch.path());
  cell.argv = {"tune", "run", "full"};
  cell.preset.status = CellStatus::kFails;  // a runnable cell's preset holds no verdict
  cell.preset.reason.clear();
  FakeRunner runner;
  std::vector<std::string> order;
  runner.on_start = [&](const CellCommand& cmd) {
    order.push_back(cmd.argv.back());
    const std::string dir = cmd.log_path.substr(0, cmd.log_path.size() - 4);  // "<output_dir>.log"
    const double step = cmd.argv.back() == "full" ? 17 : cmd.argv.back() == "model.num_layers=1" ? 2 : 2.5;
    const int64_t peak =
        cmd.argv.back() == "full" ? 18 * kGiB : cmd.argv.back() == "model.num_layers=1" ? 3 * kGiB : 7 * kGiB / 2;
    ASSERT_TRUE(WriteRunSummary(dir, TrainedSummary({step + 1, step, step}, peak)).ok());
  };
  runner.outcomes[cell.key.config].exit_code = 0;
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells({cell}, {}, runner, options, Provenance{}, progress, [] {
    return std::string("2026-12-01T05:00:00Z");
  });
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(order, (std::vector<std::string>{"model.num_layers=1", "model.num_layers=2", "full"}));
  ASSERT_EQ(run->recorded.size(), 1u);
  const CellResult& r = run->recorded[0];
  EXPECT_EQ(r.status, CellStatus::kRuns);
  EXPECT_EQ(r.reason, "");
  EXPECT_EQ(r.step_time_median_s, 17);
  EXPECT_EQ(r.peak_memory_bytes, 18 * kGiB);
  EXPECT_DOUBLE_EQ(*r.extrapolated_step_time_s, 17.5);
  EXPECT_EQ(*r.extrapolated_peak_memory_bytes, 37 * kGiB / 2);
  EXPECT_EQ(r.ops_verified, true);
}

TEST(ProxyCellTest, AProxyThatFailsBesideAFullRunIsANoteNotAVerdict) {
  PlannedCell cell = ProxiedCell("/tmp");
  CellResult failed;
  failed.status = CellStatus::kFails;
  failed.reason = "boom";
  CellResult full = ProxyRan(17, 60, 18 * kGiB);
  CellResult r = CalibratedResult(cell, {ProxyRan(2, 500, 3 * kGiB), failed}, full);
  EXPECT_EQ(r.status, CellStatus::kRuns);
  EXPECT_FALSE(r.ops_verified);
  EXPECT_FALSE(r.extrapolated_step_time_s);
  EXPECT_EQ(r.proxy_note, "the proxy of 2 of its 32 layers (model.num_layers 2 of 32) did not run (fails): boom");
}

TEST(ProxyCellTest, AnEnvironmentFailureOfAProxyRecordsNothing) {
  test::ScratchDir scratch("proxy_cell_env_test");
  MatrixOptions options;
  options.journal_path = scratch.path() + "/journal.jsonl";
  PlannedCell cell = ProxiedCell(scratch.path());
  FakeRunner runner;
  runner.outcomes[cell.key.config].exit_code = 1;
  runner.outcomes[cell.key.config].output_tail = "error: No space left on device";
  std::ostringstream progress;
  StatusOr<MatrixRun> run = RunCells({cell}, {}, runner, options, Provenance{}, progress);
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->recorded.empty());
  ASSERT_EQ(run->environment_errors.size(), 1u);
  EXPECT_EQ(runner.started.size(), 1u);  // the second proxy never starts
}

}  // namespace
}  // namespace tmx::matrix
