#include "matrix/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>
#include <set>
#include <utility>

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

namespace {

// The run's rates against the device's limits: the steps' (and a prefill's) FLOP rate with the matmul peak at the
// run's dtype, the bytes read per second with the measured memory bandwidth.
void TakeLimits(const DeviceInfo& device, const RunSummary& summary, CellResult* r) {
  if (summary.prefill_flops && summary.time_to_first_token_s && *summary.time_to_first_token_s > 0) {
    r->prefill_flops_per_second = *summary.prefill_flops / *summary.time_to_first_token_s;
  }
  auto peak = device.matmul_peak_flops.find(summary.dtype);
  if ((r->flops_per_second || r->prefill_flops_per_second) && peak != device.matmul_peak_flops.end()) {
    r->peak_flops = peak->second;
    r->flops_dtype = summary.dtype;
  }
  r->bytes_per_second = summary.bytes_per_second;
  if (r->bytes_per_second && device.BestBandwidth() > 0) r->peak_bandwidth = device.BestBandwidth();
}

}  // namespace

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
    TakeLimits(cell.device, *summary, &r);
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
  if (have_summary) AddQuantizationCheck(summary->quantization, summary->dtype, &r);
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
// How long each look at the machine's load takes while a disturbed cell waits for quiet.
constexpr double kQuietProbeS = 1;

// " (proxy of 4 layers)" for a proxy's run, "" for the cell's own: which of a cell's training children `index` is.
std::string ChildShown(const PlannedCell& cell, size_t index) {
  return index < cell.proxies.size() ? " (proxy of " + std::to_string(cell.proxies[index].layers) + " layers)" : "";
}

// A cell's `index`-th child in a sentence: "its proxy of 4 layers", "its run".
std::string ChildNamed(const PlannedCell& cell, size_t index) {
  return index < cell.proxies.size() ? "its proxy of " + std::to_string(cell.proxies[index].layers) + " layers"
                                     : "its run";
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
  if (std::optional<double> share = BandwidthShare(r)) progress << ", " << BandwidthShareText(*share);
  if (r.time_to_first_token_s) progress << "  first token " << FormatLatency(*r.time_to_first_token_s);
  if (std::optional<double> share = PrefillPeakShare(r)) progress << ", prefill " << PeakShareText(*share, r.flops_dtype);
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
  } else if (r.tensor_error) {  // a generation's first token, a quantisation's weights
    progress << "  numbers: " << r.tensor_worst << " " << FormatNumber(*r.tensor_error, 4) << " (tolerance "
             << FormatNumber(r.tensor_tolerance.value_or(0), 4) << ")";
  }
  if (r.startup_time_s && r.wall_time_s > 0) {
    progress << "  start-up " << FormatDuration(*r.startup_time_s) << " ("
             << static_cast<int>(std::lround(100 * *r.startup_time_s / r.wall_time_s)) << "%)";
  }
  if (!r.reason.empty()) progress << "  (" << r.reason.substr(0, 160) << ")";
  if (!r.disturbed.empty()) {
    progress << "  disturbed: " << r.disturbed
             << (r.disturbed_accepted.value_or(false)
                     ? "; its speed is published marked where no undisturbed one stands (--accept-disturbed)"
                     : "; its speed is not published");
  }
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
  // It runs again because other work disturbed it: it waits for a quiet machine first (MatrixOptions::quiet_wait_s).
  bool wait_for_quiet = false;
  // Its wall-clock limit is the time the run's --time-limit left (shorter than --timeout): a child stopped at it
  // was stopped by the run's bound, not by the device.
  bool limit_bound = false;
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

