// Planning on fake device lists: validation, memory prediction, ordering, filters. No training runs.
#include "matrix/plan.h"

#include <algorithm>
#include <optional>
#include <set>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "harness/config_store.h"
#include "matrix/journal.h"
#include "matrix/support_block.h"
#include "tests/scratch_dir.h"
#include "recipes/builtin.h"

namespace tmx::matrix {
namespace {

DeviceInfo Device(const std::string& id, int64_t gib, bool bf16 = true) {
  DeviceInfo d;
  d.id = id;
  d.type = ParseDeviceSelector(id)->type;
  d.index = ParseDeviceSelector(id)->index;
  d.name = id;
  d.total_memory_bytes = gib << 30;
  d.bf16_matmul_backward = bf16;
  d.memory_stats = true;
  return d;
}

size_t BuiltinConfigCount(const std::string& prefix = "") {
  size_t n = 0;
  for (const RecipeSpec& r : recipes::BuiltinRegistry().recipes()) {
    for (const std::string& c : r.configs) n += c.rfind(prefix, 0) == 0;
  }
  return n;
}

const PlannedCell& Find(const std::vector<PlannedCell>& cells, const std::string& config, const std::string& device) {
  for (const PlannedCell& c : cells) {
    if (c.key.config == config && c.key.device == device) return c;
  }
  ADD_FAILURE() << "no cell " << config << " on " << device;
  static PlannedCell none;
  return none;
}

// Options whose cells record into the column of the checkout's committed records (the Intel Xeon with AMX, torch
// 2.11.0), so the plan reads their measurements.
MatrixOptions CommittedColumn() {
  MatrixOptions options;
  options.cpu_class = "amx";
  options.torch_version = "2.11.0";
  return options;
}

TEST(PlanTest, DistributedCellsLaunchTheRanksOfTheirDeviceType) {
  MatrixOptions options = CommittedColumn();
  options.tune_path = "/bin/tune";
  std::vector<DeviceInfo> devices = {Device("cpu", 24), Device("cuda:0", 80)};
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  // cpu: 2 gloo ranks sharing the host; cuda: one rank on the cell's device.
  for (const auto& [device, ranks] : std::vector<std::pair<std::string, std::string>>{{"cpu", "2"}, {"cuda:0", "1"}}) {
    const PlannedCell& cell = Find(*cells, "tiny/lora_distributed", device);
    ASSERT_TRUE(cell.runnable) << device << ": " << cell.preset.reason;
    std::vector<std::string> head(cell.argv.begin(), cell.argv.begin() + 7);
    EXPECT_EQ(head, (std::vector<std::string>{"/bin/tune", "run", "--nproc_per_node", ranks,
                                              "lora_finetune_distributed", "--config", "tiny/lora_distributed"}));
    EXPECT_EQ(cell.preset.world_size, std::stoi(ranks));
  }
  EXPECT_EQ(Find(*cells, "tiny/lora_single_device", "cpu").preset.world_size, 1);
}

TEST(PlanTest, EveryConfigOnEveryDeviceWithStaticOutcomes) {
  MatrixOptions options = CommittedColumn();
  options.tune_path = "/bin/tune";
  std::vector<DeviceInfo> devices = {Device("cpu", 24, /*bf16=*/false),
                                     Device("cuda:0", 40)};
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_EQ(cells->size(), 2 * BuiltinConfigCount());

  // bf16 configs are invalid on a cpu whose bf16 probe failed, with the recipe's own reason; repaired with
  // float32, they run there.
  const PlannedCell& bf16_cpu = Find(*cells, "llama3_2/1B_lora_single_device", "cpu");
  EXPECT_TRUE(bf16_cpu.runnable);
  EXPECT_EQ(bf16_cpu.repair, std::vector<std::string>{"dtype=fp32"});
  EXPECT_EQ(bf16_cpu.written.status, CellStatus::kInvalid);
  EXPECT_NE(bf16_cpu.written.reason.find("dtype bf16 needs a device where bf16 matmul and backward work"),
            std::string::npos)
      << bf16_cpu.written.reason;
  EXPECT_NE(std::find(bf16_cpu.argv.begin(), bf16_cpu.argv.end(), "dtype=fp32"), bf16_cpu.argv.end());
  // The numbers of a repaired cell are checked too: float32 against float32 on cpu.
  EXPECT_EQ(bf16_cpu.reference.dtype, "fp32");
  EXPECT_EQ(bf16_cpu.reference.device, "cpu");
  EXPECT_EQ(bf16_cpu.reference.argv.back(), "dtype=fp32");
  // fp32 tiny configs run there.
  EXPECT_TRUE(Find(*cells, "tiny/full_single_device", "cpu").runnable);

  // Gemma 2 27B's bf16 weights alone are more than 40 GiB * 0.85.
  const PlannedCell& big = Find(*cells, "gemma2/27B_lora_single_device", "cuda:0");
  EXPECT_EQ(big.preset.status, CellStatus::kTooLarge);
  EXPECT_GT(big.predicted_memory_bytes, int64_t{27'227'128'320} * 2);
  EXPECT_NE(big.preset.reason.find("exceeds 85% of cuda:0's 40.00 GiB"), std::string::npos) << big.preset.reason;

  // A runnable cell carries the budgeted child command.
  const PlannedCell& lora = Find(*cells, "llama3_2/1B_lora_single_device", "cuda:0");
  ASSERT_TRUE(lora.runnable);
  std::vector<std::string> head(lora.argv.begin(), lora.argv.begin() + 8);
  EXPECT_EQ(head, (std::vector<std::string>{"/bin/tune", "run", "lora_finetune_single_device", "--config",
                                            "llama3_2/1B_lora_single_device", "--force", "--allow-stand-ins",
                                            "seed=0"}));  // its seed is null: pinned for its reference
  EXPECT_EQ(lora.argv[8], "device=cuda:0");
  // Its reference: the same argv, then float32 on cpu for one step.
  ASSERT_GT(lora.reference.argv.size(), lora.argv.size());
  EXPECT_EQ(std::vector<std::string>(lora.reference.argv.begin(), lora.reference.argv.begin() + 9),
            std::vector<std::string>(lora.argv.begin(), lora.argv.begin() + 9));
  EXPECT_EQ(lora.reference.dtype, "bf16");
  EXPECT_NE(std::find(lora.reference.argv.begin(), lora.reference.argv.end(), "device=cpu"), lora.reference.argv.end());
  EXPECT_NE(std::find(lora.reference.argv.begin(), lora.reference.argv.end(), "max_steps_per_epoch=1"),
            lora.reference.argv.end());

  // Without repairs the bf16 cell is recorded invalid from validation alone; without the numeric check no
  // reference is planned.
  options.repairs = false;
  options.numeric_check = false;
  StatusOr<std::vector<PlannedCell>> plain = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(Find(*plain, "llama3_2/1B_lora_single_device", "cpu").runnable);
  EXPECT_EQ(Find(*plain, "llama3_2/1B_lora_single_device", "cpu").preset.status, CellStatus::kInvalid);
  EXPECT_TRUE(Find(*plain, "llama3_2/1B_lora_single_device", "cuda:0").reference.argv.empty());
  // LoRA trains far fewer parameters than full fine-tuning of the same model.
  EXPECT_LT(Find(*cells, "qwen2_5/0.5B_lora_single_device", "cuda:0").predicted_memory_bytes,
            Find(*cells, "qwen2_5/0.5B_full_single_device", "cuda:0").predicted_memory_bytes);

  // Cells recorded without running come first, then runnable ones cheapest first.
  bool seen_runnable = false;
  double last_cost = 0;
  for (const PlannedCell& c : *cells) {
    if (!c.runnable) {
      EXPECT_FALSE(seen_runnable) << c.key.config;
      continue;
    }
    seen_runnable = true;
    EXPECT_GE(c.expected_duration_s, last_cost) << c.key.config;
    last_cost = c.expected_duration_s;
  }
}

TEST(PlanTest, FiltersAndUnknownNames) {
  MatrixOptions options = CommittedColumn();
  options.config_globs = {"tiny/*"};
  options.devices = {"cpu"};
  std::vector<DeviceInfo> devices = {Device("cpu", 24), Device("cuda:0", 80)};
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(cells.ok());
  ASSERT_EQ(cells->size(), BuiltinConfigCount("tiny/"));
  for (const PlannedCell& c : *cells) EXPECT_EQ(c.key.device, "cpu");

  options.devices = {"xpu"};
  EXPECT_EQ(PlanCells(recipes::BuiltinRegistry(), devices, options).status().message(),
            "--devices: device 'xpu' is not available on this machine (available: cpu, cuda:0)");
  options.devices = {};
  options.recipes = {"lora_finetune"};
  EXPECT_EQ(PlanCells(recipes::BuiltinRegistry(), devices, options).status().message(),
            "--recipes: unknown recipe 'lora_finetune'; did you mean 'lora_finetune_single_device'?");
}

// --recipes and --configs choose cells, not the measurements their predictions come from: a cell is planned
// alike in a run of a few configs and in a run of all.
TEST(PlanTest, FiltersDoNotChangeTheRatesPredictionsUse) {
  MatrixOptions options = CommittedColumn();
  std::vector<DeviceInfo> devices = {Device("cpu", 24)};
  StatusOr<std::vector<PlannedCell>> all = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  options.recipes = {"lora_finetune_distributed"};
  options.config_globs = {"qwen*"};
  StatusOr<std::vector<PlannedCell>> some = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(some.ok()) << some.status().ToString();
  ASSERT_FALSE(some->empty());
  for (const PlannedCell& c : *some) {
    EXPECT_EQ(c.recipe, "lora_finetune_distributed");
    EXPECT_EQ(c.key.config.rfind("qwen", 0), 0u) << c.key.config;
    const PlannedCell& same = Find(*all, c.key.config, c.key.device);
    EXPECT_EQ(c.expected_duration_s, same.expected_duration_s) << c.key.config;
    EXPECT_EQ(c.preset.status, same.preset.status) << c.key.config;
    EXPECT_EQ(c.runnable, same.runnable) << c.key.config;
  }
}

// Shards of the built-in matrix: together every cell once, durations taken from the configs' records.
TEST(PlanTest, ShardsPartitionTheCellsUsingRecordedDurations) {
  MatrixOptions options = CommittedColumn();
  std::vector<DeviceInfo> devices = {Device("cpu", 24, /*bf16=*/false),
                                     Device("cuda:0", 40)};
  StatusOr<std::vector<PlannedCell>> all = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  for (const PlannedCell& c : *all) {
    SupportEntries recorded = ReadSupportEntries(ReadFile(c.config_path).value(), c.config_path).value();
    auto entry = recorded.find(c.column);
    std::optional<CellStatus> status =
        entry == recorded.end() ? std::nullopt : ParseCellStatus(entry->second.status);
    if (!c.runnable) {
      EXPECT_EQ(c.expected_duration_s, 0) << c.key.config << " on " << c.key.device << ": not started";
    } else if (c.argv.empty()) {
      // Proxied (a bf16 config repaired to float32 for this cpu can outgrow it): its proxies' predictions.
      EXPECT_GT(c.expected_duration_s, 0) << c.key.config << " on " << c.key.device << ": proxied";
    } else if (status == CellStatus::kRuns && entry->second.startup_time_s && entry->second.step_time_s) {
      // Its recorded start-up and steps, at the steps it is planned to train.
      EXPECT_DOUBLE_EQ(c.expected_duration_s, *entry->second.startup_time_s + c.steps * *entry->second.step_time_s)
          << c.key.config;
    } else if (status && CellStarted(*status) && entry->second.wall_time_s) {
      EXPECT_DOUBLE_EQ(c.expected_duration_s, *entry->second.wall_time_s) << c.key.config;
    } else {
      EXPECT_GT(c.expected_duration_s, 0) << c.key.config << " on " << c.key.device << ": estimated";
    }
  }
  for (int n : {2, 3, 5}) {
    std::multiset<CellKey> seen;
    for (int i = 1; i <= n; ++i) {
      options.shard_index = i;
      options.shard_count = n;
      StatusOr<std::vector<PlannedCell>> shard = PlanCells(recipes::BuiltinRegistry(), devices, options);
      ASSERT_TRUE(shard.ok());
      EXPECT_FALSE(shard->empty()) << i << "/" << n;
      for (const PlannedCell& c : *shard) seen.insert(c.key);
    }
    ASSERT_EQ(seen.size(), all->size()) << n;
    for (const PlannedCell& c : *all) EXPECT_EQ(seen.count(c.key), 1u) << c.key.config << " " << c.key.device;
  }
}

TEST(PlanTest, ACellPredictedOverTheBudgetIsTooSlowOnlyWhereItsDeviceTypeWasMeasured) {
  MatrixOptions options = CommittedColumn();
  options.tune_path = "/bin/tune";
  options.config_globs = {"llama3_2/*_lora_single_device"};
  options.proxies = false;  // ACellTooLargeForItsDeviceRunsProxiesThatFit has them
  std::vector<DeviceInfo> devices = {Device("cpu", 24), Device("cuda:0", 80)};
  // The committed configs hold cpu measurements and none on cuda.
  options.cell_budget_s = 0.001;
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  const PlannedCell& cpu = Find(*cells, "llama3_2/1B_lora_single_device", "cpu");
  EXPECT_FALSE(cpu.runnable);
  EXPECT_EQ(cpu.preset.status, CellStatus::kTooSlow);
  EXPECT_NE(cpu.preset.reason.find("over the cell budget of"), std::string::npos) << cpu.preset.reason;
  EXPECT_NE(cpu.preset.reason.find("tune-matrix cell llama3_2/1B_lora_single_device --device cpu"),
            std::string::npos)
      << cpu.preset.reason;
  EXPECT_EQ(cpu.expected_duration_s, 0);
  EXPECT_TRUE(Find(*cells, "llama3_2/1B_lora_single_device", "cuda:0").runnable);  // no rate known there

  options.cell_budget_s = 0;  // no budget
  cells = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(cells.ok());
  EXPECT_TRUE(Find(*cells, "llama3_2/1B_lora_single_device", "cpu").runnable);
}

TEST(PlanTest, ABandAroundTheBudgetKeepsAMeasuredCellFromFlipping) {
  MatrixOptions options = CommittedColumn();
  options.config_globs = {"llama3_2/1B_lora_single_device"};
  std::vector<DeviceInfo> devices = {Device("cpu", 24)};
  StatusOr<std::vector<PlannedCell>> unbudgeted = [&] {
    MatrixOptions o = options;
    o.cell_budget_s = 0;
    o.startup_share = 0;  // judged at the base steps
    return PlanCells(recipes::BuiltinRegistry(), devices, o);
  }();
  ASSERT_TRUE(unbudgeted.ok());
  const double took = unbudgeted->front().expected_duration_s;  // its recorded wall time at 3 steps
  ASSERT_GT(took, 0);
  options.cell_budget_s = took / 1.2;  // over the budget, inside the band: measured again
  EXPECT_TRUE(PlanCells(recipes::BuiltinRegistry(), devices, options)->front().runnable);
  options.cell_budget_s = took / 1.3;  // past the band
  EXPECT_EQ(PlanCells(recipes::BuiltinRegistry(), devices, options)->front().preset.status, CellStatus::kTooSlow);
}

TEST(PlanTest, ACellPredictedJustOverTheMemoryLimitIsTried) {
  MatrixOptions options = CommittedColumn();
  options.config_globs = {"tiny/lora_single_device"};
  options.cell_budget_s = 0;
  StatusOr<std::vector<PlannedCell>> roomy = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 64)}, options);
  ASSERT_TRUE(roomy.ok());
  const double predicted = static_cast<double>(roomy->front().predicted_memory_bytes);
  for (auto [over, runnable] : {std::pair{1.03, true}, std::pair{1.08, false}}) {
    DeviceInfo cpu = Device("cpu", 1);
    cpu.total_memory_bytes = static_cast<int64_t>(predicted / (over * options.memory_fraction));
    StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), {cpu}, options);
    ASSERT_TRUE(cells.ok());
    EXPECT_EQ(cells->front().runnable, runnable) << "predicted " << over << "x the limit";
    if (!runnable) EXPECT_EQ(cells->front().preset.status, CellStatus::kTooLarge);
  }
}

