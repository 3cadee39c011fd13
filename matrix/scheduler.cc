#include "matrix/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>
#include <set>

#include "base/cpu_usage.h"
#include "base/file_util.h"
#include "base/text.h"
#include "harness/env_failure.h"
#include "harness/run_summary.h"
#include "matrix/journal.h"
#include "matrix/lanes.h"
#include "harness/numeric_probe.h"
#include "matrix/numeric_check.h"
#include "matrix/proxy_cell.h"
#include "matrix/record_rules.h"
#include "matrix/repair_cell.h"
#include "matrix/report.h"

namespace tmx::matrix {
namespace {

// Tokens per second for the progress line: whole numbers, a tenth below 10 (a 70B model's 0.1 tok/s).
std::string TokensPerSecondText(double v) { return FormatNumber(v, v < 10 ? 1 : 0); }

using Clock = std::chrono::steady_clock;

std::string LastLines(const std::string& text, size_t n) {
  size_t pos = text.size();
  while (pos > 0 && (text[pos - 1] == '\n')) --pos;
  size_t end = pos;
  for (size_t lines = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++lines == n) break;
  }
  return text.substr(pos, end - pos);
}

std::string LastLine(const std::string& text) { return LastLines(text, 1); }

// Whether a cell's memory is the host's (cpu): such cells share the host's memory limit and run in cpu lanes.
bool IsHostCell(const PlannedCell& c) {
  return c.device.traits().HostMemory();
}

// Where a host cell may start now among several cpu lanes. It takes a free lane with a CPU for each of its ranks (a
// rank is a training process of its own: `tune run` refuses more ranks than cores). One with more ranks than any
// lane has CPUs takes the whole host, unpinned, once no other host cell runs, and none starts beside it.
struct HostPlace {
  const CpuLane* lane = nullptr;  // the lane to pin it to; null: the device's own lane, unpinned
  bool whole_host = false;
  bool blocked = false;  // it may not start now
};
HostPlace PlaceInLanes(const PlannedCell& c, const std::vector<CpuLane>& lanes, const CellRunner& runner,
                       bool host_running_any, bool host_whole) {
  HostPlace place;
  const size_t ranks = static_cast<size_t>(std::max(1, c.preset.world_size));
  place.whole_host = std::none_of(lanes.begin(), lanes.end(), [&](const CpuLane& l) { return l.cpus.size() >= ranks; });
  if (host_whole || (place.whole_host && host_running_any)) {
    place.blocked = true;
    return place;
  }
  if (place.whole_host) return place;
  for (const CpuLane& l : lanes) {
    if (l.cpus.size() >= ranks && runner.CanStart(l.name)) {
      place.lane = &l;
      return place;
    }
  }
  place.blocked = true;  // every wide enough lane is busy
  return place;
}

}  // namespace

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

