#include "matrix/matrix_cli.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <map>
#include <fstream>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "base/cpu_usage.h"
#include "base/file_util.h"
#include "base/json_io.h"
#include "base/lock.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "harness/cli.h"
#include "harness/config_store.h"
#include "harness/device_plugin.h"
#include "harness/openmp_wait.h"
#include "harness/proxy.h"
#include "matrix/calibration.h"
#include "matrix/numeric_check.h"
#include "matrix/check.h"
#include "matrix/compare.h"
#include "matrix/ctest_cells.h"
#include "matrix/git_show.h"
#include "matrix/journal.h"
#include "matrix/history.h"
#include "matrix/junit.h"
#include "matrix/lanes.h"
#include "matrix/machine.h"
#include "matrix/matrix_run.h"
#include "matrix/merge.h"
#include "matrix/peak_cache.h"
#include "matrix/plan.h"
#include "matrix/publish.h"
#include "matrix/run_flags.h"
#include "matrix/runner.h"
#include "matrix/scheduler.h"
#include "matrix/shard.h"
#include "matrix/user_configs.h"

namespace tmx::matrix {
namespace {

// Why `device` names no one device ("" when it does): not a device string, or "auto".
std::string DeviceProblem(const std::string& device) {
  StatusOr<DeviceSelector> spec = ParseDeviceSelector(device);
  if (!spec.ok()) return spec.status().message();
  return spec->is_auto ? "'auto' names no device; name one such as cpu or cuda" : "";
}

int UsageError(std::ostream& err, const std::string& cmd, const std::string& message) {
  err << "error: tune-matrix " << cmd << ": " << message << "\nRun 'tune-matrix help " << cmd << "' for usage.\n";
  return kExitUsage;
}

bool ParseOptions(const Registry& registry, const std::string& cmd, const std::vector<std::string>& args,
                  MatrixOptions* options, bool* write_back, std::ostream& err) {
  std::vector<std::string> warnings;
  Status parsed = ParseRunFlags(registry, args, options, write_back, &warnings);
  for (const std::string& w : warnings) err << "warning: " << w << "\n";
  if (!parsed.ok()) UsageError(err, cmd, parsed.message());
  return parsed.ok();
}

int Fail(std::ostream& err, const Status& s) {
  err << s.ToString() << "\n";
  return s.ExitCode();
}

// The flags of the speed noise model (speed.h), shared by check and compare.
const std::vector<std::string> kNoiseFlags = {"max-slowdown", "noise-factor", "min-step-time"};
#define TM_NOISE_FLAGS_HELP                                                                                       \
  "  --max-slowdown F           tokens/s drop that is never a regression (default 0.10)\n"              \
  "  --noise-factor K           ... nor one within K x the combined relative step-time spread of the\n" \
  "                             two runs, when larger (default 3)\n"                                     \
  "  --min-step-time S          compare tokens/s only where a step takes at least S seconds on both\n"  \
  "                             sides (default 0.25; shorter steps are noise-dominated)\n"

bool ParseNoise(const ParsedArgs& parsed, SpeedNoise* noise, std::string* error) {
  if (!NumberFlag(parsed, "max-slowdown", &noise->max_slowdown, error) ||
      !NumberFlag(parsed, "noise-factor", &noise->noise_factor, error) ||
      !NumberFlag(parsed, "min-step-time", &noise->min_step_time_s, error)) {
    return false;
  }
  if (!(noise->max_slowdown >= 0 && noise->max_slowdown < 1) || !(noise->noise_factor >= 0) ||
      !(noise->min_step_time_s >= 0)) {
    *error = "--max-slowdown must be in [0, 1), --noise-factor and --min-step-time at least 0";
    return false;
  }
  return true;
}

std::vector<std::string> With(std::vector<std::string> flags, const std::vector<std::string>& more) {
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

int Plan(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  MatrixOptions options;
  bool write_back = true;
  if (!ParseOptions(registry, "plan", args, &options, &write_back, err)) return kExitUsage;
  StatusOr<std::vector<DeviceInfo>> devices = DiscoverDevices(options.tune_path);
  if (!devices.ok()) return Fail(err, devices.status());
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(registry, *devices, options);
  if (!cells.ok()) return Fail(err, cells.status());
  for (const PlannedCell& c : *cells) {
    const bool proxied = !c.proxies.empty();
    const bool calibrated = c.RunsInFullAfterProxies();
    std::string what = c.deferred     ? "later"
                       : calibrated   ? "calibrate"
                       : proxied      ? "proxy"
                       : c.runnable   ? "run"
                                      : CellStatusName(c.preset.status);
    out << what << std::string(what.size() < 11 ? 11 - what.size() : 1, ' ') << DeviceShown(c) << "  " << c.key.config
        << "  predicted " << FormatBytes(c.predicted_memory_bytes);
    if (proxied) {
      // What the whole config would need, then each proxy: the cell records the planned status with them.
      std::vector<std::string> runs;
      for (const ProxyRun& p : c.proxies) {
        runs.push_back(std::to_string(p.layers) + (p.layers == 1 ? " layer " : " layers ") +
                       (p.vocab > 0 ? std::to_string(p.vocab) + " ids " : "") + FormatBytes(p.predicted_memory_bytes));
      }
      if (calibrated) {
        out << ", " << c.steps << " steps in full after proxies of ";
      } else {
        out << " (" << CellStatusName(c.preset.status) << "); proxies of ";
      }
      out << JoinStrings(runs, ", ") << " of " << ProxiedSize(c.preset) << ", " << c.steps
          << " steps each, about " << FormatDuration(c.ExpectedTotalS());
    } else if (c.runnable) {
      out << ", " << c.steps << " steps, about " << FormatDuration(c.ExpectedTotalS());
    }
    if (!c.repair.empty()) out << "; invalid as written, repaired with " << JoinStrings(c.repair, " ");
    if (!c.reference.argv.empty()) {
      out << "; numbers checked against float32 on " << c.reference.device << " (about "
          << FormatDuration(c.reference.expected_duration_s) << " of the time)";
    }
    if (!c.runnable) out << "  (" << TerminalText(c.preset.reason) << ")";  // a merged record's words
    if (c.deferred) {
      out << "  (left for a later run by --time-limit: "
          << (c.recorded_at.empty() ? std::string("it does not fit in the time left")
                                    : "its record of " + c.recorded_at + " is among the newest")
          << ")";
    }
    out << "\n";
  }
  // Totals: what a run would do, and how long the cells it starts are predicted to take one after another.
  std::map<std::string, int> recorded;  // cells recorded without running, by status
  int to_run = 0, proxied = 0, calibrated = 0, deferred = 0;
  double seconds = 0, deferred_s = 0;
  for (const PlannedCell& c : *cells) {
    if (c.deferred) {
      ++deferred;
      deferred_s += c.ExpectedTotalS();
    } else if (c.runnable) {
      ++to_run;
      calibrated += c.RunsInFullAfterProxies();
      proxied += c.RunsProxiesInstead();
      seconds += c.ExpectedTotalS();
    } else {
      ++recorded[CellStatusName(c.preset.status)];
    }
  }
  std::vector<std::string> how;
  if (proxied > 0) how.push_back(std::to_string(proxied) + " as proxies");
  if (calibrated > 0) how.push_back(std::to_string(calibrated) + " in full after their proxies");
  std::vector<std::string> parts = {std::to_string(to_run) + " to run" +
                                    (how.empty() ? "" : " (" + JoinStrings(how, ", ") + ")")};
  for (const auto& [status, n] : recorded) parts.push_back(std::to_string(n) + " " + status);
  if (deferred > 0) {
    parts.push_back(std::to_string(deferred) + " left for a later run by --time-limit (about " +
                    FormatDuration(deferred_s) + ")");
  }
  out << Counted(static_cast<int64_t>(cells->size()), "cell") << ": " << JoinStrings(parts, ", ") << "; the cells to run are predicted to take about "
      << FormatDuration(seconds) << " in all\n";
  return kExitOk;
}

// Takes the lock file at `path` for `command` (base/lock.h). Null, with the holder named on `err`, when
// another process holds it: the caller must write nothing.
std::unique_ptr<CheckoutLock> TakeLock(const std::string& path, const std::string& command, std::ostream& err) {
  std::string notice;
  StatusOr<std::unique_ptr<CheckoutLock>> lock = CheckoutLock::Acquire(path, "tune-matrix " + command, &notice);
  if (!lock.ok()) {
    err << "error: tune-matrix " << command << ": " << lock.status().message()
        << "\nNothing was written; wait for that command to finish (or stop it), then run this one again.\n";
    return nullptr;
  }
  if (!notice.empty()) err << "note: " << notice << "\n";
  return std::move(lock).value();
}

// The lock of the checkout whose configs a command writes, so two commands never write configs, journals
// and reports at once.
std::unique_ptr<CheckoutLock> LockCheckout(const std::string& command, std::ostream& err) {
  return TakeLock(ParentDir(BuiltinConfigDir()) + "/" + kCheckoutLockName, command, err);
}

// The lock of the journal a command appends to or rewrites (JournalLockPath), taken by every writer, with
// or without write-back, so a record appended by one is never lost to another's rewrite.
std::unique_ptr<CheckoutLock> LockJournal(const std::string& command, const std::string& journal,
                                          std::ostream& err) {
  return TakeLock(JournalLockPath(journal), command + " (journal " + journal + ")", err);
}

// How long `run` looks at the machine's load, once, before measuring the devices' peaks (and to warn before the
// first cell).
constexpr double kLoadProbeS = 0.3;

// The peaks a quiet machine measured are kept (matrix/peak_cache.h); on a busy one they replace what was just
// measured, which other work reads low, and the run says so.
void KeepOrUseQuietPeaks(const MatrixOptions& options, bool busy, std::vector<DeviceInfo>* devices, std::ostream& out,
                         std::ostream& err) {
  const std::string path = PeakCachePath(Hostname(), options.cpu_class, options.torch_version);
  if (!busy) {
    Status kept = SavePeaks(path, *devices);
    if (!kept.ok()) err << "tune-matrix: warning: the matmul peaks were not kept: " << kept.message() << "\n";
    return;
  }
  StatusOr<int> used = LoadPeaks(path, devices);
  if (!used.ok()) {
    err << "tune-matrix: warning: " << used.status().message() << "; the peaks measured now are used\n";
  } else if (*used > 0) {
    out << "matmul peaks: the machine is busy, so the peaks measured when it was quiet are used (" << path << ")\n";
  } else {
    err << "tune-matrix: warning: the matmul peaks were measured on a busy machine and may read low (no quiet "
           "run's peaks are kept for this machine yet)\n";
  }
}

int Run(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  MatrixOptions options;
  bool write_back = true;
  if (!ParseOptions(registry, "run", args, &options, &write_back, err)) return kExitUsage;
  Status selection = CheckSelection(registry, options);
  if (!selection.ok()) return Fail(err, selection);
  for (const std::string& dir :
       {options.work_dir, options.reports_dir, ParentDir(options.journal_path), ParentDir(options.junit_path)}) {
    Status made = MakeDirs(dir);
    if (!made.ok()) return Fail(err, made);
  }
  Status handlers = SubprocessSet::InstallInterruptHandlers();
  if (!handlers.ok()) return Fail(err, handlers);
  // Each device's matmul peak is measured once, with the devices, for every cell's share of it (on a busy machine
  // replaced by a quiet run's, KeepOrUseQuietPeaks).
  const std::string busy_warning = BusyMachineWarning(ProbeMachineLoad(kLoadProbeS), kLoadProbeS);
  const bool busy = !busy_warning.empty();
  StatusOr<std::vector<DeviceInfo>> devices =
      DiscoverDevices(options.tune_path, "", /*matmul_peak=*/true, {}, options.child_env);
  if (!devices.ok()) return Fail(err, devices.status());
  if (options.cpu_lanes == 0) {
    const int accelerators = static_cast<int>(std::count_if(devices->begin(), devices->end(), [](const DeviceInfo& d) {
      return !d.traits().HostMemory();
    }));
    options.cpu_lanes = DefaultCpuLanes(ReadUsableCores().count, accelerators);
  }
  const std::vector<CpuLane> lanes = PlanLanes(ReadAffinityCpus(), options.cpu_lanes);
  if (lanes.size() > 1) {
    out << "cpu lanes: " << lanes.size() << " (";
    for (size_t i = 0; i < lanes.size(); ++i) {
      std::vector<std::string> cpus;
      for (int cpu : lanes[i].cpus) cpus.push_back(std::to_string(cpu));
      out << (i ? ", " : "") << lanes[i].name << " on CPU" << (cpus.size() == 1 ? " " : "s ") << JoinStrings(cpus, ",");
    }
    out << ")\n";
    // The peak again inside a lane's CPUs, at the threads a cell of that lane computes with.
    devices = DiscoverDevices(options.tune_path, "", /*matmul_peak=*/true, lanes.front().cpus, options.child_env);
    if (!devices.ok()) return Fail(err, devices.status());
  }
  KeepOrUseQuietPeaks(options, busy, &*devices, out, err);
  for (const DeviceInfo& d : *devices) {
    std::string peak = DescribeMatmulPeak(d);
    if (!peak.empty()) out << peak << "\n";
  }
  std::unique_ptr<CellRunner> runner =
      MakeSubprocessRunner(static_cast<int>(devices->size() + lanes.size() - 1));
  RunSetting setting{*devices, LocalProvenance(options.job), runner.get()};
  setting.busy_warning = busy_warning;
  // A run that writes its results into the configs holds the checkout; one that only keeps a journal
  // (--no-write-back, as CI shards do) or runs user configs writes nothing else of the checkout's and may
  // run beside it. Every run holds the journal it writes.
  std::unique_ptr<CheckoutLock> lock;
  if (write_back && options.user_configs.empty()) {
    lock = LockCheckout("run", err);
    if (!lock) return kExitFailure;
  }
  std::unique_ptr<CheckoutLock> journal_lock = LockJournal("run", options.journal_path, err);
  if (!journal_lock) return kExitFailure;
  StatusOr<MatrixRun> run = RunMatrix(registry, options, write_back, setting, out, err);
  if (!run.ok()) return Fail(err, run.status());
  if (run->interrupted) {
    err << "tune-matrix: interrupted; " << Counted(static_cast<int64_t>(run->recorded.size()), "cell") << " recorded in " << options.journal_path
        << ". Run again with --resume to finish the rest.\n";
    return kExitInterrupted;
  }
  if (!run->environment_errors.empty()) {
    err << "tune-matrix: " << Counted(static_cast<int64_t>(run->environment_errors.size()), "cell")
        << " not recorded: each failed because of this machine, not the device, or made a record that breaks a "
           "record rule (named below):\n";
    for (const CellResult& r : run->environment_errors) {
      err << "  " << r.key.config << " on " << r.key.device << ": " << TerminalText(r.reason) << "\n";
    }
    err << "Fix the machine (disk space, permissions, a clock that jumped), then run again with --resume.\n";
    return kExitFailure;
  }
  return kExitOk;
}

int Report(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {}, {"reports-dir", "repo-url"}, &parsed, &error) || !parsed.positional.empty()) {
    return UsageError(err, "report", error.empty() ? "takes no positional arguments" : error);
  }
  std::string dir = parsed.Get("reports-dir", "reports");
  std::optional<ReportOptions> options;  // none: the origin remote's address
  if (parsed.Has("repo-url")) {
    const std::string given = parsed.Get("repo-url");
    options = ReportOptions{given.empty() ? "" : RepositoryWebUrl(given)};
    if (!given.empty() && options->repository_url.empty()) {
      return UsageError(err, "report", "--repo-url '" + given + "' is no repository web address; give one such as "
                                           "https://github.com/OWNER/REPO, or '' for commits as plain text");
    }
  }
  std::unique_ptr<CheckoutLock> lock = LockCheckout("report", err);
  if (!lock) return kExitFailure;
  Status s = WriteReports(registry, dir, options);
  if (!s.ok()) return Fail(err, s);
  out << "Wrote " << ReportFileList(dir + "/", "and") << "\n";
  return kExitOk;
}

// "config on device" of each cell that runs in full now (its config's metadata), has no calibration, and could
// have one: its model is deeper than the second proxy depth.
std::vector<std::string> Uncalibrated(const Registry& registry, const std::vector<ConfigSupport>& configs,
                                      const std::vector<CalibrationRow>& rows) {
  std::vector<std::string> cells;
  for (const ConfigSupport& c : configs) {
    for (const auto& [type, e] : c.entries) {
      if (!IsRunsStatus(e.repaired_status.empty() ? e.status : e.repaired_status)) continue;
      if (std::any_of(rows.begin(), rows.end(), [&, &type = type](const CalibrationRow& r) {
            return r.config == c.config && r.column == type;
          })) {
        continue;
      }
      StatusOr<LocatedConfig> located = LocateConfig(c.config, registry);
      if (!located.ok()) continue;
      StatusOr<Config> config = LoadResolvedConfig(*located, {}, located->recipe, &registry);
      if (config.ok() && ProxyOf(*config, registry, kProxyFallbackLayers).ok()) cells.push_back(c.config + " on " + type);
    }
  }
  return cells;
}

int Calibration(const Registry& registry, const std::vector<std::string>& args, std::ostream& out,
                std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {}, {"reports-dir"}, &parsed, &error) || !parsed.positional.empty()) {
    return UsageError(err, "calibration", error.empty() ? "takes no positional arguments" : error);
  }
  StatusOr<std::vector<ConfigSupport>> configs = ReadBuiltinClaims(registry);
  if (!configs.ok()) return Fail(err, configs.status());
  StatusOr<History> history = ReadHistoryOf(HistoryDir(parsed.Get("reports-dir", "reports")), *configs);
  if (!history.ok()) return Fail(err, history.status());
  const std::vector<CalibrationRow> rows = CalibrationRows(*history);
  WriteCalibrationTable(rows, Uncalibrated(registry, *configs, rows), out);
  return kExitOk;
}