namespace {

// A cell's `index`-th child as it runs: a proxy, its own run, or its numeric reference (Child).
PlannedCell ChildView(const PlannedCell& c, size_t index) {
  return index < c.proxies.size() ? ProxyView(c, index) : index == Children(c) ? ReferenceView(c) : c;
}

// How far the run is: what the progress lines and the heartbeat count, and the expected time behind the ETA.
struct RunTally {
  size_t total = 0;      // cells to record (less those the time limit defers on the way)
  size_t completed = 0;  // cells recorded (or refused) so far
  Clock::time_point start = Clock::now();
  double cost_done = 0, cost_total = 0;  // expected seconds of the runnable cells recorded, and of all of them
  double ElapsedS() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
};

// Records a cell's result: as written where it was repaired, with the run's provenance, checked against the
// record rules, appended to the journal, and its progress line printed.
class Recorder {
 public:
  Recorder(const MatrixOptions& options, const Provenance& provenance, std::ostream& progress,
           const std::function<std::string()>& now, RunTally* tally, MatrixRun* run)
      : options_(options), provenance_(provenance), progress_(progress), now_(now), tally_(tally), run_(run) {}

  Status Record(CellResult r, const PlannedCell& cell) {
    r = RepairedResult(cell, std::move(r));  // a repaired cell is recorded invalid as written, with its repair
    r.provenance.host = provenance_.host;
    r.provenance.job = provenance_.job;
    r.provenance.commit = provenance_.commit;
    if (r.provenance.torch_version.empty()) r.provenance.torch_version = provenance_.torch_version;
    if (r.provenance.device_name.empty()) r.provenance.device_name = cell.device.name;
    // The class its cpu children ran at (MatrixOptions::cpu_class): the record's column is the one it was planned in.
    if (cell.device_type == "cpu") r.provenance.cpu_class = options_.cpu_class;
    r.provenance.verified_at = now_();
    if (options_.accept_disturbed && !r.disturbed.empty()) r.disturbed_accepted = true;
    ++tally_->completed;
    // A record that breaks a record rule would make the journal unreadable to every later reader (resume, merge,
    // check), so it is refused here as they would refuse it: an error of the run that names the rule, with the
    // cell's earlier record left standing (the run fails; the cell is measured again by the next one).
    if (Status rules = CheckRecordRules(r, "cell " + r.key.config + " on " + r.key.device); !rules.ok()) {
      progress_ << "ERROR " << rules.message() << " (not recorded)" << std::endl;
      r.reason = "not recorded, not a verdict on the device: " + rules.message();
      run_->environment_errors.push_back(std::move(r));
      return Status::OK();
    }
    if (Status appended = AppendToJournal(options_.journal_path, r); !appended.ok()) {
      --tally_->completed;
      return appended;
    }
    const double elapsed = tally_->ElapsedS();
    if (cell.runnable) tally_->cost_done += cell.ExpectedTotalS();
    std::optional<double> eta = EstimateRemaining(elapsed, tally_->cost_done, tally_->cost_total - tally_->cost_done,
                                                  tally_->completed > 0);
    PrintRecorded(FormatProgressLine(tally_->completed, tally_->total, DeviceShown(cell), cell.key.config, elapsed, eta),
                  r, progress_);
    run_->recorded.push_back(std::move(r));
    return Status::OK();
  }

 private:
  const MatrixOptions& options_;
  const Provenance& provenance_;
  std::ostream& progress_;
  const std::function<std::string()>& now_;
  RunTally* tally_;
  MatrixRun* run_;
};

// Starts children in the device lanes and the cpu lanes as they free up, under the host's memory limit and
// the run's time limit, and waits for them: the order of a queue to which a cell's next child is added first.
class LaneScheduler {
 public:
  LaneScheduler(CellRunner& runner, const MatrixOptions& options, std::ostream& progress, RunTally* tally,
                MatrixRun* run)
      : runner_(runner), options_(options), progress_(progress), tally_(tally), run_(run),
        lanes_(PlanLanes(options.lane_cpus.empty() ? ReadAffinityCpus() : options.lane_cpus, options.cpu_lanes)) {}