TEST(CellStepsTest, MoreStepsOnlyWhereTheyBringStartUpDownToItsShare) {
  // 3 steps, start-up at most 15% (aiming at 10%), at most 12 steps, budget 150 s
  MatrixOptions options = CommittedColumn();
  // 2.25 s of start-up and 3.26 s steps: 18.7% at 3 steps, 11.4% at 6, 9.0% at 7.
  EXPECT_EQ(CellSteps(2.25, 3.26, options), 7);
  EXPECT_EQ(CellSteps(13.6, 22.3, options), 6);  // 147.4 s, within the budget
  // Start-up already a small share: the base steps.
  EXPECT_EQ(CellSteps(3.4, 16.4, options), 3);
  EXPECT_EQ(CellSteps(0, 1, options), 3);
  // Exactly at the aim: 1.5 / (1.5 + 3 x 4.5) is 10%; a little slower steps need a fourth.
  EXPECT_EQ(CellSteps(1.5, 4.5, options), 3);
  EXPECT_EQ(CellSteps(1.5, 4.4, options), 4);
  // A tiny model (0.57 s start-up, 0.05 s steps) would need 103 steps: more than 12 buy nothing.
  EXPECT_EQ(CellSteps(0.57, 0.05, options), 3);
  // 12 steps reach it: 0.9 / (0.9 + 12 x 0.7) = 9.7%.
  EXPECT_EQ(CellSteps(0.9, 0.7, options), 12);
  // Within the budget: 13.6 s + 6 x 22.3 s passes 80 s, so the most that fit, never fewer than the base.
  options.cell_budget_s = 80;
  EXPECT_EQ(CellSteps(13.6, 22.3, options), 3);
  options.cell_budget_s = 10.5;
  EXPECT_EQ(CellSteps(1, 0.75, options), 12);  // 1 / (1 + 12 x 0.75) = 10%, 10 s
  EXPECT_EQ(CellSteps(2, 0.75, options), 3);   // would need 24 steps
  options.cell_budget_s = 5;
  EXPECT_EQ(CellSteps(1, 0.75, options), 5);  // 12 steps do not fit in 5 s; 5 do (4.75 s)
  // Switched off, and nonsense inputs: the base steps.
  options = CommittedColumn();
  options.startup_share = 0;
  EXPECT_EQ(CellSteps(2.25, 3.26, options), 3);
  options = CommittedColumn();
  EXPECT_EQ(CellSteps(2.25, 0, options), 3);
  EXPECT_EQ(CellSteps(-1, 3, options), 3);
}