int Numeric(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {}, {"journal"}, &parsed, &error) || !parsed.positional.empty()) {
    return UsageError(err, "numeric", error.empty() ? "takes no positional arguments" : error);
  }
  std::vector<std::string> warnings;
  StatusOr<std::vector<CellResult>> records = ReadJournal(parsed.Get("journal", "reports/journal.jsonl"), &warnings);
  for (const std::string& w : warnings) err << "warning: " << w << "\n";
  if (!records.ok()) return Fail(err, records.status());
  std::vector<CellResult> latest;
  for (auto& [cell, record] : LatestByColumn(*records)) latest.push_back(std::move(record));
  WriteNumericSpreads(NumericSpreads(latest), out);
  return kExitOk;
}

int Compare(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {}, With(kNoiseFlags, {"journal"}), &parsed, &error)) return UsageError(err, "compare", error);
  if (parsed.positional.size() != 2) {
    return UsageError(err, "compare", "give two journals or commits to compare: tune-matrix compare A B");
  }
  SpeedNoise noise;
  if (!ParseNoise(parsed, &noise, &error)) return UsageError(err, "compare", error);
  const std::string journal = parsed.Get("journal", "reports/journal.jsonl");
  std::vector<CompareSide> sides;
  for (const std::string& spec : parsed.positional) {
    StatusOr<CompareSide> side = LoadCompareSide(spec, ".", journal);
    if (!side.ok()) {
      err << "error: tune-matrix compare: " << side.status().message() << "\n";
      return kExitUsage;
    }
    sides.push_back(std::move(side).value());
  }
  Comparison comparison = CompareRecords(sides[0].records, sides[1].records, noise);
  PrintComparison(sides[0], sides[1], comparison, noise, out);
  return comparison.Regressions() > 0 ? kExitFailure : kExitOk;
}