  void Add(Child child) { queue_.push_back(child); }
  void AddFirst(Child child) { queue_.insert(queue_.begin(), child); }
  bool Done() const { return queue_.empty() && running_.empty(); }
  // The children of started cells that the run's time limit kept from starting, taken once (CellJobs::Cut).
  std::vector<Child> TakeCut() { return std::exchange(cut_, {}); }
  // The run was stopped (Ctrl-C, SIGTERM) when a child was to start: nothing more starts or is recorded.
  bool interrupted() const { return interrupted_; }
  const std::map<CellKey, Child>& running() const { return running_; }

  // Host cells run in the cpu lanes (one lane: the device's own, unpinned), longest first when there are
  // several, so the last cells to finish are short ones.
  void OrderForLanes() {
    if (lanes_.size() <= 1) return;
    std::stable_sort(queue_.begin(), queue_.end(), [](const Child& a, const Child& b) {
      return a.cell->ExpectedTotalS() > b.cell->ExpectedTotalS();
    });
  }

  // Starts every queued child that may start now, in queue order.
  Status StartWhatFits() {
    // The host memory the running host cells are predicted to take, and whether a host cell is waiting for it:
    // then no later host cell starts before it, so a large cell is never starved by small ones.
    HostUse host;
    for (const auto& [key, child] : running_) host.Add(child);
    bool host_waiting = false;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (DeferredByTheTimeLimit(*it)) {
        it = queue_.erase(it);
        continue;
      }
      StatusOr<bool> started = TryStart(*it, &host, &host_waiting);
      if (!started.ok()) return started.status();
      if (interrupted_) return Status::OK();
      it = *started ? queue_.erase(it) : it + 1;
    }
    return Status::OK();
  }

  // Waits for a running child to end: false when the run was interrupted (the runner aborted; `*status` OK)
  // or the runner failed (`*status` says how).
  bool WaitForOne(CellOutcome* outcome, Child* finished, Status* status) {
    if (!runner_.WaitForOne(outcome)) {
      if (runner_.interrupted()) {
        runner_.Abort();
        run_->interrupted = true;
      } else {
        *status = Status::Internal("the cell runner stopped with cells still running");
      }
      return false;
    }
    auto found = running_.find(outcome->key);
    if (found == running_.end()) {
      *status = Status::Internal("the runner reported an unknown cell");
      return false;
    }
    *finished = found->second;
    running_.erase(found);
    return true;
  }

 private:
  struct HostUse {
    int64_t bytes = 0;
    bool any = false, whole = false;
    void Add(const Child& c) {
      bytes += c.host_bytes;
      any = any || c.host_bytes > 0;
      whole = whole || c.whole_host;
    }
  };

  // Behind the predictions the plan fitted to the limit, a cell not started yet waits for a later run; past the
  // limit, a started cell's next child does not start either (its cell's job decides what that means: Cut).
  bool DeferredByTheTimeLimit(const Child& child) {
    const PlannedCell* c = child.cell;
    if (options_.time_limit_s <= 0 || !started_any_) return false;
    if (child.continues) {
      if (tally_->ElapsedS() < options_.time_limit_s) return false;
      cut_.push_back(child);
      return true;
    }
    if (tally_->ElapsedS() + c->ExpectedTotalS() <= options_.time_limit_s) return false;
    run_->deferred.push_back(c->key);
    tally_->cost_total -= c->ExpectedTotalS();
    --tally_->total;
    return true;
  }