// The committed cpu records carry start-up and step times: each runnable cell trains the steps they call
// for, and its child command says so.
TEST(PlanTest, ACellTrainsTheStepsItsRecordedStartUpCallsFor) {
  MatrixOptions options = CommittedColumn();
  options.tune_path = "/bin/tune";
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 24)}, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  int extended = 0;
  for (const PlannedCell& c : *cells) {
    if (!c.runnable || !c.proxies.empty()) continue;  // a proxied cell trains max_steps per proxy
    SupportEntries recorded = ReadSupportEntries(ReadFile(c.config_path).value(), c.config_path).value();
    auto entry = recorded.find(c.column);
    // Never run here (no record, or one from the plan alone: a proxied too_slow cell the rates now let in): its
    // steps follow a predicted start-up.
    if (entry == recorded.end() || !CellStarted(*ParseCellStatus(entry->second.status))) continue;
    int want = options.max_steps;
    // A record from before start-up was recorded keeps the base steps.
    if (entry != recorded.end() && entry->second.status == "runs" && entry->second.wall_time_s &&
        entry->second.startup_time_s && entry->second.step_time_s) {
      want = CellSteps(*entry->second.startup_time_s, *entry->second.step_time_s, options);
    }
    EXPECT_EQ(c.steps, want) << c.key.config;
    // The recipe's own budget for that many steps (max_steps_per_epoch=N; generation: max_new_tokens=...).
    const RecipeSpec* recipe = recipes::BuiltinRegistry().RecipeForConfig(c.key.config);
    ASSERT_NE(recipe, nullptr) << c.key.config;
    for (const std::string& o : recipe->cell_overrides(want)) {
      EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), o), c.argv.end()) << c.key.config << ": " << o;
    }
    extended += c.steps > options.max_steps;
  }
  // The Qwen 0.5B cells' start-up is about a sixth of their wall time at 3 steps.
  EXPECT_GT(extended, 0);

  options.startup_share = 0;
  cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 24)}, options);
  ASSERT_TRUE(cells.ok());
  for (const PlannedCell& c : *cells) {
    if (c.runnable) EXPECT_EQ(c.steps, 3) << c.key.config;
  }
}

