#include "matrix/matrix_cli.h"

#include <unistd.h>

#include <climits>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/cli.h"
#include "harness/file_util.h"
#include "harness/text.h"
#include "matrix/journal.h"
#include "matrix/plan.h"
#include "matrix/publish.h"
#include "matrix/runner.h"
#include "matrix/scheduler.h"
#include "matrix/subprocess.h"

namespace tmx::matrix {
namespace {

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string exe = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  return exe.substr(0, exe.rfind('/'));
}

std::string ReadGitCommit() {
  std::string dir = ".git";
  StatusOr<std::string> head = ReadFile(dir + "/HEAD");
  if (!head.ok()) return "";
  std::string h = *head;
  while (!h.empty() && (h.back() == '\n' || h.back() == ' ')) h.pop_back();
  if (h.rfind("ref: ", 0) != 0) return h;
  std::string ref = h.substr(5);
  StatusOr<std::string> direct = ReadFile(dir + "/" + ref);
  if (direct.ok()) return direct->substr(0, 40);
  StatusOr<std::string> packed = ReadFile(dir + "/packed-refs");
  if (packed.ok()) {
    std::istringstream in(*packed);
    std::string line;
    while (std::getline(in, line)) {
      if (line.size() > 41 && line.substr(41) == ref) return line.substr(0, 40);
    }
  }
  return "";
}

std::string Hostname() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Asks `tune devices --json` in a child process, so a device probe that crashes cannot take the harness down.
StatusOr<std::vector<DeviceInfo>> DiscoverDevices(const std::string& tune) {
  SubprocessSet set;
  SubprocessOptions o;
  o.argv = {tune, "devices", "--json"};
  o.timeout_s = 300;
  o.tail_bytes = 1 << 20;
  StatusOr<Subprocess*> child = set.Add(o);
  if (!child.ok()) return child.status();
  while (set.running() > 0) {
    if (set.DoWork(1000)) return Status::Internal("interrupted while probing devices");
  }
  std::unique_ptr<Subprocess> done = set.NextFinished();
  const SubprocessResult& r = done->result();
  if (!r.Succeeded()) {
    return Status::Internal("probing devices with `" + tune + " devices --json` failed: " + r.Describe());
  }
  std::string out = r.output_tail;
  nlohmann::json j = nlohmann::json::parse(out.substr(out.find('[')), nullptr, false);
  if (!j.is_array()) return Status::Internal("`tune devices --json` printed no device list");
  std::vector<DeviceInfo> devices;
  for (const auto& d : j) {
    StatusOr<DeviceInfo> info = DeviceInfoFromJson(d);
    if (!info.ok()) return info.status().WithContext("`tune devices --json`");
    devices.push_back(*info);
  }
  return devices;
}

const std::vector<std::string> kSwitches = {"resume", "no-write-back"};
const std::vector<std::string> kValueFlags = {"devices", "configs", "recipes", "steps", "timeout",
                                              "journal", "job",     "work-dir", "tune", "memory-fraction"};

int UsageError(std::ostream& err, const std::string& cmd, const std::string& message) {
  err << "error: tune-matrix " << cmd << ": " << message << "\nRun 'tune-matrix help " << cmd << "' for usage.\n";
  return kExitUsage;
}

bool ParseOptions(const std::string& cmd, const std::vector<std::string>& args, MatrixOptions* options,
                  bool* write_back, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, kSwitches, kValueFlags, &parsed, &error)) {
    UsageError(err, cmd, error);
    return false;
  }
  if (!parsed.positional.empty()) {
    UsageError(err, cmd, "unexpected argument '" + parsed.positional[0] + "'");
    return false;
  }
  options->devices = SplitList(parsed.Get("devices"));
  options->configs_glob = parsed.Get("configs");
  options->recipes = SplitList(parsed.Get("recipes"));
  options->resume = parsed.Has("resume");
  options->job = parsed.Get("job");
  *write_back = !parsed.Has("no-write-back");
  if (parsed.Has("journal")) options->journal_path = parsed.Get("journal");
  if (parsed.Has("work-dir")) options->work_dir = parsed.Get("work-dir");
  options->tune_path = parsed.Get("tune", SelfDir() + "/tune");
  try {
    if (parsed.Has("steps")) options->max_steps = std::stoi(parsed.Get("steps"));
    if (parsed.Has("timeout")) options->cell_timeout_s = std::stod(parsed.Get("timeout"));
    if (parsed.Has("memory-fraction")) options->memory_fraction = std::stod(parsed.Get("memory-fraction"));
  } catch (const std::exception&) {
    UsageError(err, cmd, "--steps, --timeout and --memory-fraction take numbers");
    return false;
  }
  if (options->max_steps < 2) {
    UsageError(err, cmd, "--steps must be at least 2 (one warm-up step is excluded from timings)");
    return false;
  }
  if (options->memory_fraction <= 0 || options->memory_fraction > 1) {
    UsageError(err, cmd, "--memory-fraction must be in (0, 1]");
    return false;
  }
  return true;
}