int Merge(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {"replace-journal"}, {"journal-out", "reports-dir", "junit"}, &parsed, &error)) {
    return UsageError(err, "merge", error);
  }
  if (parsed.positional.empty()) return UsageError(err, "merge", "name at least one journal to merge");
  MergeOptions options;
  options.journal_out = parsed.Get("journal-out", options.journal_out);
  options.reports_dir = parsed.Get("reports-dir", options.reports_dir);
  std::unique_ptr<CheckoutLock> lock = LockCheckout("merge", err);
  if (!lock) return kExitFailure;
  std::unique_ptr<CheckoutLock> journal_lock;
  std::vector<std::string> paths = parsed.positional;
  if (!options.journal_out.empty()) {
    journal_lock = LockJournal("merge", options.journal_out, err);
    if (!journal_lock) return kExitFailure;
    // The journal written keeps every cell it had: a merge adds records, and a newer record replaces an
    // older one, but a cell the given journals lack is not dropped unless --replace-journal asks.
    const bool named = std::any_of(paths.begin(), paths.end(),
                                   [&](const std::string& p) { return SameFile(p, options.journal_out); });
    if (!parsed.Has("replace-journal") && !named && PathExists(options.journal_out)) {
      paths.insert(paths.begin(), options.journal_out);
      out << "merging into " << options.journal_out << ": its records are kept unless a newer one replaces them"
          << " (--replace-journal writes the given journals only)\n";
    }
  }
  StatusOr<JournalSet> journals = LoadJournals(paths, registry);
  if (!journals.ok()) {
    err << "tune-matrix merge: nothing was written\n";
    return Fail(err, journals.status());
  }
  for (const std::string& w : journals->warnings) err << "warning: " << w << "\n";
  Status s = MergeJournals(*journals, registry, options, out);
  if (!s.ok()) return Fail(err, s);
  if (parsed.Has("junit")) {
    std::vector<CellResult> latest;
    for (auto& [key, cell] : LatestByCell(journals->records)) latest.push_back(cell);
    s = WriteJUnitFile(latest, parsed.Get("junit"));
    if (!s.ok()) return Fail(err, s);
    out << "wrote " << parsed.Get("junit") << "\n";
  }
  out << "tune-matrix merge: " << journals->records.size() << " records from " << paths.size() << " journal(s)\n";
  return kExitOk;
}