  // Before a disturbed cell is measured again alone: up to options_.quiet_wait_s (and the time the run's limit
  // leaves) for the machine to be quiet, a look each kQuietProbeS, a line at the start and each kHeartbeatS.
  void WaitForQuiet(const PlannedCell& cell) {
    double bound = options_.quiet_wait_s;
    if (options_.time_limit_s > 0) bound = std::min(bound, options_.time_limit_s - tally_->ElapsedS());
    if (bound <= 0) return;
    Disturbance load = runner_.ProbeLoad(kQuietProbeS);
    if (load.reason.empty()) return;
    const std::string what = cell.key.config + " on " + cell.key.device;
    progress_ << "  the machine is busy (" << OthersUse(load) << "): waiting up to " << FormatDuration(bound)
              << " for it to be quiet before measuring " << what << " again" << std::endl;
    double waited = kQuietProbeS, said = 0;
    while (waited < bound && !runner_.interrupted()) {
      load = runner_.ProbeLoad(kQuietProbeS);
      waited += kQuietProbeS;
      if (load.reason.empty()) {
        progress_ << "  quiet after " << FormatDuration(waited) << ": measuring " << what << " again" << std::endl;
        return;
      }
      if (waited - said >= kHeartbeatS) {
        progress_ << "  still busy after " << FormatDuration(waited) << " (" << OthersUse(load) << ")" << std::endl;
        said = waited;
      }
    }
    progress_ << "  still busy after " << FormatDuration(waited) << " (--quiet-wait " << FormatDuration(bound)
              << "): measuring " << what << " again anyway" << std::endl;
  }

  // "other processes use 63% of the CPU" (or the hypervisor's steal).
  static std::string OthersUse(const Disturbance& load) {
    if (load.steal_share > load.others_share) {
      return "the hypervisor steals " + WholePercent(load.steal_share) + " of the CPU";
    }
    return "other processes use " + WholePercent(load.others_share) + " of the CPU";
  }

  // Starts `queued` if its lane is free and the host's memory allows: true when it started.
  StatusOr<bool> TryStart(const Child& queued, HostUse* host_use, bool* host_waiting) {
    const PlannedCell* c = queued.cell;
    const bool host = IsHostCell(*c);
    const HostPlace place =
        host && lanes_.size() > 1 ? PlaceInLanes(*c, lanes_, runner_, host_use->any, host_use->whole) : HostPlace{};
    const std::string lane_name = place.lane != nullptr ? place.lane->name : c->key.device;
    if (place.blocked || !runner_.CanStart(lane_name) || (host && *host_waiting)) {
      if (place.whole_host && !host_use->whole) *host_waiting = true;  // the host empties for it
      return false;
    }
    if (queued.wait_for_quiet && running_.empty()) WaitForQuiet(*c);
    const PlannedCell child = ChildView(*c, queued.index);
    CellCommand cmd;
    cmd.key = c->key;
    cmd.lane = lane_name;
    if (place.lane != nullptr) cmd.cpus = place.lane->cpus;
    cmd.argv = child.argv;
    cmd.env = options_.child_env;
    if (!c->reference.argv.empty()) cmd.env.emplace_back(kNumericProbeEnv, "1");  // the numeric check's tensors
    cmd.log_path = child.output_dir + ".log";
    cmd.timeout_s = options_.cell_timeout_s;
    bool limit_bound = false;
    if (options_.time_limit_s > 0) {  // the run's limit is a hard bound: no child runs past it
      const double left = std::max(options_.time_limit_s - tally_->ElapsedS(), 1.0);
      limit_bound = cmd.timeout_s <= 0 || left < cmd.timeout_s;
      if (limit_bound) cmd.timeout_s = left;
    }
    if (host && c->device.total_memory_bytes > 0) {
      // The host's limit is shared: a cell may take what the running cells' predicted peaks leave of it, and
      // waits while its own prediction does not fit (alone it always starts, and the limit is all of it).
      const int64_t limit = MemoryLimit(c->device, options_);
      if (host_use->any && host_use->bytes + child.predicted_memory_bytes > limit) {
        *host_waiting = true;
        return false;
      }
      cmd.memory_limit_bytes = limit - host_use->bytes;
    }
    Status s = runner_.Start(cmd);
    if (!s.ok() && runner_.interrupted()) {  // a stop that came between two cells: the run is interrupted
      runner_.Abort();
      run_->interrupted = interrupted_ = true;
      return false;
    }
    if (!s.ok()) return s.WithContext("starting " + c->key.config + " on " + c->key.device);
    started_any_ = true;
    Child started = queued;
    started.host_bytes = host ? std::max<int64_t>(child.predicted_memory_bytes, 1) : 0;
    started.whole_host = place.whole_host;
    started.limit_bound = limit_bound;
    host_use->Add(started);
    started.started_at = Clock::now();
    running_[c->key] = started;
    return true;
  }