int Fail(std::ostream& err, const Status& s) {
  err << s.ToString() << "\n";
  return s.ExitCode();
}

int Plan(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  MatrixOptions options;
  bool write_back = true;
  if (!ParseOptions("plan", args, &options, &write_back, err)) return kExitUsage;
  StatusOr<std::vector<DeviceInfo>> devices = DiscoverDevices(options.tune_path);
  if (!devices.ok()) return Fail(err, devices.status());
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(registry, *devices, options);
  if (!cells.ok()) return Fail(err, cells.status());
  for (const PlannedCell& c : *cells) {
    std::string what = c.runnable ? "run" : CellStatusName(c.preset.status);
    out << what << std::string(what.size() < 11 ? 11 - what.size() : 1, ' ') << c.key.device << "  " << c.key.config << "  predicted " << FormatBytes(c.predicted_memory_bytes);
    if (!c.runnable) out << "  (" << c.preset.reason << ")";
    out << "\n";
  }
  return kExitOk;
}

int Run(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  MatrixOptions options;
  bool write_back = true;
  if (!ParseOptions("run", args, &options, &write_back, err)) return kExitUsage;
  size_t slash = options.journal_path.rfind('/');
  std::string journal_dir = slash == std::string::npos ? "." : options.journal_path.substr(0, slash);
  for (const std::string& dir : {options.work_dir, options.reports_dir, journal_dir}) {
    Status made = MakeDirs(dir);
    if (!made.ok()) return Fail(err, made);
  }
  Status handlers = SubprocessSet::InstallInterruptHandlers();
  if (!handlers.ok()) return Fail(err, handlers);
  StatusOr<std::vector<DeviceInfo>> devices = DiscoverDevices(options.tune_path);
  if (!devices.ok()) return Fail(err, devices.status());
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(registry, *devices, options);
  if (!cells.ok()) return Fail(err, cells.status());

  std::vector<CellKey> done;
  if (options.resume) {
    std::vector<std::string> warnings;
    StatusOr<std::vector<CellResult>> previous = ReadJournal(options.journal_path, &warnings);
    if (!previous.ok() && previous.status().code() != Status::Code::kNotFound) return Fail(err, previous.status());
    for (const std::string& w : warnings) err << "warning: " << w << "\n";
    if (previous.ok()) {
      for (const auto& [key, cell] : LatestByCell(*previous)) done.push_back(key);
    }
  } else if (::access(options.journal_path.c_str(), F_OK) == 0) {
    std::string previous = options.journal_path + ".prev";
    if (::rename(options.journal_path.c_str(), previous.c_str()) != 0) {
      return Fail(err, Status::IoError(options.journal_path + ": cannot move the previous journal aside"));
    }
    out << "Previous journal kept as " << previous << "\n";
  }
  size_t runnable = 0;
  for (const PlannedCell& c : *cells) runnable += c.runnable;
  out << "tune-matrix: " << cells->size() << " cells (" << runnable << " to run, "
      << cells->size() - runnable << " recorded without running) on " << devices->size() << " device(s); "
      << done.size() << " already in the journal\n";

  Provenance provenance;
  provenance.host = Hostname();
  provenance.job = options.job;
  provenance.commit = ReadGitCommit();
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(static_cast<int>(devices->size()));
  StatusOr<MatrixRun> run = RunCells(*cells, done, *runner, options, provenance, out);
  if (!run.ok()) return Fail(err, run.status());
  if (run->interrupted) {
    err << "tune-matrix: interrupted; " << run->recorded.size() << " cells recorded in " << options.journal_path
        << ". Run again with --resume to finish the rest.\n";
    return kExitInterrupted;
  }
  std::vector<std::string> warnings;
  StatusOr<std::vector<CellResult>> all = ReadJournal(options.journal_path, &warnings);
  if (!all.ok()) return Fail(err, all.status());
  if (write_back) {
    Status s = WriteBackResults(registry, *all, out);
    if (!s.ok()) return Fail(err, s);
    s = WriteReports(registry, options.reports_dir);
    if (!s.ok()) return Fail(err, s);
    out << "Wrote " << options.reports_dir << "/SUPPORT.md and " << options.reports_dir << "/support.json\n";
  }
  return kExitOk;
}