int Check(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {}, With(kNoiseFlags, {"expect-devices", "reports-dir"}), &parsed, &error)) {
    return UsageError(err, "check", error);
  }
  CheckOptions options;
  options.expect_devices = SplitList(parsed.Get("expect-devices"));
  if (!ParseNoise(parsed, &options.noise, &error)) return UsageError(err, "check", error);
  for (const std::string& d : options.expect_devices) {
    std::string problem = DeviceProblem(d);
    if (!problem.empty()) return UsageError(err, "check", "--expect-devices: " + problem);
  }
  std::vector<std::string> paths = parsed.positional;
  const std::string kDefaultJournal = "reports/journal.jsonl";
  if (paths.empty() && PathExists(kDefaultJournal)) paths.push_back(kDefaultJournal);
  StatusOr<JournalSet> journals = LoadJournals(paths, registry);
  if (!journals.ok()) return Fail(err, journals.status());
  for (const std::string& w : journals->warnings) err << "warning: " << w << "\n";
  StatusOr<std::vector<ConfigSupport>> claims = ReadBuiltinClaims(registry);
  if (!claims.ok()) return Fail(err, claims.status());
  // Accepting observations must keep the committed journal's other cells: it goes first.
  std::vector<std::string> accept = paths;
  if (PathExists(kDefaultJournal) && std::find(accept.begin(), accept.end(), kDefaultJournal) == accept.end()) {
    accept.insert(accept.begin(), kDefaultJournal);
  }
  options.accept_command = "tune-matrix merge " + (accept.empty() ? std::string("<journals>") : JoinStrings(accept, " "));
  CheckCounts counts;
  std::vector<CheckProblem> problems = CheckSupport(*claims, *journals, options, &counts);
  std::string reports_dir = parsed.Get("reports-dir", "reports");
  std::vector<CheckProblem> reports = CheckReports(*claims, reports_dir, &*journals);
  problems.insert(problems.end(), reports.begin(), reports.end());
  std::string summary = std::to_string(claims->size()) + " configs against " +
                        std::to_string(journals->records.size()) + " observations from " +
                        std::to_string(paths.size()) + " journal(s)" +
                        (options.expect_devices.empty() ? std::string()
                                                        : ", expecting " + JoinStrings(options.expect_devices, ", ")) +
                        "; " + Counted(counts.observations, "cell") + " compared, tokens/s of " +
                        std::to_string(counts.speed_compared) + " (" + std::to_string(counts.speed_too_short) +
                        " with steps under --min-step-time" +
                        (counts.speed_disturbed > 0 ? "; " + std::to_string(counts.speed_disturbed) +
                                                          " not compared, measured beside other work"
                                                    : std::string()) +
                        ")";
  if (problems.empty()) {
    out << "tune-matrix check: OK: " << summary << "\n";
    return kExitOk;
  }
  PrintProblems(problems, err);
  err << "tune-matrix check: " << problems.size() << " problem(s): " << summary << "\n";
  return kExitFailure;
}