// A run plans from its own column's records only: the committed AMX records time and judge the AMX column's cells,
// and none of another class's or torch's.
TEST(PlanTest, ACellIsPlannedFromTheRecordsOfItsOwnColumnOnly) {
  MatrixOptions options = CommittedColumn();
  options.tune_path = "/bin/tune";
  options.config_globs = {"tiny/lora_single_device"};
  std::vector<DeviceInfo> devices = {Device("cpu", 24)};
  StatusOr<std::vector<PlannedCell>> amx = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(amx.ok()) << amx.status().ToString();
  ASSERT_EQ(amx->size(), 1u);
  EXPECT_EQ(amx->front().column, "cpu (amx, torch 2.11.0)");
  EXPECT_EQ(DeviceShown(amx->front()), "cpu (amx, torch 2.11.0)");
  EXPECT_FALSE(amx->front().recorded_at.empty()) << "the committed record of this config";
  for (const auto& [cpu_class, torch] : {std::pair<std::string, std::string>{"avx2", "2.11.0"}, {"amx", "2.15.0"}}) {
    options.cpu_class = cpu_class;
    options.torch_version = torch;
    StatusOr<std::vector<PlannedCell>> other = PlanCells(recipes::BuiltinRegistry(), devices, options);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_EQ(other->front().column, "cpu (" + cpu_class + ", torch " + torch + ")");
    EXPECT_TRUE(other->front().recorded_at.empty()) << other->front().column;
  }
}