CellResult ResultFromOutcome(const PlannedCell& cell, const SubprocessResult& outcome, const MatrixOptions& options) {
  CellResult r = cell.preset;
  r.wall_time_s = outcome.wall_time_s;
  r.exit_code = outcome.exit_code;
  r.term_signal = outcome.term_signal;
  r.output_tail = LastLines(outcome.output_tail, 20);
  // The run summary is the recipe's account of the run (harness/run_summary.h): timings and statistics
  // are taken as the recipe computed them.
  StatusOr<RunSummary> summary = ReadRunSummary(cell.output_dir);
  bool have_summary = summary.ok();
  if (have_summary) {
    r.provenance.torch_version = summary->torch_version;
    r.provenance.device_name = summary->device_name.empty() ? cell.device.name : summary->device_name;
    r.init_time_s = summary->init_time_s;
    r.peak_memory_bytes = summary->peak_memory_bytes;
    r.step_times_s = summary->step_times_s;
    if (!r.step_times_s.empty()) {
      double steps = 0;
      for (double t : r.step_times_s) steps += t;
      r.startup_time_s = std::max(0.0, r.wall_time_s - steps);
    }
    r.warmup_steps = static_cast<int>(std::min<size_t>(summary->warmup_steps, summary->step_times_s.size()));
    r.step_time_median_s = summary->step_time_median_s;
    r.step_time_spread_s = summary->step_time_spread_s;
    r.first_grad_norm = summary->first_grad_norm;
    r.tokens_per_second = summary->tokens_per_second;
    r.flops_per_second = summary->flops_per_second;
    auto peak = cell.device.matmul_peak_flops.find(summary->dtype);
    if (r.flops_per_second && peak != cell.device.matmul_peak_flops.end()) {
      r.peak_flops = peak->second;
      r.flops_dtype = summary->dtype;
    }
    r.time_to_first_token_s = summary->time_to_first_token_s;
    r.prefill_tokens_per_second = summary->prefill_tokens_per_second;
    r.scores = ScoresText(summary->scores);
    r.stand_in = JoinStrings(summary->stand_ins, "; ");
    r.world_size = summary->world_size;
    if (summary->threads > 0) r.threads = summary->threads;
    if (!summary->losses.empty()) {  // a run without a loss (generation) records none
      r.first_loss = summary->losses.front();
      r.last_loss = summary->losses.back();
    }
  }
  // Peak memory is read one way: the run's own account (on the host the kernel's high-water mark of each
  // rank's memory, summed over the ranks; harness/device_hooks.h ProcessPeakRss), which the run also prints.
  // Only a host-memory cell that wrote none (it crashed, or was stopped) takes the runner's polled peak of its
  // process group instead.
  if (outcome.peak_rss_bytes > 0 && IsHostCell(cell) && !r.peak_memory_bytes) r.peak_memory_bytes = outcome.peak_rss_bytes;

  if (outcome.timed_out) {
    r.status = CellStatus::kTimeout;
    r.reason = "killed at the wall-clock limit of " + FormatDuration(options.cell_timeout_s) + " after " +
               std::to_string(r.step_times_s.size()) + " of " + std::to_string(cell.steps) + " steps";
  } else if (outcome.memory_exceeded) {
    // The cell outgrew the share of the device a cell may use (MatrixOptions::memory_fraction): too large
    // for it, measured rather than predicted; not a failure of the device.
    r.status = CellStatus::kTooLarge;
    r.reason = "resident memory passed the limit of " + MemoryShare(cell.device, options) + " and the run was stopped";
  } else if (outcome.term_signal) {
    r.status = CellStatus::kFails;
    r.reason = "crashed: " + outcome.Describe() + "; last output: " + LastLine(outcome.output_tail);
  } else if (outcome.exit_code && *outcome.exit_code == 0 && have_summary && summary->ok) {
    r.status = CellStatus::kRuns;
    r.reason.clear();
  } else if (outcome.exit_code && *outcome.exit_code == 2) {
    r.status = CellStatus::kInvalid;
    r.reason = "tune run rejected the config: " + LastLine(outcome.output_tail);
  } else {
    r.status = CellStatus::kFails;
    std::string error = have_summary ? summary->error : "";
    r.reason = !error.empty() ? error : outcome.Describe() + "; last output: " + LastLine(outcome.output_tail);
    if (have_summary && summary->error_kind == "out_of_memory") r.reason = "out of memory: " + error;
  }
  return r;
}

void AddCpuAccounting(const CellOutcome& outcome, CellResult* r, const DisturbanceOptions& options) {
  if (outcome.result.cpu_time_s > 0) r->cpu_time_s = outcome.result.cpu_time_s;
  Disturbance d = JudgeDisturbance(outcome.machine_before, outcome.machine_after, outcome.result.cpu_time_s, options);
  if (!d.known) return;
  r->others_cpu_share = d.others_share;
  r->steal_share = d.steal_share;
  r->disturbed = d.reason;
}