// The CTest resource spec of this machine's GPUs, for `ctest --resource-spec-file`: one "gpus" resource
// per CUDA device, one slot each, so no two GPU cells share a device.
int ResourceSpec(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {}, {"tune"}, &parsed, &error) || !parsed.positional.empty()) {
    return UsageError(err, "resource-spec", error.empty() ? "takes no positional arguments" : error);
  }
  StatusOr<std::vector<DeviceInfo>> devices = DiscoverDevices(parsed.Get("tune", ExecutableDir() + "/tune"));
  if (!devices.ok()) return Fail(err, devices.status());
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const DeviceInfo& d : *devices) {
    if (d.traits().takes_index) gpus.push_back({{"id", std::to_string(d.index)}, {"slots", 1}});
  }
  nlohmann::ordered_json spec = {{"version", {{"major", 1}, {"minor", 0}}}, {"local", {{{"gpus", gpus}}}}};
  out << DumpJson(spec, 2) << "\n";
  return kExitOk;
}

// The CTest script of the tiny configs' cells (ctest_cells.h), written atomically to --out.
int CtestCells(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {}, {"out", "work-dir"}, &parsed, &error) || !parsed.positional.empty() ||
      !parsed.Has("out") || !parsed.Has("work-dir")) {
    return UsageError(err, "ctest-cells", error.empty() ? "takes --out FILE and --work-dir DIR" : error);
  }
  const std::string script = CtestCellsScript(CtestCellConfigs(registry), CtestCellDeviceTypes(),
                                              ExecutableDir() + "/tune-matrix", parsed.Get("work-dir"));
  Status s = WriteFileAtomically(parsed.Get("out"), script);
  if (!s.ok()) return Fail(err, s);
  out << "tune-matrix ctest-cells: wrote " << parsed.Get("out") << "\n";
  return kExitOk;
}

// The device a CTest-run cell gets: the GPU CTest allotted it (CTEST_RESOURCE_GROUP_0_GPUS="id:1,slots:1")
// when the test asked for one, else the device as given.
std::string CtestDevice(const std::string& device) {
  const char* allotted = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS");
  if (allotted == nullptr || device.find(':') != std::string::npos) return device;
  std::string s = allotted;
  size_t id = s.find("id:");
  if (id == std::string::npos) return device;
  size_t end = s.find(',', id);
  return device + ":" + s.substr(id + 3, end == std::string::npos ? std::string::npos : end - id - 3);
}

// Exit status of `tune-matrix cell` when the cell was not started (CTest's SKIP_RETURN_CODE).
constexpr int kExitSkipped = 77;