  CellRunner& runner_;
  const MatrixOptions& options_;
  std::ostream& progress_;
  RunTally* tally_;
  MatrixRun* run_;
  const std::vector<CpuLane> lanes_;
  std::vector<Child> queue_;
  std::vector<Child> cut_;  // DeferredByTheTimeLimit's children of started cells, until TakeCut
  std::map<CellKey, Child> running_;
  bool started_any_ = false;
  bool interrupted_ = false;
};

// One cell's job from its first child to its record: its proxies one after the other, its own run, a run
// again where other work disturbed it, its proxies instead where its run was stopped at the memory limit, then
// its numeric check's reference; environment failures are reported, never recorded.
class CellJobs {
 public:
  CellJobs(const MatrixOptions& options, Recorder* recorder, LaneScheduler* lanes, std::ostream& progress,
           RunTally* tally, MatrixRun* run)
      : options_(options), recorder_(recorder), lanes_(lanes), progress_(progress), tally_(tally), run_(run) {}

  // A child of a started cell that the run's time limit kept from starting: a reference leaves its cell recorded
  // without the numeric check; a proxy or a run again leaves the whole cell for a later run.
  Status Cut(const Child& child) {
    const PlannedCell& cell = *child.cell;
    if (child.index == Children(cell)) {
      Awaiting done = std::move(awaiting_[cell.key]);
      awaiting_.erase(cell.key);
      done.result.numeric_note = "not checked: the run reached its --time-limit of " +
                                 FormatDuration(options_.time_limit_s) + " before the float32 reference could start";
      return recorder_->Record(std::move(done.result), cell);
    }
    LeaveForALaterRun(cell, "the run reached its --time-limit of " + FormatDuration(options_.time_limit_s) +
                                " before " + ChildNamed(cell, child.index) + " could start");
    return Status::OK();
  }

  // What follows the end of `finished`, which ended as `outcome`: its cell's next child (ahead of other cells)
  // or its record.
  Status Finished(const Child& finished, const CellOutcome& outcome) {
    const PlannedCell* cell = finished.cell;
    const PlannedCell child = ChildView(*cell, finished.index);
    if (finished.limit_bound && outcome.result.timed_out) {  // the run's bound, no verdict on the device
      if (finished.index == Children(*cell)) return Cut(finished);
      LeaveForALaterRun(*cell, ChildNamed(*cell, finished.index) + " was stopped after " +
                                   FormatDuration(outcome.result.wall_time_s) + " at the run's --time-limit of " +
                                   FormatDuration(options_.time_limit_s));
      return Status::OK();
    }
    CellResult result = ResultFromOutcome(child, outcome.result, options_);
    AddCpuAccounting(outcome, &result);
    std::optional<std::string> environment =
        result.status == CellStatus::kRuns ? std::nullopt : FindEnvironmentFailure(outcome.result.output_tail);
    if (finished.index == Children(*cell)) return ReferenceFinished(*cell, child, std::move(result), environment);
    if (environment) {
      result = cell->preset;  // the cell as planned, for the message; nothing of it is recorded
      result.reason = "environment failure, not a verdict on the device (not recorded): " + *environment;
      progress_ << "ERROR " << cell->key.config << " on " << cell->key.device << ChildShown(*cell, finished.index)
                << ": " << result.reason << std::endl;
      proxy_runs_.erase(cell->key);
      run_->environment_errors.push_back(std::move(result));
      return Status::OK();
    }
    if (RunAgain(finished, result) || ProxiesAfterAStop(finished, outcome, &result)) return Status::OK();
    CellResult checked = result;  // the run whose first step the numeric check compares
    std::string checked_dir = child.output_dir;
    if (finished.index < cell->proxies.size()) {
      std::vector<CellResult>& done_runs = proxy_runs_[cell->key];
      const bool ran = result.status == CellStatus::kRuns;
      done_runs.push_back(std::move(result));
      // The cell's next child starts at once, ahead of other cells: a proxied cell's next proxy while they
      // run, a calibrated cell's every next child (its own run is its verdict, whatever its proxies did).
      if ((ran || cell->RunsInFullAfterProxies()) && finished.index + 1 < Children(*cell)) {
        lanes_->AddFirst(Child{cell, finished.index + 1, true});
        return Status::OK();
      }
      checked = done_runs.front();  // a proxied cell's numbers are checked on its shallowest proxy
      checked_dir = ProxyView(*cell, 0).output_dir;
      result = ResultFromProxies(*cell, done_runs);
      proxy_runs_.erase(cell->key);
    } else if (!cell->proxies.empty()) {
      result = CalibratedResult(*cell, proxy_runs_[cell->key], std::move(result));
      proxy_runs_.erase(cell->key);
    }
    const bool trained = result.status == CellStatus::kRuns || result.ops_verified.value_or(false);
    if (trained && !cell->reference.argv.empty()) {
      awaiting_[cell->key] = {std::move(result), std::move(checked), checked_dir};
      lanes_->AddFirst(Child{cell, Children(*cell), true});
      return Status::OK();
    }
    if (trained && result.numeric_note.empty()) result.numeric_note = cell->reference.note;
    return recorder_->Record(std::move(result), *cell);
  }