int Report(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {}, {"reports-dir"}, &parsed, &error) || !parsed.positional.empty()) {
    return UsageError(err, "report", error.empty() ? "takes no positional arguments" : error);
  }
  std::string dir = parsed.Get("reports-dir", "reports");
  Status s = WriteReports(registry, dir);
  if (!s.ok()) return Fail(err, s);
  out << "Wrote " << dir << "/SUPPORT.md and " << dir << "/support.json\n";
  return kExitOk;
}

const char* kRunHelp =
    "Runs every built-in config on every device of this machine, each in its own process (`tune run` with\n"
    "device=<d>, a short step budget and a fresh output folder), records each cell in the journal as it\n"
    "finishes, writes the results into each config's generated metadata block and regenerates\n"
    "reports/SUPPORT.md and reports/support.json.\n\n"
    "  --devices cpu,cuda:0     devices to cover (default: all)\n"
    "  --configs 'tiny/*'       config name pattern (default: all)\n"
    "  --recipes a,b            recipes to cover (default: all)\n"
    "  --steps N                optimizer steps per cell, the first excluded from timings (default 3)\n"
    "  --timeout S              wall-clock limit per cell in seconds (default 900)\n"
    "  --memory-fraction F      share of device memory a cell may use (default 0.85)\n"
    "  --journal PATH           journal file (default reports/journal.jsonl)\n"
    "  --resume                 run only the cells missing from the journal\n"
    "  --job NAME               CI job name recorded with each cell\n"
    "  --no-write-back          record in the journal only\n"
    "  --work-dir DIR           per-cell output folders (default runs/matrix)\n"
    "  --tune PATH              the tune executable (default: beside tune-matrix)\n\n"
    "Exit status: 0 when every cell was recorded (whatever its result), 2 for bad arguments, 130 when\n"
    "interrupted (the cells recorded so far stay in the journal).";

}  // namespace

int RunTuneMatrix(const Registry& registry, const std::vector<std::string>& args, std::ostream& out,
                  std::ostream& err) {
  const Registry* r = &registry;
  std::vector<Subcommand> table = {
      {"run", "run [options]", "Run every built-in config on every available device and record the results",
       kRunHelp, [r](const auto& a, auto& o, auto& e) { return Run(*r, a, o, e); }},
      {"plan", "plan [options]", "Show the cells a run would have, and which would not start and why",
       "Takes the same options as run; starts no training.",
       [r](const auto& a, auto& o, auto& e) { return Plan(*r, a, o, e); }},
      {"report", "report [--reports-dir DIR]", "Regenerate SUPPORT.md and support.json from the configs' metadata",
       "", [r](const auto& a, auto& o, auto& e) { return Report(*r, a, o, e); }},
  };
  return DispatchSubcommand("tune-matrix", "device support of every config, established by running it", table, args,
                            out, err);
}

}  // namespace tmx::matrix