// `tune-matrix cell`'s arguments into `options`, `*config` and `*device`: -1, or the exit status of a usage
// error it printed.
int ParseCellArgs(const Registry& registry, const std::vector<std::string>& args, MatrixOptions* options,
                  std::string* config, std::string* device, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {}, {"device", "steps", "timeout", "work-dir", "tune", "cpu-class"}, &parsed, &error)) {
    return UsageError(err, "cell", error);
  }
  if (parsed.positional.size() != 1 || !parsed.Has("device")) {
    return UsageError(err, "cell", "give one config and its device: tune-matrix cell CONFIG --device DEVICE");
  }
  *config = parsed.positional[0];
  if (IsConfigPath(*config)) {
    std::vector<std::string> warnings;
    StatusOr<std::vector<UserConfig>> user = ResolveUserConfigs(registry, {*config}, {}, &warnings);
    for (const std::string& w : warnings) err << "warning: " << w << "\n";
    if (!user.ok()) return UsageError(err, "cell", user.status().message());
    if (user->size() != 1) {
      return UsageError(err, "cell", *config + " holds " + std::to_string(user->size()) +
                                         " configs; give one file (tune-matrix run --configs takes a folder)");
    }
    options->user_configs = std::move(user).value();
    *config = options->user_configs.front().name;
  } else if (registry.RecipeForConfig(*config) == nullptr) {
    return UsageError(err, "cell", "'" + *config + "' is neither a built-in config (see tune ls) nor a .yaml file");
  }
  options->tune_path = parsed.Get("tune", ExecutableDir() + "/tune");
  options->work_dir = parsed.Get("work-dir", "runs/cells");
  options->cell_budget_s = 0;  // a cell asked for by name runs however long it is predicted to take
  if (!NumberFlag(parsed, "steps", &options->max_steps, &error) ||
      !NumberFlag(parsed, "timeout", &options->cell_timeout_s, &error)) {
    return UsageError(err, "cell", error);
  }
  if (options->max_steps < 2 || !(options->cell_timeout_s > 0)) {
    return UsageError(err, "cell", "--steps must be at least 2 and --timeout above 0");
  }
  if (parsed.Has("steps")) options->startup_share = 0;  // the steps asked for, not more
  // A CTest cell is there for its verdict, and ctest runs cells side by side: a disturbed one is measured again
  // at once rather than waiting for a machine the suite itself keeps busy.
  options->quiet_wait_s = 0;
  Status column = ChooseRunColumn(parsed.Get("cpu-class"), options);
  if (!column.ok()) return UsageError(err, "cell", column.message());
  *device = CtestDevice(parsed.Get("device"));
  std::string problem = DeviceProblem(*device);
  if (!problem.empty()) return UsageError(err, "cell", "--device: " + problem);
  return -1;
}

// The cell's device (a bare type, "cuda", means its first device, so the cell runs once even on a machine with
// several) and the numeric check's reference device beside it: only those are probed. Empty where the machine
// lacks the device.
StatusOr<std::vector<DeviceInfo>> CellDevices(const MatrixOptions& options, const std::string& device) {
  StatusOr<std::vector<DeviceInfo>> devices = DiscoverDevices(options.tune_path, device, false, {}, options.child_env);
  if (!devices.ok() || devices->empty()) return devices;
  if (!devices->front().traits().numeric_reference) {
    for (const DeviceTypeTraits& type : DeviceTypes()) {
      if (!type.numeric_reference) continue;
      StatusOr<std::vector<DeviceInfo>> reference = DiscoverDevices(options.tune_path, type.name);
      if (reference.ok() && !reference->empty()) devices->push_back(reference->front());
      break;
    }
  }
  return devices;
}

// The threads a cell's `tune run` computes with: OMP_NUM_THREADS's (CTest's 1), else every usable core
// (ChooseThreads on a quiet machine).
int CellThreads() {
  const int named = ThreadsNamed(std::getenv("OMP_NUM_THREADS"));
  return named > 0 ? named : ReadUsableCores().count;
}

// A cell's shares of the device's peaks come from the peaks a quiet `run` kept on this machine (peak_cache.h) at
// the threads the cell computes with: measuring them in every CTest cell, beside the others, would read them low,
// and a peak at other threads is no limit of this run. Without such peaks the record has no share.
void UseKeptPeaks(const MatrixOptions& options, std::vector<DeviceInfo>* devices, std::ostream& out,
                  std::ostream& err) {
  const std::string path = PeakCachePath(Hostname(), options.cpu_class, options.torch_version);
  const int threads = CellThreads();
  for (DeviceInfo& d : *devices) d.matmul_peak_threads = threads;
  StatusOr<int> used = LoadPeaks(path, devices);
  for (DeviceInfo& d : *devices) {
    if (d.matmul_peak_flops.empty()) d.matmul_peak_threads = 0;
  }
  if (!used.ok()) {
    err << "tune-matrix: warning: " << used.status().message() << "; the cell has no share of the peaks\n";
    return;
  }
  const std::string at = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  if (*used > 0) {
    out << "matmul peaks: those a quiet run kept at " << at << " (" << path << ")\n";
  } else {
    out << "matmul peaks: none kept at " << at << " by a quiet run (" << path
        << "), so the cell has no share of them; `tune-matrix run` on a quiet machine keeps them\n";
  }
}

// The exit status of a cell's run, and its line: 0 runs, 77 recorded without starting, 1 otherwise.
int CellExit(const MatrixRun& run, const std::string& config, const std::string& device, std::ostream& out,
             std::ostream& err) {
  if (run.interrupted) return kExitInterrupted;
  if (!run.environment_errors.empty()) {
    err << "ERROR " << config << " on " << device << ": " << TerminalText(run.environment_errors.front().reason)
        << "\n";
    return kExitFailure;
  }
  const CellResult& r = run.recorded.front();
  if (r.status == CellStatus::kRuns) return kExitOk;
  // A cell recorded from the plan alone (invalid, too_large, too_slow) is no failure of the device.
  if (!CellStarted(r.status)) {
    out << "SKIPPED " << config << " on " << device << ": " << CellStatusName(r.status) << ": " << TerminalText(r.reason)
        << "\n";
    return kExitSkipped;
  }
  err << "FAILED " << config << " on " << device << ": " << CellStatusName(r.status) << ": " << TerminalText(r.reason)
      << "\n"
      << r.output_tail << "\n";
  return kExitFailure;
}

