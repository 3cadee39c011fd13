#include "matrix/run_flags.h"

#include <sstream>

#include "base/file_util.h"
#include "base/text.h"
#include "matrix/machine.h"
#include "matrix/publish.h"
#include "matrix/shard.h"
#include "matrix/user_configs.h"

namespace tmx::matrix {
namespace {

// The column the help text starts at, after "  --name VALUE".
constexpr size_t kHelpColumn = 27;

// A default as the help shows it: 900, 0.85.
std::string Shown(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// `text` with every `from` replaced by `to`.
std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

using Setter = std::function<bool(const std::string&, MatrixOptions*, std::string*)>;

// A switch that sets `field` to `to`.
Setter Switch(bool MatrixOptions::*field, bool to) {
  return [field, to](const std::string&, MatrixOptions* o, std::string*) {
    o->*field = to;
    return true;
  };
}

// A flag whose text is the field's value.
Setter Text(std::string MatrixOptions::*field) {
  return [field](const std::string& v, MatrixOptions* o, std::string*) {
    o->*field = v;
    return true;
  };
}

// A number that must satisfy `valid`, else `*error` is `problem`.
template <typename T>
Setter Number(const std::string& name, T MatrixOptions::*field, std::function<bool(T)> valid, std::string problem) {
  return [name, field, valid, problem](const std::string& v, MatrixOptions* o, std::string* error) {
    if (!ParseNumber(name, v, &(o->*field), error)) return false;
    if (valid(o->*field)) return true;
    *error = problem;
    return false;
  };
}

template <typename T>
std::function<std::string(const MatrixOptions&)> DefaultOf(T MatrixOptions::*field) {
  return [field](const MatrixOptions& o) {
    if constexpr (std::is_arithmetic<T>::value) {
      return Shown(static_cast<double>(o.*field));
    } else {
      return o.*field;
    }
  };
}

// What runs: the devices, configs and recipes.
std::vector<RunFlag> SelectionFlags() {
  const std::string users = kUserResultsDir;
  return {
      {"devices", "cpu,cuda:0", "devices to cover (default: all)", nullptr,
       [](const std::string& v, MatrixOptions* o, std::string*) {
         o->devices = SplitList(v);
         return true;
       }},
      {"configs", "'tiny/*'",
       "built-in config name patterns, comma-separated (default: all); or your own\n"
       "config files and folders (a.yaml,my_configs/): their records go to\n" +
           users +
           "/ (journal.jsonl, the reports, runs/) unless --journal,\n"
           "--reports-dir and --work-dir say otherwise, never into the built-in\n"
           "configs or their reports. A file's recipe is the one its comment names\n"
           "(`# tune run <recipe> --config ...`), else the one --recipes names",
       nullptr, nullptr},
      {"recipes", "a,b", "recipes to cover (default: all)", nullptr,
       [](const std::string& v, MatrixOptions* o, std::string*) {
         o->recipes = SplitList(v);
         return true;
       }},
  };
}

// How long each cell trains and may take, and the memory and cores it may use.
std::vector<RunFlag> BudgetFlags() {
  return {
      {"steps", "N", "optimizer steps per cell, the first excluded from timings (default {default})",
       DefaultOf(&MatrixOptions::max_steps),
       Number<int>("steps", &MatrixOptions::max_steps, [](int v) { return v >= 2; },
                   "--steps must be at least 2 (one warm-up step is excluded from timings)")},
      {"startup-share", "F",
       "a cell whose recorded start-up (process, model, data) would be more than F\n"
       "of its wall time trains more steps, the fewest that bring it to 2/3 F, at\n"
       "most 12 and within --budget (default {default}; 0: every cell trains --steps)",
       DefaultOf(&MatrixOptions::startup_share),
       Number<double>("startup-share", &MatrixOptions::startup_share, [](double v) { return v >= 0 && v < 1; },
                      "--startup-share must be 0 (every cell trains --steps) or a share below 1, e.g. 0.15")},
      {"quiet-wait", "S",
       "seconds a cell measured beside other work waits at most for the machine\n"
       "to be quiet before it is measured again, once (default {default}; 0: at once)",
       DefaultOf(&MatrixOptions::quiet_wait_s),
       Number<double>("quiet-wait", &MatrixOptions::quiet_wait_s, [](double v) { return v >= 0; },
                      "--quiet-wait must be 0 (measure again at once) or a number of seconds")},
      {"timeout", "S", "wall-clock limit per cell in seconds (default {default})",
       DefaultOf(&MatrixOptions::cell_timeout_s),
       Number<double>("timeout", &MatrixOptions::cell_timeout_s, [](double v) { return v > 0; },
                      "--timeout must be above 0 seconds")},
      {"budget", "S",
       "seconds a cell may be predicted to take; longer ones are recorded as\n"
       "too_slow, not started (default {default}; 0: no budget)",
       DefaultOf(&MatrixOptions::cell_budget_s),
       Number<double>("budget", &MatrixOptions::cell_budget_s, [](double v) { return v >= 0; },
                      "--budget must be 0 (no budget) or a number of seconds")},
      {"time-limit", "S",
       "seconds the run's cells may take in all (a rolling refresh): the cells\n"
       "with the oldest records (none first) run in that order as far as their\n"
       "predicted times fit, the rest keep their records for a later run, which\n"
       "starts where this one stopped; a hard bound: a cell still running at it\n"
       "is stopped and left for a later run, not recorded (default {default}: every\n"
       "cell; scripts/run-matrix.sh passes 3300)",
       DefaultOf(&MatrixOptions::time_limit_s),
       Number<double>("time-limit", &MatrixOptions::time_limit_s, [](double v) { return v >= 0; },
                      "--time-limit must be 0 (no limit) or a number of seconds, e.g. 3600")},
      {"memory-fraction", "F",
       "share of device memory a cell may use (default {default}); on cpu the cells of\n"
       "all lanes share it",
       DefaultOf(&MatrixOptions::memory_fraction),
       Number<double>("memory-fraction", &MatrixOptions::memory_fraction, [](double v) { return v > 0 && v <= 1; },
                      "--memory-fraction must be in (0, 1]")},
      {"lanes", "N",
       "cpu lanes: host cells run N at a time, each pinned to its share of the\n"
       "cores (threads, tokens/s and disturbance are its lane's), longest first,\n"
       "while their predicted peaks fit the memory together (default: one per 4\n"
       "cores left after 2 per accelerator, at least 1: one on 2 cores)",
       nullptr,
       Number<int>("lanes", &MatrixOptions::cpu_lanes, [](int v) { return v >= 1; }, "--lanes must be at least 1")},
  };
}

// What runs beside or instead of a cell's own run.
std::vector<RunFlag> CheckFlags() {
  return {
      {"no-proxies", "",
       "record too_large and too_slow cells from the prediction alone; by default\n"
       "each runs proxies of its config with the models cut to 1 and 4 layers\n"
       "(when they fit), records whether every operation ran, and extrapolates\n"
       "step time, tokens/s and peak memory to the real depth",
       nullptr, Switch(&MatrixOptions::proxies, false)},
      {"calibrate", "",
       "also run the proxies of cells that run in full, so each records the\n"
       "extrapolation beside the measurement (`tune-matrix calibration`)",
       nullptr, Switch(&MatrixOptions::calibrate, true)},
      {"no-repairs", "",
       "record invalid cells from validation alone; by default a config whose\n"
       "every device problem names its override (a paged optimizer on cpu ->\n"
       "AdamW) runs with those overrides, recorded as invalid as written with\n"
       "the repair and what it got",
       nullptr, Switch(&MatrixOptions::repairs, false)},
      {"no-numeric-check", "",
       "no float32 reference runs; by default each cell that trains is followed by\n"
       "one step of its config (or shallowest proxy) in float32 on cpu, and a cell\n"
       "whose first loss or gradient norm lies outside its dtype's tolerance of the\n"
       "reference's is recorded `wrong`",
       nullptr, Switch(&MatrixOptions::numeric_check, false)},
  };
}

// Where the records go, and the column they are of.
std::vector<RunFlag> RecordFlags() {
  return {
      {"journal", "PATH", "journal file (default {default})", DefaultOf(&MatrixOptions::journal_path),
       Text(&MatrixOptions::journal_path)},
      {"resume", "", "run only the cells missing from the journal", nullptr, Switch(&MatrixOptions::resume, true)},
      {"accept-disturbed", "",
       "publish the speed of a cell measured beside other work (after waiting\n"
       "and measuring it again), marked as such, where its config has no speed\n"
       "measured undisturbed; it is never compared",
       nullptr, Switch(&MatrixOptions::accept_disturbed, true)},
      {"fresh", "",
       "set the journal aside (as <journal>.prev) and start an empty one; without\n"
       "it the journal keeps every cell's record until a newer one replaces it",
       nullptr, Switch(&MatrixOptions::fresh, true)},
      {"job", "NAME", "CI job name recorded with each cell", nullptr, Text(&MatrixOptions::job)},
      {"shard", "i/n", "run only shard i of n (deterministic, balanced by recorded durations)", nullptr,
       [](const std::string& v, MatrixOptions* o, std::string* error) {
         StatusOr<ShardSpec> shard = ParseShard(v);
         if (!shard.ok()) {
           *error = shard.status().message();
           return false;
         }
         o->shard_index = shard->index;
         o->shard_count = shard->count;
         return true;
       }},
      {"junit", "FILE", "also write the cells as JUnit XML (one test case per cell)", nullptr,
       Text(&MatrixOptions::junit_path)},
      {"no-write-back", "", "record in the journal only", nullptr, nullptr},
      {"verbose", "",
       "list each config file written and each entry kept; by default the run\n"
       "ends with one tally (cells new, updated, unchanged, kept; per status;\n"
       "measured beside other work; config files updated)",
       nullptr, Switch(&MatrixOptions::verbose, true)},
      {"work-dir", "DIR", "per-cell output folders (default {default})", DefaultOf(&MatrixOptions::work_dir),
       Text(&MatrixOptions::work_dir)},
      {"reports-dir", "DIR", "folder of " + ReportFileList("", "") + ", history (default {default})",
       DefaultOf(&MatrixOptions::reports_dir), Text(&MatrixOptions::reports_dir)},
      {"tune", "PATH", "the tune executable (default: beside tune-matrix)", nullptr, Text(&MatrixOptions::tune_path)},
      {"cpu-class", "CLASS",
       "run the cells with ATen's and oneDNN's instruction sets capped to CLASS\n"
       "(default, avx2, avx512, avx512_bf16 or amx; ATEN_CPU_CAPABILITY and\n"
       "ONEDNN_MAX_CPU_ISA in each child's environment), so a lower class is\n"
       "measured on a higher machine; refused above this machine's class. Default:\n"
       "this machine's class, as those variables in the environment leave it",
       nullptr, nullptr},
  };
}

// The user's config files (`files`) resolved: their records go to a journal and reports of the user's, never
// the checkout's.
Status TakeUserConfigs(const Registry& registry, const std::vector<std::string>& files, const ParsedArgs& parsed,
                       MatrixOptions* options, std::vector<std::string>* warnings) {
  StatusOr<std::vector<UserConfig>> user = ResolveUserConfigs(registry, files, options->recipes, warnings);
  if (!user.ok()) return Status::InvalidArgument(user.status().message());
  options->user_configs = std::move(user).value();
  const std::string results = kUserResultsDir;
  if (!parsed.Has("journal")) options->journal_path = results + "/journal.jsonl";
  if (!parsed.Has("work-dir")) options->work_dir = results + "/runs";
  if (!parsed.Has("reports-dir")) options->reports_dir = results;
  Status apart = CheckUserDestinations(options->journal_path, options->reports_dir);
  return apart.ok() ? apart : Status::InvalidArgument(apart.message());
}

}  // namespace

const std::vector<RunFlag>& RunFlags() {
  static const std::vector<RunFlag> flags = [] {
    std::vector<RunFlag> all;
    for (std::vector<RunFlag> (*group)() : {SelectionFlags, BudgetFlags, CheckFlags, RecordFlags}) {
      std::vector<RunFlag> rows = group();
      all.insert(all.end(), rows.begin(), rows.end());
    }
    return all;
  }();
  return flags;
}

std::string RunFlagsHelp() {
  const MatrixOptions defaults;
  std::string help;
  for (const RunFlag& f : RunFlags()) {
    std::string head = "  --" + f.name + (f.value.empty() ? "" : " " + f.value);
    head.resize(std::max(head.size() + 1, kHelpColumn), ' ');
    std::string text = f.help;
    if (f.default_text) text = ReplaceAll(text, "{default}", f.default_text(defaults));
    help += head + ReplaceAll(text, "\n", "\n" + std::string(kHelpColumn, ' ')) + "\n";
  }
  return help;
}

Status ParseRunFlags(const Registry& registry, const std::vector<std::string>& args, MatrixOptions* options,
                     bool* write_back, std::vector<std::string>* warnings) {
  std::vector<std::string> switches, valued;
  for (const RunFlag& f : RunFlags()) (f.value.empty() ? switches : valued).push_back(f.name);
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, switches, valued, &parsed, &error)) return Status::InvalidArgument(error);
  if (!parsed.positional.empty()) {
    return Status::InvalidArgument("unexpected argument '" + parsed.positional[0] + "'");
  }
  options->tune_path = ExecutableDir() + "/tune";
  options->cpu_lanes = 0;  // unless --lanes: `run` chooses from the machine (DefaultCpuLanes)
  for (const RunFlag& f : RunFlags()) {
    if (f.set && parsed.Has(f.name) && !f.set(parsed.Get(f.name), options, &error)) {
      return Status::InvalidArgument(error);
    }
  }
  if (options->resume && options->fresh) {
    return Status::InvalidArgument("--resume keeps the journal and --fresh sets it aside: give one");
  }
  *write_back = !parsed.Has("no-write-back");
  std::vector<std::string> files;  // --configs items that name files and folders; the rest are patterns
  for (const std::string& item : SplitConfigsList(parsed.Get("configs"))) {
    (IsConfigPath(item) ? files : options->config_globs).push_back(item);
  }
  if (!files.empty()) TM_RETURN_IF_ERROR(TakeUserConfigs(registry, files, parsed, options, warnings));
  // The column the cells record into: this torch, and the CPU class asked for or this machine's.
  Status column = ChooseRunColumn(parsed.Get("cpu-class"), options);
  return column.ok() ? column : Status::InvalidArgument(column.message());
}

}  // namespace tmx::matrix