// The options the proxy tests plan one config with: no cell budget, so only the memory decides.
MatrixOptions ProxyTestOptions(const std::string& config) {
  MatrixOptions options = CommittedColumn();
  options.tune_path = "/bin/tune";
  options.config_globs = {config};
  options.cell_budget_s = 0;
  return options;
}

// A cell too large for its device runs proxies of its config instead: the same `tune run` with the model cut to
// 1 and then 4 layers (kProxyLayers), each in its own output folder; the cell keeps its too_large status and reason for the
// record. --no-proxies records it from the prediction alone, and a proxy that would not fit either is named.
TEST(PlanTest, ACellTooLargeForItsDeviceRunsProxiesThatFit) {
  MatrixOptions options = ProxyTestOptions("llama3_1/8B_lora_single_device");
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 12)}, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  ASSERT_EQ(cells->size(), 1u);
  const PlannedCell& c = cells->front();
  EXPECT_EQ(c.preset.status, CellStatus::kTooLarge) << c.preset.reason;
  EXPECT_TRUE(c.runnable) << c.preset.reason;
  EXPECT_TRUE(c.argv.empty());
  EXPECT_EQ(c.preset.real_layers, 32);
  ASSERT_EQ(c.proxies.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ProxyRun& p = c.proxies[i];
    const std::string depth = std::to_string(kProxyLayers[i]);
    EXPECT_EQ(p.layers, kProxyLayers[i]);
    EXPECT_EQ(p.cut, "model.num_layers " + depth + " of 32");
    EXPECT_EQ(p.output_dir, c.output_dir + "__proxy" + depth);
    // The config's own launch and overrides, then the cut.
    EXPECT_EQ(std::vector<std::string>(p.argv.begin(), p.argv.begin() + 5),
              (std::vector<std::string>{"/bin/tune", "run", "lora_finetune_single_device", "--config",
                                        "llama3_1/8B_lora_single_device"}));
    EXPECT_NE(std::find(p.argv.begin(), p.argv.end(), "output_dir=" + p.output_dir), p.argv.end());
    EXPECT_NE(std::find(p.argv.begin(), p.argv.end(), "model.num_layers=" + depth), p.argv.end());
    EXPECT_NE(std::find(p.argv.begin(), p.argv.end(), "device=cpu"), p.argv.end());
    EXPECT_GT(p.predicted_memory_bytes, 0);
    EXPECT_LT(p.predicted_memory_bytes, c.predicted_memory_bytes / 3);
  }
  EXPECT_LT(c.proxies[0].predicted_memory_bytes, c.proxies[1].predicted_memory_bytes);
  const int64_t deep = c.proxies[1].predicted_memory_bytes;  // `c` dangles once `cells` is planned again

  options.proxies = false;
  cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 12)}, options);
  ASSERT_TRUE(cells.ok());
  EXPECT_FALSE(cells->front().runnable);
  EXPECT_TRUE(cells->front().proxies.empty());

  // On 1 GiB not even one layer with its embeddings fits: the reason says so.
  options.proxies = true;
  cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 1)}, options);
  ASSERT_TRUE(cells.ok());
  const PlannedCell& small = cells->front();
  EXPECT_FALSE(small.runnable);
  EXPECT_EQ(small.preset.status, CellStatus::kTooLarge);
  EXPECT_NE(small.preset.reason.find("; no proxy: even 1 layer (model.num_layers 1 of 32) is predicted to need "),
            std::string::npos)
      << small.preset.reason;
  EXPECT_EQ(small.preset.reason.substr(small.preset.reason.find("; no proxy") + 2), small.preset.proxy_note);

  // Memory for the 1-layer proxy but not the 4-layer one: the deeper proxy is kProxyFallbackLayers deep.
  DeviceInfo tight = Device("cpu", 12);
  tight.total_memory_bytes = static_cast<int64_t>(
      static_cast<double>(deep - 1) / (kProxyMemoryAim * (1 + kMemoryPredictionTolerance) * options.memory_fraction));
  cells = PlanCells(recipes::BuiltinRegistry(), {tight}, options);
  ASSERT_TRUE(cells.ok());
  ASSERT_EQ(cells->front().proxies.size(), 2u) << cells->front().preset.reason;
  EXPECT_EQ(cells->front().proxies[1].layers, kProxyFallbackLayers);
  EXPECT_EQ(cells->front().preset.proxy_note, "");
}