int Cell(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  MatrixOptions options;
  std::string config, device;
  if (int usage = ParseCellArgs(registry, args, &options, &config, &device, err); usage >= 0) return usage;
  StatusOr<std::vector<DeviceInfo>> devices = CellDevices(options, device);
  if (!devices.ok()) return Fail(err, devices.status());
  if (devices->empty()) {
    out << "SKIPPED " << config << " on " << device << ": no " << device << " device on this machine\n";
    return kExitSkipped;
  }
  device = devices->front().id;
  UseKeptPeaks(options, &*devices, out, err);
  Status made = MakeDirs(options.work_dir);
  if (!made.ok()) return Fail(err, made);
  std::string slug = config + "__" + device;
  for (char& c : slug) {
    if (c == '/' || c == ':') c = '_';
  }
  options.journal_path = options.work_dir + "/" + slug + ".jsonl";
  ::unlink(options.journal_path.c_str());
  options.work_dir += "/" + slug;
  made = MakeDirs(options.work_dir);
  if (!made.ok()) return Fail(err, made);
  Status handlers = SubprocessSet::InstallInterruptHandlers();
  if (!handlers.ok()) return Fail(err, handlers);
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(1);
  RunSetting setting{*devices, LocalProvenance("ctest"), runner.get()};
  StatusOr<MatrixRun> run = RunOneCell(registry, config, device, options, setting, out);
  if (!run.ok()) return Fail(err, run.status());
  return CellExit(*run, config, device, out, err);
}

// The help texts name the report files from ReportFiles().
std::string MergeHelp() {
  return std::string(
             "Combines journals from several machines or CI jobs: per (config, device) and column (the CPU class and\n"
             "torch version, as in \"cpu (amx, torch 2.11.0)\") the newest record wins, with its provenance (host,\n"
             "job, commit); a record of another class or torch is another column, kept beside it. Writes the results "
             "into each config's metadata block, regenerates\n"
             "reports/") +
         ReportFileList("", "and") +
         ", adds every merged record to reports/history, and\n"
         "writes the combined journal (newest record per cell).\n"
         "A malformed line, a record that does not belong to this checkout (wrong recipe, mismatched device\n"
         "type, a time not in UTC form) or a journal with no built-in config at all fails the merge naming the\n"
         "file and line, and nothing is written. Records of configs renamed or removed since, and an unfinished\n"
         "last line (a job killed mid-write), are skipped with a warning.\n\n"
         "  --journal-out PATH       combined journal (default reports/journal.jsonl); its own records are merged\n"
         "                           too, so a merge never drops a cell from it\n"
         "  --replace-journal        write only the given journals' records to --journal-out\n"
         "  --reports-dir DIR        reports folder (default reports)\n"
         "  --junit FILE             also write the merged cells as JUnit XML";
}

std::string CheckHelp() {
  return std::string(
    "Compares what the configs claim (metadata.supported_devices and metadata.support) with the latest\n"
    "observations in the journals (default: reports/journal.jsonl) and exits 1 with one line per problem\n"
    "and a paste-ready fix when: a cell that recorded `runs` no longer runs (newly broken) or one that did\n"
    "not now runs (newly fixed); any other status or the supported_devices list disagrees; a config changed\n"
    "since its entry or observation was made (stale, by the config hash outside the generated block); a\n"
    "device in --expect-devices had no cell started on it; tokens/s fell by more than the noise allows;\n"
    "reports/") + ReportFileList("", "or") + " is not what the configs' metadata and reports/history\n"
    "render to, or a record of reports/journal.jsonl is missing from reports/history.\n\n"
    "  --expect-devices cpu,cuda  devices the journals must cover (zero coverage fails)\n"
    TM_NOISE_FLAGS_HELP
    "  --reports-dir DIR          reports to compare with the configs (default reports)\n\n"
    "Exit status: 0 when claims and observations agree, 1 on problems, 2 for bad arguments or journals.";
}

const char* kCompareHelp =
    "Prints what changed between two sets of observations, A before B: each a journal file, or a commit\n"
    "of this checkout (HEAD~1, a branch, a tag, a commit id), whose committed journal is read with\n"
    "`git show <commit>:reports/journal.jsonl`. Per (config, column: the device type, its CPU class and the\n"
    "torch version, as in \"cpu (amx, torch 2.11.0)\") the newest record of each side is compared (records\n"
    "of different columns never are), and the cells are listed under: newly broken (ran, does not run now), newly "
    "fixed,\n"
    "status changed (e.g. fails -> timeout), slower and faster (tokens/s moved beyond the noise model\n"
    "`check` uses), appeared and disappeared; then one summary line. Nothing is written.\n\n"
    "  --journal PATH             the journal's path in commits (default reports/journal.jsonl)\n" TM_NOISE_FLAGS_HELP
    "\nExit status: 0 no regression, 1 a regression (a cell newly broken or slower), 2 bad arguments,\n"
    "a file that is not a journal, or a name that is neither a journal file nor a commit.";