 private:
  // The reference: the cell's record with its numeric check. A reference the machine failed is no verdict
  // on the cell's numbers, and the cell's own record stands.
  Status ReferenceFinished(const PlannedCell& cell, const PlannedCell& child, CellResult result,
                           const std::optional<std::string>& environment) {
    Awaiting done = std::move(awaiting_[cell.key]);
    awaiting_.erase(cell.key);
    if (environment) {
      done.result.numeric_note = "not checked: the reference run hit an environment failure: " + *environment;
      progress_ << "ERROR " << cell.key.config << " on " << cell.key.device << " (numeric reference): " << *environment
                << std::endl;
      CellResult error = done.result;
      error.reason = "environment failure of the numeric reference, not a verdict on the device: " + *environment;
      run_->environment_errors.push_back(std::move(error));
    } else {
      AddNumericCheck(cell, done.checked, result, &done.result, ProbeFilesIn(done.checked_dir, child.output_dir));
      done.result.reference_time_s = result.wall_time_s;
    }
    return recorder_->Record(std::move(done.result), cell);
  }

  // A started cell that this run will not record: its earlier record stands, and a later run measures it.
  void LeaveForALaterRun(const PlannedCell& cell, const std::string& why) {
    proxy_runs_.erase(cell.key);
    awaiting_.erase(cell.key);
    run_->deferred.push_back(cell.key);
    tally_->cost_total -= cell.ExpectedTotalS();
    --tally_->total;
    progress_ << cell.key.config << " on " << cell.key.device << ": " << why
              << "; not recorded, its earlier record stands, left for a later run" << std::endl;
  }

  // A child whose run other work disturbed runs again once (a burst beside it is often over by then); a second
  // disturbed run is recorded as disturbed.
  bool RunAgain(const Child& finished, const CellResult& result) {
    const PlannedCell* cell = finished.cell;
    if (result.status != CellStatus::kRuns || result.disturbed.empty() ||
        !retried_.insert({cell->key, finished.index}).second) {
      return false;
    }
    progress_ << cell->key.config << " on " << cell->key.device << ChildShown(*cell, finished.index)
              << " was measured beside other work (" << result.disturbed << "); running it again once" << std::endl;
    Child again = finished;
    again.continues = true;
    again.wait_for_quiet = true;
    again.host_bytes = 0;
    again.whole_host = false;
    lanes_->AddFirst(again);
    return true;
  }