// Where not even one layer with its embeddings fits (Llama 3 8B full: two 128256 x 4096 tables, their
// gradients and AdamW state), the proxies cut the vocabulary too, by the smallest power of two that fits both
// depths, and a third proxy at one layer and half those ids measures the cost per id.
TEST(PlanTest, ACellWhoseEmbeddingsAloneDoNotFitRunsProxiesWithACutVocabulary) {
  MatrixOptions options = ProxyTestOptions("llama3/8B_full");
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 24)}, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  ASSERT_EQ(cells->size(), 1u);
  const PlannedCell& c = cells->front();
  EXPECT_EQ(c.preset.status, CellStatus::kTooLarge) << c.preset.reason;
  ASSERT_TRUE(c.runnable) << c.preset.reason;
  EXPECT_EQ(c.preset.proxy_note, "");
  EXPECT_EQ(c.preset.real_layers, 32);
  EXPECT_EQ(c.preset.real_vocab, 128256);
  ASSERT_EQ(c.proxies.size(), 3u);
  const int64_t ids = c.proxies[0].vocab;
  EXPECT_GT(ids, 0);
  EXPECT_LT(ids, 128256);
  EXPECT_EQ(ids % 64, 0);  // whole tiles
  EXPECT_EQ(c.proxies[0].layers, kProxyLayers[0]);
  EXPECT_EQ(c.proxies[1].vocab, ids);
  EXPECT_GT(c.proxies[1].layers, 1);
  EXPECT_EQ(c.proxies[2].layers, 1);
  EXPECT_LT(c.proxies[2].vocab, ids);
  std::set<std::string> dirs;
  for (const ProxyRun& p : c.proxies) {
    dirs.insert(p.output_dir);
    // The child writes where the matrix reads it back.
    EXPECT_NE(std::find(p.argv.begin(), p.argv.end(), "output_dir=" + p.output_dir), p.argv.end()) << p.output_dir;
    EXPECT_NE(std::find(p.argv.begin(), p.argv.end(), "model.vocab_size=" + std::to_string(p.vocab)), p.argv.end());
    EXPECT_NE(p.cut.find("model.vocab_size " + std::to_string(p.vocab) + " of 128256"), std::string::npos) << p.cut;
    EXPECT_LE(p.predicted_memory_bytes, static_cast<int64_t>(kProxyMemoryAim * (1 + kMemoryPredictionTolerance) *
                                                              options.memory_fraction * 24.0 * (int64_t{1} << 30)));
  }
  EXPECT_EQ(dirs.size(), 3u);
  // Without room for even the vocabulary cut by kMaxVocabDivisor, the reason says what was tried.
  cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 1)}, options);
  ASSERT_TRUE(cells.ok());
  EXPECT_FALSE(cells->front().runnable);
  EXPECT_EQ(cells->front().preset.real_vocab, 0);
  EXPECT_NE(cells->front().preset.proxy_note.find("; nor with its vocabulary cut by up to 64"), std::string::npos)
      << cells->front().preset.proxy_note;
}

// Gemma 2 27B full on 2 ranks: one layer's gradients and AdamW state are too large for a second depth beside
// it at any cut of the vocabulary, so the shallow proxy runs alone (with the most ids that fit) and the note
// says that nothing will be extrapolated; before, no proxy ran and nothing verified the operations.
TEST(PlanTest, WhereNoSecondDepthFitsTheShallowProxyRunsAlone) {
  MatrixOptions options = ProxyTestOptions("gemma2/27B_full");
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 24)}, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  const PlannedCell& c = cells->front();
  ASSERT_TRUE(c.runnable) << c.preset.reason;
  ASSERT_EQ(c.proxies.size(), 1u) << c.preset.reason;
  EXPECT_EQ(c.proxies[0].layers, 1);
  // The most ids that fit on 24 GiB: 256000 / 16 (32000 do not), not the smallest cut tried after it.
  EXPECT_EQ(c.proxies[0].vocab, 16000);
  EXPECT_EQ(c.preset.real_vocab, 256000);
  EXPECT_EQ(c.preset.real_layers, 46);
  EXPECT_EQ(c.preset.proxy_note, "only the proxy of 1 layer (" + c.proxies[0].cut +
                                     ") fits the memory here, so nothing is extrapolated");
  // With room for two depths the usual proxies come back.
  cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 64)}, options);
  ASSERT_TRUE(cells.ok());
  EXPECT_GE(cells->front().proxies.size(), 2u) << cells->front().preset.reason;
  EXPECT_EQ(cells->front().preset.proxy_note, "");
}

// --calibrate: a real-size cell that runs in full runs its proxies first (the argv stays the cell's own); a tiny
// one, whose two layers leave nothing to cut, runs alone.
TEST(PlanTest, CalibrationRunsTheProxiesOfCellsThatRunInFull) {
  MatrixOptions options = CommittedColumn();
  options.tune_path = "/bin/tune";
  options.cell_budget_s = 0;
  options.calibrate = true;
  options.config_globs = {"qwen2_5/0.5B_full_single_device", "tiny/lora_single_device"};
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 24)}, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  const PlannedCell& real = Find(*cells, "qwen2_5/0.5B_full_single_device", "cpu");
  ASSERT_TRUE(real.runnable);
  EXPECT_FALSE(real.argv.empty());
  ASSERT_EQ(real.proxies.size(), 2u);
  EXPECT_EQ(real.preset.real_layers, 24);
  EXPECT_EQ(real.proxies[1].cut, "model.num_layers 4 of 24");
  const PlannedCell& tiny = Find(*cells, "tiny/lora_single_device", "cpu");
  EXPECT_TRUE(tiny.runnable);
  EXPECT_TRUE(tiny.proxies.empty());
}

// A user's config file is planned like a built-in one, under its own name and path, and only it; what it
// has recorded is its newest record in the run's journal.
// A user's copy of tiny/lora_single_device ("my_lora") planned alone on a 24 GiB cpu, and a record of it in
// its journal to plan from.
struct UserLora {
  explicit UserLora(const test::ScratchDir& scratch)
      : path(scratch.path() + "/my_lora.yaml"), text(ReadFile(BuiltinConfigPath("tiny/lora_single_device")).value()) {
    EXPECT_TRUE(WriteFileAtomically(path, text).ok());
    options.tune_path = "/bin/tune";
    options.journal_path = scratch.path() + "/journal.jsonl";
    options.user_configs = {{"my_lora", path, "lora_finetune_single_device"}};
    record.key = {"my_lora", "cpu"};
    record.recipe = "lora_finetune_single_device";
    record.device_type = "cpu";
    record.status = CellStatus::kRuns;
    record.config_hash = ConfigHash(text);
    record.wall_time_s = 5;
    record.tokens_per_second = 100;
    record.step_times_s = {1};  // the speed's timed step (matrix/record_rules.h)
    record.provenance = {"host", "", "", "2.11.0", "Test CPU", "2026-11-22T10:00:00Z", "amx"};
  }
  // Writes `record` as the journal's only line and plans.
  StatusOr<std::vector<PlannedCell>> PlanFromRecord() const {
    EXPECT_TRUE(WriteFileAtomically(options.journal_path, JournalLine(record) + "\n").ok());
    return PlanCells(recipes::BuiltinRegistry(), devices, options);
  }
  std::string path, text;
  MatrixOptions options = CommittedColumn();
  std::vector<DeviceInfo> devices = {Device("cpu", 24)};
  CellResult record;
};

