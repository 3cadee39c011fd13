// Planning a matrix run: which cells (built-in config x device) exist, which can start, and in what order.
//
// Before anything runs, each cell is validated by its recipe's own field checks for its device, and its
// peak memory and work are predicted by its recipe (RecipeSpec::estimate): the planner knows no model. Invalid cells and cells that cannot fit the device are recorded
// without being started. Runnable cells are ordered cheapest first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/config.h"
#include "harness/device.h"
#include "harness/registry.h"
#include "matrix/cell.h"
#include "matrix/journal.h"
#include "matrix/user_configs.h"

namespace tmx::matrix {

// How far above the memory limit a cell's predicted peak may lie and the cell still be tried, so that a
// cell predicted just over the limit is measured rather than rejected. A cell measured before is judged by
// the larger of its prediction and its recorded peak (the estimate assumes sequences of typical length).
inline constexpr double kMemoryPredictionTolerance = 0.05;

struct MatrixOptions {
  // Device ids or types to cover ("cpu", "cuda", "cuda:1"); empty: every device of this machine.
  std::vector<std::string> devices;
  // Shell-style patterns over built-in config names ("tiny/*"); a config matching any is run. Empty: every
  // built-in config, unless user_configs are given.
  std::vector<std::string> config_globs;
  // The user's own config files (ResolveUserConfigs): when given, the run has these and no built-in config
  // (config_globs must be empty); the built-in configs are still read, for the rates their measurements give.
  // Their recorded measurements are their newest records in journal_path.
  std::vector<UserConfig> user_configs;
  // Recipes to cover; empty: all.
  std::vector<std::string> recipes;
  // Optimizer steps each cell trains at least (budget); the recipe leaves the first out of its timings.
  int max_steps = 3;
  // Largest share of a cell's wall time its start-up may take (process start, model, data: what its record
  // calls startup_time_s). A cell whose recorded (else predicted) start-up would be a larger share at
  // max_steps trains more steps: the fewest that bring the share down to this, as far as they fit in
  // cell_budget_s; none when that would take more than max_extended_steps (a tiny model, whose start-up
  // dwarfs any number of its steps, gains nothing from more). The batch and sequence stay the
  // config's, so tokens/s and peak memory are its own; only the median has more steps behind it.
  // 0: every cell trains max_steps.
  double startup_share = 0.15;
  int max_extended_steps = 12;
  // Wall-clock limit of one cell, seconds.
  double cell_timeout_s = 900;
  // Seconds a cell measured beside other work waits, at most, for the machine to be quiet before it is measured
  // again (once; the second measurement is recorded, marked disturbed if it still was). The wait looks at the
  // machine's load once a second while none of the run's own cells runs, and prints a line at least every 9 s.
  // 0: measured again at once.
  double quiet_wait_s = 60;
  // A cell measured beside other work twice is recorded disturbed; its speed is published only with this set,
  // marked as measured beside other work, and only where the config has no speed measured undisturbed in its
  // column (an undisturbed measurement is never superseded by one); check and compare never compare it.
  bool accept_disturbed = false;
  // Seconds a cell may be expected to take. A cell predicted to take longer is recorded as too_slow and not
  // started; the prediction is its recorded wall time in this column, else a start-up and a step rate
  // fitted to the cells of this column that have a recorded time (no such cell: no prediction, the
  // cell runs). A band of 25% either way keeps a cell near the budget from flipping between runs: a measured
  // cell is left out only past 1.25 x the budget, a too_slow one let back only under budget / 1.25. 0: no budget.
  double cell_budget_s = 150;
  // Share of a device's memory a cell may use: cells predicted above it by more than
  // kMemoryPredictionTolerance are not started, and a cell whose resident memory exceeds it (on cpu) is
  // stopped and recorded as too_large.
  double memory_fraction = 0.85;
  // The append-only journal of finished cells.
  std::string journal_path = "reports/journal.jsonl";
  // Folder of per-cell output folders.
  std::string work_dir = "runs/matrix";
  // Folder of SUPPORT.md and support.json.
  std::string reports_dir = "reports";
  // Finish only the cells missing from the journal.
  bool resume = false;
  // Set the existing journal aside (as <journal>.prev) and start an empty one. Without it a run keeps the
  // journal's records: it appends, and a completed run with write-back keeps the newest record per cell.
  bool fresh = false;
  // Publishing lists each config file written and each entry kept (PublishLog::verbose); off (the default),
  // a run ends with one tally line (TallyLine) instead.
  bool verbose = false;
  // The `tune` executable cells run; empty: the one beside tune-matrix.
  std::string tune_path;
  // CI job name recorded with each cell.
  std::string job;
  // Keep only shard `shard_index` of `shard_count` (1-based; see matrix/shard.h). Jobs of one shard set must
  // plan the same cells: the same configs, device ids and checkout.
  int shard_index = 1;
  int shard_count = 1;
  // JUnit XML of the run's cells (matrix/junit.h); empty: none.
  std::string junit_path;
  // Run a depth-reduced proxy (kProxyLayers) of each cell too large or too slow for its device, where the
  // proxies fit the memory and together the cell budget, so the cell records whether the config's operations
  // work there and its extrapolated speed and memory (matrix/proxy_cell.h). Off: such cells are recorded
  // from the prediction alone.
  bool proxies = true;
  // Also run the proxies of cells that run in full (real-size ones: a model deeper than the proxies), before
  // the full run, so each records the extrapolation beside the measurement (matrix/calibration.h).
  bool calibrate = false;
  // Run each invalid cell whose problems all have a repair with that repair (PlannedCell::repair), so the
  // record says whether and how fast the repaired config runs. Off: invalid cells are recorded from the
  // validation alone.
  bool repairs = true;
  // Check each cell that trains against a float32 run of its first step on the reference device type
  // (matrix/numeric_check.h); a cell outside its dtype's tolerance is `wrong`. Off: no reference runs.
  bool numeric_check = true;
  // Seconds the run's cells may take in all (a rolling refresh); 0: no limit, every cell runs. The plan keeps
  // the cells whose records are oldest (never measured, or measured with another version of the config,
  // first), in that order as far as their predicted times fit, always at least the oldest, and defers the
  // rest: a deferred cell neither runs nor is recorded, and its record stands until a later run's turn. The
  // scheduler defers a cell not yet started once the time left is less than it is predicted to take, and the
  // limit is a hard bound: a child running at it is stopped (its cell left for a later run, not recorded: the
  // bound is no verdict on the device; a stopped numeric reference leaves the cell recorded unchecked), and no
  // child starts after it. Each shard has its own.
  double time_limit_s = 0;
  // cpu lanes (matrix/lanes.h): host cells run this many at a time, each pinned to its lane's CPUs, while the
  // running cells' predicted peaks fit the host's memory limit together, longest cells first. 1: one at a time,
  // unpinned (the default; `tune-matrix run` picks DefaultCpuLanes unless --lanes says).
  int cpu_lanes = 1;
  // The CPUs the lanes split; empty: this process's own (ReadAffinityCpus).
  std::vector<int> lane_cpus;
  // The column the run records into (harness/column.h): the CPU class its cpu cells run at (`tune-matrix run`:
  // this machine's, base/cpu_class.h, or --cpu-class) and the torch version the cells run with. The plan reads
  // the records of that column only: another class's or torch's times and peaks never plan this one's cells.
  std::string cpu_class;
  std::string torch_version;
  // Variables added to every child's environment: --cpu-class's caps of ATen and oneDNN (CpuClassChoice::env);
  // empty: the children inherit this process's.
  std::vector<std::pair<std::string, std::string>> child_env;
};

// The proxy depths a cell too large or too slow for its device runs at (matrix/proxy_cell.h): the
// shallowest model's layers at each, shallowest first. Two depths separate the per-layer cost from the fixed
// part (embeddings, output, optimizer, process); three layers apart, so the noise of a reading (a cpu peak
// moves by 0.1 to 0.3 GiB from run to run) is multiplied by (depth - 4) / 3 on the way to the real depth,
// not by depth - 2 as with 1 and 2 layers (measured: Qwen2.5 3B LoRA's 2-layer proxy peaked 0.12 GiB below
// its 1-layer one).
inline constexpr int64_t kProxyLayers[] = {1, 4};
// The deeper proxy where kProxyLayers' does not fit the memory: closer to the shallow one, so noisier, but
// measured.
inline constexpr int64_t kProxyFallbackLayers = 2;
// The share of a cell's memory limit a proxy is planned within: a proxy the recipe's estimate puts near the
// limit is stopped there by the estimate's error (Gemma 7B full's 1-layer proxy: 19.53 GiB predicted, stopped
// over the 20.0 GiB limit), where a deeper cut would have verified the same operations.
inline constexpr double kProxyMemoryAim = 0.75;
// Where the proxies with the whole vocabulary do not fit the memory, they cut it (harness/proxy.h) by 2, 4, ...
// up to this, the first that fits both depths, and a third proxy at the shallow depth and twice the cut
// measures the cost per id.
inline constexpr int64_t kMaxVocabDivisor = 64;

// One proxy run of a cell: its config with the models' layers cut (harness/proxy.h), as a child of its own.
struct ProxyRun {
  int64_t layers = 0;        // the shallowest model's layers
  int64_t vocab = 0;         // with a vocabulary cut, the shallowest model's ids (ProxyCut::vocab); 0: not cut
  std::string cut;           // ProxyCut::description
  std::vector<std::string> argv;
  std::string output_dir;
  int64_t predicted_memory_bytes = 0;
  double expected_duration_s = 0;
};

// The float32 reference run of a cell's numeric check (matrix/numeric_check.h): the checked run's argv (the
// cell's own, or its shallowest proxy's) in float32 on the reference device type, one optimizer step.
struct ReferenceRun {
  std::vector<std::string> argv;  // empty: no reference, and `note` says why
  std::string output_dir;
  std::string dtype;              // the checked run's dtype, which sets the tolerance
  std::string device;             // the reference device's id
  std::string note;
  // Seconds it is expected to take: its recorded wall time (SupportEntry::reference_time_s), else the checked
  // run's expected duration. One float32 step costs about what the checked run's start-up and three bf16 steps
  // do on a CPU with fast bf16 products (measured 2026-12-06 on the Intel Xeon with AMX: 1B LoRA's reference
  // took 47 s against the cell's 65 s; Mistral 7B LoRA's, on its 1-layer proxy, 30 s against the proxy's 26 s).
  double expected_duration_s = 0;
};

// How the plan judged a too_large cell's memory (its preset's reason says so in words): the recipe's
// prediction, the peak a run measured here, or the extrapolation of its last proxies. A proxied cell whose
// proxies run again quotes their new extrapolation instead of the last one (ResultFromProxies).
struct MemoryJudgement {
  enum class Basis { kNone, kPredicted, kMeasured, kExtrapolated };
  Basis basis = Basis::kNone;
  int64_t bytes = 0;        // the judged peak
  int64_t limit_bytes = 0;  // the most a cell may be judged to need and start (StartLimit)
  std::string limit;        // the share it was compared with, in words: "85% of cpu's 23.54 GiB"
};

// A cell and how it will be (or was not) run.
struct PlannedCell {
  CellKey key;
  std::string recipe;
  std::string config_path;
  DeviceInfo device;
  std::string device_type;
  // The column its record goes to (ColumnOf the record: the device type, MatrixOptions' CPU class on cpu, and
  // torch version), and whose records planned it.
  std::string column;
  int64_t predicted_memory_bytes = 0;
  // Expected wall time in seconds: the config's recorded `wall_time_s` in this column, else the recipe's
  // estimated work scaled by the cells of the column that have a recorded time. Orders the run, balances shards, feeds
  // the ETA.
  double expected_duration_s = 0;
  // Optimizer steps the cell trains: MatrixOptions::max_steps, or more by MatrixOptions::startup_share.
  int steps = 0;
  // Whether children start for the cell: its own run (argv), or its proxies.
  bool runnable = false;
  // The recorded result when nothing starts (invalid, too_large or too_slow), and the status a proxied cell
  // keeps when its proxies run (too_large or too_slow, with proxy_note when no proxy is possible).
  CellResult preset;
  std::vector<std::string> argv;   // the child command when the cell runs in full
  // A too_large or too_slow cell whose proxies fit (MatrixOptions::proxies): runnable, with no argv; its
  // proxies run one after the other, shallowest first, and ResultFromProxies makes its record. With argv too
  // (MatrixOptions::calibrate), the proxies run first and then the cell, whose record CalibratedResult makes.
  std::vector<ProxyRun> proxies;
  std::string output_dir;
  // Whether the proxies run instead of the cell (too large or too slow), or before it (calibrated).
  bool RunsProxiesInstead() const { return !proxies.empty() && argv.empty(); }
  bool RunsInFullAfterProxies() const { return !proxies.empty() && !argv.empty(); }
  // A config invalid on the device whose every problem has a repair (harness/registry.h RepairOf) that
  // validates: the cell runs (or proxies, or is recorded too large) with `repair` applied, after the launch
  // and before the cell's own overrides, and RepairedResult turns what that got into the record of an invalid
  // cell with its repair; `written` is the record the config as written gets (invalid, its problems). Empty
  // repair: the config as written.
  std::vector<std::string> repair;
  CellResult written;
  // Run after the cell's own children when they trained (MatrixOptions::numeric_check).
  ReferenceRun reference;
  MemoryJudgement memory;  // for a cell the plan records too_large
  // When its record here was made (SupportEntry::verified_at); empty: none for this version of the config.
  std::string recorded_at;
  // Left for a later run by MatrixOptions::time_limit_s: it neither runs nor is recorded in this one.
  bool deferred = false;
  // A host cell that runs in full with no proxies before it: the cell as it goes on if its run is stopped at
  // the memory limit (its prediction fell short of its peak): its proxies, planned as for a too_large cell,
  // with their own numeric check, so the record still says whether its operations run here and what its real
  // size would take. Null: none (proxies off, or none fits; MatrixOptions::proxies).
  std::shared_ptr<const PlannedCell> if_stopped_at_memory_limit;
  // What the cell is expected to take with its reference (expected_duration_s is its own children's, which
  // the cell budget judges): the plan's and the run's time, the shards' balance, the lanes' order.
  double ExpectedTotalS() const { return expected_duration_s + reference.expected_duration_s; }
  // What its proxies are expected to take in all (a part of expected_duration_s; 0 without proxies).
  double ProxiesExpectedS() const {
    double total_s = 0;
    for (const ProxyRun& p : proxies) total_s += p.expected_duration_s;
    return total_s;
  }
};

// The cell's device as progress lines show it: its id with its column's class and torch ("cpu (amx, torch
// 2.11.0)", "cuda:1 (torch 2.11.0)").
std::string DeviceShown(const PlannedCell& cell);

// Overrides applied to every cell's `tune run`: the device, a fresh output folder, and the recipe's own
// budget for `steps` optimizer steps (RecipeSpec::cell_overrides).
std::vector<std::string> CellOverrides(const RecipeSpec& recipe, const std::string& device, int steps,
                                       const std::string& output_dir);

// The steps a cell with this start-up and step time trains (MatrixOptions::startup_share): options.max_steps,
// or the fewest steps up to options.max_extended_steps that keep startup_s at most two thirds of that share
// of the wall time (startup_s + steps x step_s; the margin absorbs a run's steps being faster than the
// recorded ones), without passing options.cell_budget_s (0: no budget).
int CellSteps(double startup_s, double step_s, const MatrixOptions& options);

// Marks `deferred` the runnable cells beyond `limit_s` seconds (MatrixOptions::time_limit_s): the cells are
// taken oldest record first, then shortest, up to the first that does not fit in what is left (the next run
// starts there), the first whatever its time.
void DeferOverTheTimeLimit(double limit_s, std::vector<PlannedCell>* cells);

// The reason of a cell too large by `judged`, quoting `bytes` as its peak: judged.bytes, or the new
// extrapolation of its proxies where they ran again ("... is within ...: the next run tries it in full" when
// that fits the limit the last one did not).
std::string TooLargeReason(const MemoryJudgement& judged, int64_t bytes);

// The most memory a cell may use on `device` (MatrixOptions::memory_fraction of it): the limit a run is
// stopped at; 0 when the device's memory is unknown.
int64_t MemoryLimit(const DeviceInfo& device, const MatrixOptions& options);

// That limit for a reason: "85% of cpu's 23.54 GiB" ("85% of cpu's memory" when its size is unknown).
std::string MemoryShare(const DeviceInfo& device, const MatrixOptions& options);

// True when `name` matches the shell-style `pattern` (fnmatch).
bool MatchesGlob(const std::string& pattern, const std::string& name);

// InvalidArgument naming the fix when --recipes names an unknown recipe, --recipes and --configs together
// select no config, or built-in patterns and user config files are mixed: checked before a run writes
// anything.
Status CheckSelection(const Registry& registry, const MatrixOptions& options);

// The cells of a run (of options' shard), recorded-without-running ones first, then runnable ones by
// expected duration, shortest first. A user config's records are in the run's journal (options.journal_path):
// `journal` is that journal as the caller read it; null, it is read here where user configs need it.
StatusOr<std::vector<PlannedCell>> PlanCells(const Registry& registry, const std::vector<DeviceInfo>& devices,
                                             const MatrixOptions& options, const LoadedJournal* journal = nullptr);

}  // namespace tmx::matrix