const char* kCellHelp =
    "Runs one built-in config (or a config file of yours) on one device as a matrix cell (the same child\n"
    "command and budget as `run`), without touching the configs or reports. For CTest: under\n"
    "`ctest --resource-spec-file`, --device cuda becomes the GPU CTest allotted (CTEST_RESOURCE_GROUP_0_GPUS).\n\n"
    "  --device D               device (required)\n"
    "  --steps N, --timeout S   budget, as for run (with --steps, exactly N steps)\n"
    "  --work-dir DIR           output and journal folder (default runs/cells)\n"
    "  --cpu-class CLASS        ATen's and oneDNN's instruction sets capped to CLASS, as for run\n\n"
    "Exit status: 0 runs, 1 fails or timeout, 77 skipped (device absent, invalid, too_large, too_slow), 2 bad "
    "arguments.";

std::string RunHelp() {
  return std::string(
             "Runs every built-in config (or the config files --configs names) on every device of this machine,\n"
             "each in its own process (`tune run` with device=<d>, a short step budget and a fresh output folder),\n"
             "records each cell in the journal as it\n"
             "finishes, writes the results into each config's generated metadata block and regenerates\n"
             "reports/") +
         ReportFileList("", "and") +
         ". Every record, and those of a journal it moves aside,\n"
         "is kept in reports/history.\n\n" +
         RunFlagsHelp() + "\n" +
         "Each cpu record carries its CPU class and every record its torch version: cells of another class or\n"
         "torch are columns of their own (\"cpu (amx, torch 2.11.0)\"), never replacing or compared with these.\n\n"
         "A cell that fails because of the machine (a full disk, an unwritable folder) is not recorded: that is\n"
         "no verdict on the device, and its earlier record stands.\n\n"
         "Exit status: 0 when every cell was recorded (whatever its result), 1 when a cell failed because of the\n"
         "machine, 2 for bad arguments, 130 when interrupted (the cells recorded so far stay in the journal).";
}

}  // namespace

int RunTuneMatrix(const Registry& registry, const std::vector<std::string>& args, std::ostream& out,
                  std::ostream& err) {
  const Registry* r = &registry;
  std::vector<Subcommand> table = {
      {"run", "run [options]", "Run every built-in config on every available device and record the results",
       RunHelp(), [r](const auto& a, auto& o, auto& e) { return Run(*r, a, o, e); }},
      {"plan", "plan [options]", "Show the cells a run would have, and which would not start and why",
       "Takes the same options as run; starts no training.",
       [r](const auto& a, auto& o, auto& e) { return Plan(*r, a, o, e); }},
      {"merge", "merge JOURNAL... [options]", "Combine journals from several machines into configs and reports",
       MergeHelp(), [r](const auto& a, auto& o, auto& e) { return Merge(*r, a, o, e); }},
      {"check", "check [JOURNAL...] [options]", "Fail when configs' recorded support disagrees with observations",
       CheckHelp(), [r](const auto& a, auto& o, auto& e) { return Check(*r, a, o, e); }},
      {"cell", "cell CONFIG --device D", "Run one matrix cell (used by CTest's matrix tests)", kCellHelp,
       [r](const auto& a, auto& o, auto& e) { return Cell(*r, a, o, e); }},
      {"resource-spec", "resource-spec", "Print the CTest resource spec of this machine's GPUs",
       "For ctest --resource-spec-file: tune-matrix resource-spec > gpus.json",
       [](const auto& a, auto& o, auto& e) { return ResourceSpec(a, o, e); }},
      {"ctest-cells", "ctest-cells --out FILE --work-dir DIR",
       "Write the CTest script of the tiny configs' cells on this LibTorch's device types",
       "The build runs it after linking tune-matrix; CTest includes the script (label `matrix`).",
       [r](const auto& a, auto& o, auto& e) { return CtestCells(*r, a, o, e); }},
      {"report", "report [--reports-dir DIR] [--repo-url URL]",
       "Regenerate " + ReportFileList("", "and") + " from the configs' metadata and history",
       "Runs no cell. The page links each commit to URL/commit/<id>: --repo-url names the repository's web\n"
       "address (https://github.com/OWNER/REPO; '' for plain text); without it, the address of the checkout's\n"
       "`origin` remote, if any.",
       [r](const auto& a, auto& o, auto& e) { return Report(*r, a, o, e); }},
      {"calibration", "calibration [--reports-dir DIR]",
       "Print how far proxies' extrapolations lie from the full runs of the cells calibrated (run --calibrate)",
       "A Markdown table per cell (step time and peak memory: measured, extrapolated, error) and the median and\n"
       "largest error of each, from each cell's newest calibration in the history (default reports/history),\n"
       "its proxies extrapolated by today's rule; then the cells that run in full without a calibration.",
       [r](const auto& a, auto& o, auto& e) { return Calibration(*r, a, o, e); }},
      {"numeric", "numeric [--journal PATH]",
       "Print how far the cells' first steps lay from their float32 references, per dtype",
       "From the newest record of each cell in the journal (default reports/journal.jsonl): per dtype the cells\n"
       "checked, the median and largest relative delta of the first loss and gradient norm, the tolerances, and\n"
       "the cells recorded `wrong`; then the cell of each largest delta.",
       [](const auto& a, auto& o, auto& e) { return Numeric(a, o, e); }},
      {"compare", "compare A B [options]", "Print what changed between two journals or commits", kCompareHelp,
       [](const auto& a, auto& o, auto& e) { return Compare(a, o, e); }},
  };
  std::vector<std::string> rest = args;
  if (!LoadDevicePluginsForCommandLine("tune-matrix", &rest, err)) return kExitUsage;
  return DispatchSubcommand("tune-matrix", "device support of every config, established by running it\n" +
                            DevicePluginHelp(), table, rest, out, err);
}

}  // namespace tmx::matrix