// --time-limit: the cells with the oldest records (none: first of all) run in that order as far as their
// predicted times fit; the oldest always runs, however long, so every cell gets its turn in some run.
TEST(PlanTest, ATimeLimitKeepsTheOldestRecordsThatFitAndDefersTheRest) {
  auto cell = [](const std::string& name, const std::string& recorded_at, double seconds) {
    PlannedCell c;
    c.key = {name, "cpu"};
    c.runnable = true;
    c.recorded_at = recorded_at;
    c.expected_duration_s = seconds * 0.75;
    c.reference.expected_duration_s = seconds * 0.25;  // the reference counts too
    return c;
  };
  std::vector<PlannedCell> cells = {
      cell("new", "2026-12-06T10:00:00Z", 10), cell("old_long", "2026-12-01T10:00:00Z", 50),
      cell("never", "", 30),                   cell("older", "2026-11-30T10:00:00Z", 25),
      cell("mid", "2026-12-03T10:00:00Z", 20),
  };
  PlannedCell invalid = cell("invalid", "", 0);
  invalid.runnable = false;
  cells.push_back(invalid);
  DeferOverTheTimeLimit(80, &cells);
  std::set<std::string> deferred;
  for (const PlannedCell& c : cells) {
    if (c.deferred) deferred.insert(c.key.config);
  }
  // never (30) + older (25) = 55; old_long (50) does not fit, and the run stops there: mid (20) would fit, but
  // the time left is not filled with newer records.
  EXPECT_EQ(deferred, (std::set<std::string>{"old_long", "mid", "new"}));

  // The oldest runs even when it alone is over the limit.
  cells = {cell("huge", "", 500), cell("small", "2026-12-06T10:00:00Z", 1)};
  DeferOverTheTimeLimit(60, &cells);
  EXPECT_FALSE(cells[0].deferred);
  EXPECT_TRUE(cells[1].deferred);

  // Only the first is exempt: oldest cells predicted at no time do not all count as the first.
  cells = {cell("zero_a", "", 0), cell("zero_b", "", 0), cell("long", "2026-12-01T10:00:00Z", 500),
           cell("next", "2026-12-02T10:00:00Z", 1)};
  DeferOverTheTimeLimit(60, &cells);
  EXPECT_FALSE(cells[0].deferred);
  EXPECT_FALSE(cells[1].deferred);  // fits: 0 s
  EXPECT_TRUE(cells[2].deferred);   // 500 s after the first is over the limit
  EXPECT_TRUE(cells[3].deferred);   // and the run stops there
}

// A run stopped here at the memory limit recorded the resident memory it was stopped at: the cell is too large
// from then on, though its prediction (and the tolerance above the limit a prediction gets) would try it
// again; a device with more memory tries it.
TEST(PlanTest, ARunStoppedAtTheMemoryLimitIsTooLargeUntilADeviceHasMore) {
  test::ScratchDir scratch("plan_test");
  UserLora lora(scratch);
  lora.record.status = CellStatus::kTooLarge;
  lora.record.reason = "resident memory passed the limit of 85% of cpu's memory and the run was stopped";
  lora.record.peak_memory_bytes = static_cast<int64_t>(0.86 * 24 * (int64_t{1} << 30));  // under the start limit
  StatusOr<std::vector<PlannedCell>> cells = lora.PlanFromRecord();
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_FALSE(cells->front().runnable && !cells->front().argv.empty());
  EXPECT_EQ(cells->front().preset.status, CellStatus::kTooLarge);
  EXPECT_EQ(cells->front().preset.reason.substr(0, cells->front().preset.reason.find(';')),
            "its last run here was stopped at the memory limit, at 20.64 GiB resident, over 85% of cpu's 24.00 GiB");
  EXPECT_EQ(cells->front().preset.peak_memory_bytes, lora.record.peak_memory_bytes);  // the stop stays its evidence
  lora.devices = {Device("cpu", 32)};
  cells = lora.PlanFromRecord();
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_TRUE(cells->front().runnable);
  EXPECT_FALSE(cells->front().argv.empty()) << cells->front().preset.reason;
}