namespace {

// How often a run that waits for its cells says what runs: under the 10 s a reader should ever wait for a line.
constexpr double kHeartbeatS = 9;

// " (proxy of 4 layers)" for a proxy's run, "" for the cell's own: which of a cell's training children `index` is.
std::string ChildShown(const PlannedCell& cell, size_t index) {
  return index < cell.proxies.size() ? " (proxy of " + std::to_string(cell.proxies[index].layers) + " layers)" : "";
}

// A recorded cell's progress line: `head` (FormatProgressLine), its status, speed, share of the peak, proxies,
// numbers against float32, start-up, reason and disturbance.
void PrintRecorded(const std::string& head, const CellResult& r, std::ostream& progress) {
  progress << head << "  " << CellStatusName(r.status);
  if (r.repaired_status) {
    progress << " as written, " << RepairedOutcome(CellStatusName(*r.repaired_status), r.repair.size());
  }
  if (r.tokens_per_second) {
    progress << "  " << TokensPerSecondText(*r.tokens_per_second)
             << (r.time_to_first_token_s ? " decode tok/s" : " tok/s");
  }
  if (std::optional<double> share = PeakShare(r)) progress << ", " << PeakShareText(*share, r.flops_dtype);
  if (r.time_to_first_token_s) progress << "  first token " << FormatLatency(*r.time_to_first_token_s);
  if (r.ops_verified) {
    progress << "  proxies of " << ProxiedSize(r) << ": " << (*r.ops_verified ? "ops verified" : "failed");
    if (r.extrapolated_tokens_per_second) {
      progress << ", about " << TokensPerSecondText(*r.extrapolated_tokens_per_second) << " tok/s";
    }
    if (std::optional<double> share = PeakShare(r, true)) {
      progress << " at " << PeakShareText(*share, r.flops_dtype);
    } else if (std::optional<double> at_proxy = ProxyPeakShare(r)) {
      progress << ", " << PeakShareText(*at_proxy, r.flops_dtype) << " at proxy size";
    }
    if (r.extrapolated_peak_memory_bytes) progress << ", about " << FormatBytes(*r.extrapolated_peak_memory_bytes);
  }
  if (r.loss_delta) {
    progress << "  numbers: loss " << FormatNumber(100 * *r.loss_delta, 2) << "% off float32";
    if (r.grad_norm_delta) progress << ", grad norm " << FormatNumber(100 * *r.grad_norm_delta, 2) << "%";
    if (r.tensor_error) {
      progress << ", worst of " << *r.tensors_compared << " tensors " << FormatNumber(100 * *r.tensor_error, 2)
               << "% (" << r.tensor_worst << ")";
    }
  }
  if (r.startup_time_s && r.wall_time_s > 0) {
    progress << "  start-up " << FormatDuration(*r.startup_time_s) << " ("
             << static_cast<int>(std::lround(100 * *r.startup_time_s / r.wall_time_s)) << "%)";
  }
  if (!r.reason.empty()) progress << "  (" << r.reason.substr(0, 160) << ")";
  if (!r.disturbed.empty()) progress << "  disturbed: " << r.disturbed << "; its speed is not published";
  progress << std::endl;
}

// A child to start: one of a cell's proxies (index below proxies.size(); they run one after the other,
// shallowest first), its own run (index proxies.size(), when it has argv), then, when they trained, its numeric
// check's reference (index Children(cell)).
struct Child {
  const PlannedCell* cell;
  size_t index = 0;
  bool continues = false;  // a child of a cell that started (its next proxy, its reference, its proxies after a stop)
  int64_t host_bytes = 0;  // while it runs on the host: its predicted peak, which the lanes' memory gate sums
  bool whole_host = false;  // it runs unpinned on the whole host, no other host cell beside it
  Clock::time_point started_at{};
};

size_t Children(const PlannedCell& c) { return c.proxies.size() + (c.argv.empty() ? 0 : 1); }

// The heartbeat's line: what runs, which child, for how long, and how far the run is.
std::string StillRunning(const std::map<CellKey, Child>& running, size_t completed, size_t total,
                         Clock::time_point start) {
  std::vector<std::string> what;
  for (const auto& [key, child] : running) {
    const bool reference = child.index == Children(*child.cell);
    what.push_back(key.config + " on " + key.device +
                   (reference ? " (numeric reference)" : ChildShown(*child.cell, child.index)) + " for " +
                   FormatDuration(std::chrono::duration<double>(Clock::now() - child.started_at).count()));
  }
  return "  still running: " + JoinStrings(what, "; ") + " (" + std::to_string(completed) + " of " +
         std::to_string(total) + " done, " +
         FormatDuration(std::chrono::duration<double>(Clock::now() - start).count()) + " elapsed)";
}

}  // namespace