  // A cell whose own run was stopped at the memory limit, its prediction short: it goes on as one predicted
  // too large, its proxies instead, and its record is theirs on top of the stopped run's (status, reason, the
  // resident memory it was stopped at).
  bool ProxiesAfterAStop(const Child& finished, const CellOutcome& outcome, CellResult* result) {
    const PlannedCell* cell = finished.cell;
    if (result->status != CellStatus::kTooLarge || !outcome.result.memory_exceeded ||
        cell->if_stopped_at_memory_limit == nullptr || finished.index != cell->proxies.size()) {
      return false;
    }
    auto stopped = std::make_unique<PlannedCell>(*cell->if_stopped_at_memory_limit);
    result->real_layers = stopped->preset.real_layers;
    result->real_vocab = stopped->preset.real_vocab;
    stopped->preset = std::move(*result);
    stopped->expected_duration_s = cell->expected_duration_s;  // the run's ETA counts the cell as planned
    stopped->reference.expected_duration_s = cell->reference.expected_duration_s;
    progress_ << cell->key.config << " on " << cell->key.device
              << " was stopped at the memory limit; its proxies run instead" << std::endl;
    lanes_->AddFirst(Child{stopped.get(), 0, true});
    stopped_cells_.push_back(std::move(stopped));
    return true;
  }

  // A cell whose own children are done, waiting for its reference: the record, and the run it checks.
  struct Awaiting {
    CellResult result;
    CellResult checked;
    std::string checked_dir;  // the checked run's output folder, where its numeric probe is
  };

  const MatrixOptions& options_;
  Recorder* recorder_;
  LaneScheduler* lanes_;
  std::ostream& progress_;
  RunTally* tally_;
  MatrixRun* run_;
  std::map<CellKey, std::vector<CellResult>> proxy_runs_;  // the finished proxies of each proxied cell
  std::vector<std::unique_ptr<PlannedCell>> stopped_cells_;  // cells going on with their proxies after a stop
  std::map<CellKey, Awaiting> awaiting_;
  std::set<std::pair<CellKey, size_t>> retried_;
};

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
  RunTally tally;
  tally.total = pending.size();
  for (const PlannedCell* c : pending) tally.cost_total += c->runnable ? c->ExpectedTotalS() : 0;
  Recorder recorder(options, provenance, progress, now, &tally, &run);
  LaneScheduler lanes(runner, options, progress, &tally, &run);
  CellJobs jobs(options, &recorder, &lanes, progress, &tally, &run);
  // Nothing is silent for long: while no cell finishes, a line every kHeartbeatS names what runs and for how long.
  runner.SetHeartbeat(
      [&] { progress << StillRunning(lanes.running(), tally.completed, tally.total, tally.start) << std::endl; },
      kHeartbeatS);
  struct HeartbeatOff {  // the heartbeat reads this function's state: it ends with it
    CellRunner& runner;
    ~HeartbeatOff() { runner.SetHeartbeat(nullptr, 0); }
  } heartbeat_off{runner};
  for (const PlannedCell* c : pending) {
    if (!c->runnable) {
      TM_RETURN_IF_ERROR(recorder.Record(c->preset, *c));
    } else {
      lanes.Add({c});
    }
  }
  lanes.OrderForLanes();
  while (!lanes.Done()) {
    TM_RETURN_IF_ERROR(lanes.StartWhatFits());
    if (lanes.interrupted()) return run;
    for (const Child& cut : lanes.TakeCut()) TM_RETURN_IF_ERROR(jobs.Cut(cut));
    if (lanes.running().empty()) break;
    CellOutcome outcome;
    Child ended;
    Status status;
    if (!lanes.WaitForOne(&outcome, &ended, &status)) {
      if (!status.ok()) return status;
      return run;
    }
    TM_RETURN_IF_ERROR(jobs.Finished(ended, outcome));
  }
  return run;
}

}  // namespace tmx::matrix