// A host cell that runs in full has its proxies planned for the case its run is stopped at the memory limit:
// as a too_large cell's, with their own reference; none beside proxies (calibration) or on a device whose
// memory is not the host's.
TEST(PlanTest, ACellThatRunsInFullHasProxiesReadyForAStopAtTheMemoryLimit) {
  MatrixOptions options = CommittedColumn();
  options.tune_path = "/bin/tune";
  options.config_globs = {"llama3_2/1B_lora_single_device"};
  options.cell_budget_s = 0;
  StatusOr<std::vector<PlannedCell>> cells =
      PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 64), Device("cuda:0", 80)}, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  const PlannedCell& cpu = Find(*cells, "llama3_2/1B_lora_single_device", "cpu");
  ASSERT_FALSE(cpu.argv.empty());
  ASSERT_NE(cpu.if_stopped_at_memory_limit, nullptr);
  const PlannedCell& stopped = *cpu.if_stopped_at_memory_limit;
  EXPECT_TRUE(stopped.RunsProxiesInstead());
  EXPECT_EQ(stopped.preset.real_layers, 16);
  ASSERT_EQ(stopped.proxies.size(), 2u);
  EXPECT_EQ(stopped.proxies[0].layers, kProxyLayers[0]);
  EXPECT_NE(std::find(stopped.proxies[1].argv.begin(), stopped.proxies[1].argv.end(),
                      "model.num_layers=" + std::to_string(kProxyLayers[1])),
            stopped.proxies[1].argv.end());
  ASSERT_FALSE(stopped.reference.argv.empty()) << stopped.reference.note;
  EXPECT_NE(std::find(stopped.reference.argv.begin(), stopped.reference.argv.end(),
                      "model.num_layers=" + std::to_string(kProxyLayers[0])),
            stopped.reference.argv.end());
  EXPECT_EQ(Find(*cells, "llama3_2/1B_lora_single_device", "cuda:0").if_stopped_at_memory_limit, nullptr);

  options.proxies = false;
  cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 64)}, options);
  ASSERT_TRUE(cells.ok());
  EXPECT_EQ(cells->front().if_stopped_at_memory_limit, nullptr);
  options.proxies = true;
  options.calibrate = true;
  cells = PlanCells(recipes::BuiltinRegistry(), {Device("cpu", 64)}, options);
  ASSERT_TRUE(cells.ok());
  EXPECT_FALSE(cells->front().proxies.empty());
  EXPECT_EQ(cells->front().if_stopped_at_memory_limit, nullptr);
}

// A cell's numeric check adds a child, its float32 reference: planned at the checked run's expected time (the
// cell's, or its shallowest proxy's) until a record says how long it took, and counted in the cell's total.
TEST(PlanTest, TheReferenceRunIsPartOfACellsTime) {
  test::ScratchDir scratch("plan_test");
  UserLora lora(scratch);
  lora.record.peak_memory_bytes = int64_t{1} << 30;
  StatusOr<std::vector<PlannedCell>> cells = lora.PlanFromRecord();
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  const PlannedCell& unmeasured = cells->front();
  ASSERT_FALSE(unmeasured.reference.argv.empty()) << unmeasured.reference.note;
  EXPECT_DOUBLE_EQ(unmeasured.expected_duration_s, 5);  // its own run: the record's wall time
  EXPECT_DOUBLE_EQ(unmeasured.reference.expected_duration_s, 5);
  EXPECT_DOUBLE_EQ(unmeasured.ExpectedTotalS(), 10);

  lora.record.reference_time_s = 12;  // the record of a run that timed its reference
  cells = lora.PlanFromRecord();
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_DOUBLE_EQ(cells->front().reference.expected_duration_s, 12);
  EXPECT_DOUBLE_EQ(cells->front().ExpectedTotalS(), 17);

  lora.options.numeric_check = false;  // no reference: nothing added
  cells = lora.PlanFromRecord();
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_DOUBLE_EQ(cells->front().ExpectedTotalS(), 5);
}

TEST(PlanTest, AUserConfigIsPlannedAloneFromItsFileAndItsJournal) {
  test::ScratchDir scratch("plan_test");
  UserLora lora(scratch);
  const std::string& path = lora.path;
  MatrixOptions& options = lora.options;
  const std::vector<DeviceInfo>& devices = lora.devices;
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(recipes::BuiltinRegistry(), devices, options);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  ASSERT_EQ(cells->size(), 1u);
  const PlannedCell& cell = cells->front();
  EXPECT_EQ(cell.key.config, "my_lora");
  EXPECT_EQ(cell.config_path, path);
  ASSERT_TRUE(cell.runnable) << cell.preset.reason;
  EXPECT_EQ(std::vector<std::string>(cell.argv.begin() + 2, cell.argv.begin() + 5),
            (std::vector<std::string>{"lora_finetune_single_device", "--config", path}));

  // Its journal says it peaked at 30 GiB here: the plan believes the measurement over the prediction.
  CellResult& r = lora.record;
  r.peak_memory_bytes = int64_t{30} << 30;
  r.step_time_median_s = 1;
  cells = lora.PlanFromRecord();
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_EQ(cells->front().preset.status, CellStatus::kTooLarge);
  EXPECT_NE(cells->front().preset.reason.find("measured peak memory 30.00 GiB"), std::string::npos)
      << cells->front().preset.reason;

  // A record of proxies only (never run in full here): the plan believes their extrapolation over the estimate.
  r.status = CellStatus::kTooLarge;
  r.peak_memory_bytes.reset();
  r.proxy_layers = {1, 4};  // the proxies an extrapolation is drawn through (matrix/record_rules.h)
  r.real_layers = 16;
  r.extrapolated_peak_memory_bytes = int64_t{40} << 30;
  cells = lora.PlanFromRecord();
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_EQ(cells->front().preset.status, CellStatus::kTooLarge);
  EXPECT_NE(cells->front().preset.reason.find("extrapolated (from its proxies) peak memory 40.00 GiB"),
            std::string::npos)
      << cells->front().preset.reason;

  // Built-in patterns and files in one run: refused, naming both.
  options.config_globs = {"tiny/*"};
  Status mixed = PlanCells(recipes::BuiltinRegistry(), devices, options).status();
  EXPECT_EQ(mixed.ExitCode(), 2);
  EXPECT_NE(mixed.message().find("--configs mixes built-in names (tiny/*) with config files (" + path + ")"),
            std::string::npos)
      << mixed.message();
}

}  // namespace
}  // namespace tmx::matrix