StatusOr<MatrixRun> RunCells(const std::vector<PlannedCell>& cells, const std::vector<CellKey>& done,
                             CellRunner& runner, const MatrixOptions& options, const Provenance& provenance,
                             std::ostream& progress, const std::function<std::string()>& now) {
  MatrixRun run;
  std::set<CellKey> finished(done.begin(), done.end());
  std::vector<const PlannedCell*> pending;
  for (const PlannedCell& c : cells) {
    if (finished.count(c.key)) continue;
    if (c.deferred) {
      run.deferred.push_back(c.key);
    } else {
      pending.push_back(&c);
    }
  }
  size_t total = pending.size();
  bool started_any = false;
  size_t completed = 0;
  auto start = Clock::now();
  double runnable_cost_done = 0, runnable_cost_total = 0;
  for (const PlannedCell* c : pending) runnable_cost_total += c->runnable ? c->ExpectedTotalS() : 0;

  auto record = [&](CellResult r, const PlannedCell& cell) -> Status {
    r = RepairedResult(cell, std::move(r));  // a repaired cell is recorded invalid as written, with its repair
    r.provenance.host = provenance.host;
    r.provenance.job = provenance.job;
    r.provenance.commit = provenance.commit;
    if (r.provenance.torch_version.empty()) r.provenance.torch_version = provenance.torch_version;
    if (r.provenance.device_name.empty()) r.provenance.device_name = cell.device.name;
    // The class its cpu children ran at (MatrixOptions::cpu_class): the record's column is the one it was planned in.
    if (cell.device_type == "cpu") r.provenance.cpu_class = options.cpu_class;
    r.provenance.verified_at = now();
    // A record that breaks a record rule would make the journal unreadable to every later reader (resume, merge,
    // check), so it is refused here as they would refuse it: an error of the run that names the rule, with the
    // cell's earlier record left standing (the run fails; the cell is measured again by the next one).
    if (Status rules = CheckRecordRules(r, "cell " + r.key.config + " on " + r.key.device); !rules.ok()) {
      progress << "ERROR " << rules.message() << " (not recorded)" << std::endl;
      r.reason = "not recorded, not a verdict on the device: " + rules.message();
      run.environment_errors.push_back(std::move(r));
      ++completed;
      return Status::OK();
    }
    TM_RETURN_IF_ERROR(AppendToJournal(options.journal_path, r));
    ++completed;
    double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (cell.runnable) runnable_cost_done += cell.ExpectedTotalS();
    std::optional<double> eta =
        EstimateRemaining(elapsed, runnable_cost_done, runnable_cost_total - runnable_cost_done, completed > 0);
    PrintRecorded(FormatProgressLine(completed, total, DeviceShown(cell), cell.key.config, elapsed, eta), r,
                  progress);
    run.recorded.push_back(std::move(r));
    return Status::OK();
  };

  auto view = [&](const PlannedCell& c, size_t index) {
    return index < c.proxies.size() ? ProxyView(c, index) : index == Children(c) ? ReferenceView(c) : c;
  };
  std::map<CellKey, Child> running;
  // Nothing is silent for long: while no cell finishes, a line every kHeartbeatS names what runs and for how long.
  runner.SetHeartbeat([&] { progress << StillRunning(running, completed, total, start) << std::endl; }, kHeartbeatS);
  struct HeartbeatOff {  // the heartbeat reads this function's state: it ends with it
    CellRunner& runner;
    ~HeartbeatOff() { runner.SetHeartbeat(nullptr, 0); }
  } heartbeat_off{runner};
  std::map<CellKey, std::vector<CellResult>> proxy_runs;  // the finished proxies of each proxied cell
  // The cells whose run was stopped at the memory limit, as they go on: their proxies (if_stopped_at_memory_limit).
  std::vector<std::unique_ptr<PlannedCell>> stopped_cells;
  // Cells whose own children are done, waiting for their reference: the record, and the run it checks.
  struct Awaiting {
    CellResult result;
    CellResult checked;
    std::string checked_dir;  // the checked run's output folder, where its numeric probe is
  };
  std::map<CellKey, Awaiting> awaiting;
  // The children run again once because other work disturbed their first run (a burst beside them is often over
  // by then); a second disturbed run is recorded as disturbed.
  std::set<std::pair<CellKey, size_t>> retried;
  std::vector<Child> queue;
  for (const PlannedCell* c : pending) {
    if (!c->runnable) {
      TM_RETURN_IF_ERROR(record(c->preset, *c));
    } else {
      queue.push_back({c});
    }
  }
  // Host cells run in the cpu lanes (one lane: the device's own, unpinned), longest first when there are several,
  // so the last cells to finish are short ones.
  const std::vector<CpuLane> lanes =
      PlanLanes(options.lane_cpus.empty() ? ReadAffinityCpus() : options.lane_cpus, options.cpu_lanes);
  if (lanes.size() > 1) {
    std::stable_sort(queue.begin(), queue.end(), [](const Child& a, const Child& b) {
      return a.cell->ExpectedTotalS() > b.cell->ExpectedTotalS();
    });
  }
  while (!queue.empty() || !running.empty()) {
    // The host memory the running host cells are predicted to take, and whether a host cell is waiting for it:
    // then no later host cell starts before it, so a large cell is never starved by small ones.
    int64_t host_running = 0;
    bool host_running_any = false, host_whole = false;
    for (const auto& [key, child] : running) {
      host_running += child.host_bytes;
      host_running_any = host_running_any || child.host_bytes > 0;
      host_whole = host_whole || child.whole_host;
    }
    bool host_waiting = false;
    for (auto it = queue.begin(); it != queue.end();) {
      const PlannedCell* c = it->cell;
      if (!it->continues && options.time_limit_s > 0 && started_any &&
          std::chrono::duration<double>(Clock::now() - start).count() + c->ExpectedTotalS() > options.time_limit_s) {
        // Behind the predictions the plan fitted to the limit: the cell waits for a later run.
        run.deferred.push_back(c->key);
        runnable_cost_total -= c->ExpectedTotalS();
        --total;
        it = queue.erase(it);
        continue;
      }
      const bool host = IsHostCell(*c);
      const HostPlace place = host && lanes.size() > 1 ? PlaceInLanes(*c, lanes, runner, host_running_any, host_whole)
                                                       : HostPlace{};
      const CpuLane* lane = place.lane;
      const bool whole_host = place.whole_host;
      const std::string lane_name = lane != nullptr ? lane->name : c->key.device;
      if (place.blocked || !runner.CanStart(lane_name) || (host && host_waiting)) {
        if (whole_host && !host_whole) host_waiting = true;  // the host empties for it
        ++it;
        continue;
      }
      const PlannedCell child = view(*c, it->index);
      CellCommand cmd;
      cmd.key = c->key;
      cmd.lane = lane_name;
      if (lane != nullptr) cmd.cpus = lane->cpus;
      cmd.argv = child.argv;
      cmd.env = options.child_env;
      if (!c->reference.argv.empty()) cmd.env.emplace_back(kNumericProbeEnv, "1");  // the numeric check's tensors
      cmd.log_path = child.output_dir + ".log";
      cmd.timeout_s = options.cell_timeout_s;
      if (host && c->device.total_memory_bytes > 0) {
        // The host's limit is shared: a cell may take what the running cells' predicted peaks leave of it, and
        // waits while its own prediction does not fit (alone it always starts, and the limit is all of it).
        const int64_t limit = MemoryLimit(c->device, options);
        if (host_running_any && host_running + child.predicted_memory_bytes > limit) {
          host_waiting = true;
          ++it;
          continue;
        }
        cmd.memory_limit_bytes = limit - host_running;
      }
      Status s = runner.Start(cmd);
      if (!s.ok()) return s.WithContext("starting " + c->key.config + " on " + c->key.device);
      started_any = true;
      Child started = *it;
      started.host_bytes = host ? std::max<int64_t>(child.predicted_memory_bytes, 1) : 0;
      started.whole_host = whole_host;
      host_running += started.host_bytes;
      host_running_any = host_running_any || host;
      host_whole = host_whole || whole_host;
      started.started_at = Clock::now();
      running[c->key] = started;
      it = queue.erase(it);
    }
    if (running.empty()) break;
    CellOutcome outcome;
    if (!runner.WaitForOne(&outcome)) {
      if (runner.interrupted()) {
        runner.Abort();
        run.interrupted = true;
        return run;
      }
      return Status::Internal("the cell runner stopped with cells still running");
    }
    auto found = running.find(outcome.key);
    if (found == running.end()) return Status::Internal("the runner reported an unknown cell");
    const Child finished_child = found->second;
    const PlannedCell* cell = finished_child.cell;
    running.erase(found);
    const PlannedCell child = view(*cell, finished_child.index);
    CellResult result = ResultFromOutcome(child, outcome.result, options);
    AddCpuAccounting(outcome, &result);
    std::optional<std::string> environment =
        result.status == CellStatus::kRuns ? std::nullopt : FindEnvironmentFailure(outcome.result.output_tail);
    if (finished_child.index == Children(*cell)) {
      // The reference: the cell's record with its numeric check. A reference the machine failed is no verdict
      // on the cell's numbers, and the cell's own record stands.
      Awaiting done = std::move(awaiting[cell->key]);
      awaiting.erase(cell->key);
      if (environment) {
        done.result.numeric_note = "not checked: the reference run hit an environment failure: " + *environment;
        progress << "ERROR " << cell->key.config << " on " << cell->key.device << " (numeric reference): "
                 << *environment << std::endl;
        CellResult error = done.result;
        error.reason = "environment failure of the numeric reference, not a verdict on the device: " + *environment;
        run.environment_errors.push_back(std::move(error));
      } else {
        AddNumericCheck(*cell, done.checked, result, &done.result, ProbeFilesIn(done.checked_dir, child.output_dir));
        done.result.reference_time_s = result.wall_time_s;
      }
      TM_RETURN_IF_ERROR(record(std::move(done.result), *cell));
      continue;
    }
    if (environment) {
      result = cell->preset;  // the cell as planned, for the message; nothing of it is recorded
      result.reason = "environment failure, not a verdict on the device (not recorded): " + *environment;
      progress << "ERROR " << cell->key.config << " on " << cell->key.device
               << ChildShown(*cell, finished_child.index) << ": " << result.reason << std::endl;
      proxy_runs.erase(cell->key);
      run.environment_errors.push_back(std::move(result));
      continue;
    }
    if (result.status == CellStatus::kRuns && !result.disturbed.empty() &&
        retried.insert({cell->key, finished_child.index}).second) {
      progress << cell->key.config << " on " << cell->key.device << ChildShown(*cell, finished_child.index)
               << " was measured beside other work (" << result.disturbed << "); running it again once" << std::endl;
      Child again = finished_child;
      again.continues = true;
      again.host_bytes = 0;
      again.whole_host = false;
      queue.insert(queue.begin(), again);
      continue;
    }
    if (result.status == CellStatus::kTooLarge && outcome.result.memory_exceeded &&
        cell->if_stopped_at_memory_limit != nullptr && finished_child.index == cell->proxies.size()) {
      // Its prediction fell short: the cell goes on as one predicted too large, its proxies instead, and its
      // record is theirs on top of the stopped run's (status, reason, the resident memory it was stopped at).
      auto stopped = std::make_unique<PlannedCell>(*cell->if_stopped_at_memory_limit);
      result.real_layers = stopped->preset.real_layers;
      result.real_vocab = stopped->preset.real_vocab;
      stopped->preset = std::move(result);
      stopped->expected_duration_s = cell->expected_duration_s;  // the run's ETA counts the cell as planned
      stopped->reference.expected_duration_s = cell->reference.expected_duration_s;
      progress << cell->key.config << " on " << cell->key.device
               << " was stopped at the memory limit; its proxies run instead" << std::endl;
      queue.insert(queue.begin(), Child{stopped.get(), 0, true});
      stopped_cells.push_back(std::move(stopped));
      continue;
    }
    CellResult checked = result;  // the run whose first step the numeric check compares
    std::string checked_dir = child.output_dir;
    if (finished_child.index < cell->proxies.size()) {
      std::vector<CellResult>& done_runs = proxy_runs[cell->key];
      const bool ran = result.status == CellStatus::kRuns;
      done_runs.push_back(std::move(result));
      // The cell's next child starts at once, ahead of other cells: a proxied cell's next proxy while they
      // run, a calibrated cell's every next child (its own run is its verdict, whatever its proxies did).
      const bool calibrating = cell->RunsInFullAfterProxies();
      if ((ran || calibrating) && finished_child.index + 1 < Children(*cell)) {
        queue.insert(queue.begin(), Child{cell, finished_child.index + 1, true});
        continue;
      }
      checked = done_runs.front();  // a proxied cell's numbers are checked on its shallowest proxy
      checked_dir = ProxyView(*cell, 0).output_dir;
      result = ResultFromProxies(*cell, done_runs);
      proxy_runs.erase(cell->key);
    } else if (!cell->proxies.empty()) {
      result = CalibratedResult(*cell, proxy_runs[cell->key], std::move(result));
      proxy_runs.erase(cell->key);
    }
    const bool trained = result.status == CellStatus::kRuns || result.ops_verified.value_or(false);
    if (trained && !cell->reference.argv.empty()) {
      awaiting[cell->key] = {std::move(result), std::move(checked), checked_dir};
      queue.insert(queue.begin(), Child{cell, Children(*cell), true});
      continue;
    }
    if (trained) result.numeric_note = cell->reference.note;
    TM_RETURN_IF_ERROR(record(std::move(result), *cell));
  }
  return run;
}

}  // namespace tmx::matrix
