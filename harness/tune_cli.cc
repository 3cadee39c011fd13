#include "harness/tune_cli.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/cpu_class.h"
#include "base/cpu_usage.h"
#include "base/file_util.h"
#include "base/input_file.h"
#include "base/json_io.h"
#include "base/text.h"
#include "harness/column.h"
#include "harness/config_block.h"
#include "harness/config_store.h"
#include "harness/device_hooks.h"
#include "harness/device_plugin.h"
#include "harness/hub_download.h"
#include "harness/launcher.h"
#include "harness/matmul_peak.h"
#include "harness/memory_bandwidth.h"
#include "harness/recorded_support.h"
#include "harness/run_summary.h"
#include "harness/torchtune_recipes.h"

namespace tmx {
namespace {

int Fail(std::ostream& err, const Status& s) {
  err << s.ToString() << "\n";
  return s.ExitCode();
}

int UsageError(std::ostream& err, const std::string& command, const std::string& message) {
  err << "error: tune " << command << ": " << message << "\nRun 'tune help " << command << "' for usage.\n";
  return kExitUsage;
}

// 1235814400 -> "1,235,814,400".
std::string WithThousands(int64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The model component a built-in config names, and its parameter count (0 when unknown).
std::pair<std::string, int64_t> ModelOf(const Registry& registry, const std::string& config_name) {
  StatusOr<Config> config = Config::LoadFile(BuiltinConfigPath(config_name));
  if (!config.ok()) return {"(unreadable)", 0};
  YAML::Node node = config->Find("model._component_");
  if (!node.IsScalar()) return {"(none)", 0};
  const ComponentSpec* c = registry.FindComponent(node.Scalar());
  return {node.Scalar(), c == nullptr ? 0 : c->parameter_count};
}

// `tune ls --components [KIND]`: every component a config can name (of KIND), with torchtune's names for
// it; recognised components this build cannot build are listed with the reason.
int LsComponents(const Registry& registry, const ParsedArgs& parsed, std::ostream& out, std::ostream& err) {
  const std::string kind = parsed.positional.empty() ? "" : parsed.positional[0];
  std::vector<std::string> kinds;
  for (const ComponentSpec& c : registry.components()) {
    if (std::find(kinds.begin(), kinds.end(), c.kind) == kinds.end()) kinds.push_back(c.kind);
  }
  if (!kind.empty() && std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
    std::string hint = ClosestMatch(kind, kinds);
    return UsageError(err, "ls", "no component kind '" + kind + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?") +
                                     " (kinds: " + JoinStrings(kinds, ", ") + ")");
  }
  if (parsed.Has("json")) {
    nlohmann::json j = nlohmann::json::array();
    for (const ComponentSpec& c : registry.components()) {
      if (!kind.empty() && c.kind != kind) continue;
      j.push_back({{"component", c.name}, {"kind", c.kind}, {"aliases", c.aliases}, {"unsupported", c.unsupported_reason}});
    }
    out << DumpJson(j, 2) << "\n";
    return kExitOk;
  }
  for (const ComponentSpec& c : registry.components()) {
    if (!kind.empty() && c.kind != kind) continue;
    out << c.kind << "  " << c.name;
    if (!c.aliases.empty()) out << "  (" << JoinStrings(c.aliases, ", ") << ")";
    if (!c.unsupported_reason.empty()) out << "  not supported: " << c.unsupported_reason;
    out << "\n";
  }
  return kExitOk;
}

int Ls(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {"json", "verbose", "components"}, {}, &parsed, &error) ||
      parsed.positional.size() > (parsed.Has("components") ? 1u : 0u)) {
    return UsageError(err, "ls", error.empty() ? "takes no positional arguments (but --components KIND)" : error);
  }
  if (parsed.Has("components")) return LsComponents(registry, parsed, out, err);
  bool verbose = parsed.Has("verbose");
  if (parsed.Has("json")) {
    nlohmann::json j = nlohmann::json::array();
    for (const RecipeSpec& r : registry.recipes()) {
      nlohmann::json configs = nlohmann::json::array();
      for (const std::string& c : r.configs) {
        if (!verbose) {
          configs.push_back(c);
          continue;
        }
        auto [model, params] = ModelOf(registry, c);
        configs.push_back({{"config", c}, {"model", model}, {"parameters", params}});
      }
      nlohmann::json fields = nlohmann::json::array();  // its top-level keys
      for (const FieldSpec& f : r.fields) fields.push_back(f.name);
      j.push_back({{"recipe", r.name},
                   {"distributed", r.launches_ranks()},
                   {"task", RecipeTaskName(r.task)},
                   {"trains", r.trains},
                   {"data", r.data},
                   {"objective", r.objective},
                   {"fields", fields},
                   {"configs", configs}});
    }
    out << DumpJson(j, 2) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"RECIPE", "CONFIG"}};
  if (verbose) rows[0].insert(rows[0].end(), {"MODEL", "PARAMETERS"});
  for (const RecipeSpec& r : registry.recipes()) {
    for (size_t i = 0; i < std::max<size_t>(1, r.configs.size()); ++i) {
      std::vector<std::string> row = {i == 0 ? r.name : "", i < r.configs.size() ? r.configs[i] : ""};
      if (verbose && i < r.configs.size()) {
        auto [model, params] = ModelOf(registry, r.configs[i]);
        row.push_back(model);
        row.push_back(params > 0 ? WithThousands(params) : "?");
      }
      rows.push_back(row);
    }
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      bool number = verbose && c == 3 && !row[c].empty() && std::isdigit(static_cast<unsigned char>(row[c][0]));
      std::string pad(width[c] - row[c].size(), ' ');
      line += (number ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : "")) + (c + 1 < row.size() ? "   " : "");
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
  return kExitOk;
}

int Cp(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {"force", "make-parents"}, {}, &parsed, &error)) return UsageError(err, "cp", error);
  if (parsed.positional.size() != 2) return UsageError(err, "cp", "expected <config> <destination>");
  StatusOr<LocatedConfig> located = LocateConfig(parsed.positional[0], registry);
  if (!located.ok()) return Fail(err, located.status());
  std::string dest = parsed.positional[1];
  if (IsDirectory(dest)) {
    std::string base = located->path.substr(located->path.rfind('/') + 1);
    dest += (dest.back() == '/' ? "" : "/") + base;
  }
  std::string parent = ParentDir(dest);
  if (!IsDirectory(parent)) {
    if (!parsed.Has("make-parents")) {
      return Fail(err, Status::NotFound(dest + ": folder " + parent + " does not exist; pass --make-parents to create it"));
    }
    Status made = MakeDirs(parent);
    if (!made.ok()) return Fail(err, made);
  }
  if (PathExists(dest) && !parsed.Has("force")) {
    return Fail(err, Status::AlreadyExists(dest + ": already exists; pass --force to overwrite it"));
  }
  StatusOr<std::string> text = ReadFile(located->path, ConfigInput());
  if (!text.ok()) return Fail(err, text.status());
  Status s = WriteFileAtomically(dest, *text);
  if (!s.ok()) return Fail(err, s);
  out << "Copied " << located->path << " to " << dest << "\n";
  return kExitOk;
}

int Cat(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) return UsageError(err, "cat", "expected <config> [key=value ...]");
  StatusOr<LocatedConfig> located = LocateConfig(args[0], registry);
  if (!located.ok()) return Fail(err, located.status());
  StatusOr<Config> config = LoadResolvedConfig(*located, std::vector<std::string>(args.begin() + 1, args.end()));
  if (!config.ok()) return Fail(err, config.status());
  out << config->ToYaml();
  return kExitOk;
}

void PrintProblems(const std::vector<Problem>& problems, std::ostream& err) {
  for (const Problem& p : problems) err << "  " << p.ToString() << "\n";
}

// A config invalid on its device whose every problem has a repair (harness/registry.h RepairOf), with the
// repair applied after the overrides, and the check of the repaired config. No value when a problem has none.
struct Repaired {
  std::vector<std::string> repair;
  Config config;
  DeviceCheckResult check;
};
std::optional<Repaired> Repair(const LocatedConfig& located, const std::vector<std::string>& overrides,
                               const RecipeSpec& recipe, const Registry& registry,
                               const std::vector<Problem>& problems) {
  Repaired r;
  r.repair = RepairOf(problems);
  if (r.repair.empty()) return std::nullopt;
  std::vector<std::string> repaired = overrides;
  repaired.insert(repaired.end(), r.repair.begin(), r.repair.end());
  StatusOr<Config> config = LoadResolvedConfig(located, repaired, &recipe, &registry);
  if (!config.ok()) return std::nullopt;
  r.config = std::move(config).value();
  r.check = ValidateForDevice(r.config, recipe, registry, ProbeDevice);
  return r;
}

// The matrix column a run on `device` here is in (harness/column.h): its type, this machine's CPU class as ATen and
// oneDNN will use it (a class the environment makes unknown is said once, and left unknown), this LibTorch.
Column RunningColumn(const DeviceInfo& device, std::ostream& err) {
  Column column{device.type, "", TorchVersion()};
  if (device.type != "cpu") return column;
  StatusOr<std::string> cpu_class = DetectCpuClass();
  if (cpu_class.ok()) {
    column.cpu_class = *cpu_class;
  } else {
    err << "warning: " << cpu_class.status().message() << "\n";
  }
  return column;
}

// What tune-matrix recorded of the config in the column a run on `device` here is in.
RecordedSupport RecordedHere(const Config& config, const DeviceInfo& device, std::ostream& err) {
  return FindRecordedSupport(config.Find("metadata.support"), ColumnKey(RunningColumn(device, err)));
}

// Whether and where tune-matrix ran the config with `repair` in `device`'s column here: "tune-matrix ran it with
// this repair on cpu (amx, torch 2.11.0) (Intel Xeon): runs · 812.5 tok/s · 3.1 GiB peak (2026-12-05T09:00:00Z, vm,
// 0123456789ab)", or that it has not.
std::string RepairRecord(const Config& config, const std::vector<std::string>& repair, const DeviceInfo& device) {
  std::ostringstream quiet;  // a class the environment hides is said by the caller's own lookup
  const std::string column = ColumnKey(RunningColumn(device, quiet));
  RecordedSupport entry = FindRecordedSupport(config.Find("metadata.support"), column);
  RecordedSupport repaired = RecordedRepair(entry, repair);
  if (!repaired.recorded()) {
    return "tune-matrix has not run it with this repair on " + column + " yet" +
           (entry.repair.empty() ? "" : " (its record there is of " + entry.repair + ")");
  }
  return "tune-matrix ran it with this repair on " + column +
         (repaired.device_name.empty() ? "" : " (" + repaired.device_name + ")") + ": " +
         DescribeRecordedSupport(repaired);
}

// The torch axis of the config's records, before it runs here (TorchAxisWarning): a line, or nothing.
void WarnOfTheTorchAxis(const Config& config, const std::string& name, const DeviceInfo& device, std::ostream& err) {
  std::ostringstream quiet;
  const std::string warning = TorchAxisWarning(config.Find("metadata.support"), RunningColumn(device, quiet), name);
  if (!warning.empty()) err << "warning: " << warning << "\n";
}

// For a config that `check` found invalid: when every problem has a repair and the repaired config is valid,
// the overrides, what tune-matrix recorded of them, and the flag that applies them.
void ShowRepair(const std::optional<Repaired>& repaired, const Config& config, const std::string& command,
                std::ostream& err) {
  if (!repaired || !repaired->check.problems.empty()) return;
  const DeviceInfo& device = repaired->check.device;
  err << "repair: with " << JoinStrings(repaired->repair, " ") << " it is valid on " << device.id << "\n  "
      << RepairRecord(config, repaired->repair, device) << "\n  pass --repair to `tune " << command << "`"
      << (command == "validate" ? " or `tune run`" : "") << " to apply it\n";
}

// The recipe a config is checked against, and why that one.
struct RecipeChoice {
  const RecipeSpec* recipe = nullptr;
  std::string why;  // "" for a built-in config or --recipe; otherwise how the recipe was found
};

std::string Implemented(const Registry& registry) { return JoinStrings(registry.RecipeNames(), ", "); }

// Keys whose value cannot change what a device does with a config: the device itself (every matrix cell sets
// it), where files are read and written, and logging. An override of them leaves a recorded verdict standing.
bool CannotMatterForTheDevice(const std::string& key) {
  static const char* const kKeys[] = {"device",          "output_dir",        "checkpointer.checkpoint_dir",
                                      "checkpointer.output_dir", "tokenizer.path", "metric_logger",
                                      "log_every_n_steps", "log_peak_memory_stats", "log_level"};
  for (const char* k : kKeys) {
    const std::string prefix = k;
    if (key == prefix || key.rfind(prefix + ".", 0) == 0) return true;
  }
  return false;
}

// The keys whose values `overrides` change from the config as written (both with the recipe's defaults),
// in the order given, less those that cannot matter for the device (CannotMatterForTheDevice).

std::vector<std::string> KeysChangedByOverrides(const LocatedConfig& located, const std::vector<std::string>& overrides,
                                                const Config& config, const RecipeSpec& recipe,
                                                const Registry& registry) {
  StatusOr<Config> as_written = LoadResolvedConfig(located, {}, &recipe, &registry);
  if (!as_written.ok()) return {};
  auto shown = [](const YAML::Node& n) { return n.IsDefined() ? YAML::Dump(n) : std::string("<absent>"); };
  std::vector<std::string> changed;
  for (const std::string& o : overrides) {
    std::string key = o.substr(o[0] == '~' ? 1 : 0, o.find('=') == std::string::npos ? std::string::npos
                                                                                      : o.find('=') - (o[0] == '~'));
    if (CannotMatterForTheDevice(key)) continue;
    if (shown(as_written->Find(key)) != shown(config.Find(key)) &&
        std::find(changed.begin(), changed.end(), key) == changed.end()) {
      changed.push_back(key);
    }
  }
  return changed;
}

// The device a check was for: its id, or the config's device as written ('gpu') when it names none.
std::string DeviceShown(const DeviceCheckResult& check, const Config& config) {
  if (!check.device.id.empty()) return check.device.id;
  YAML::Node device = config.Find("device");
  return "'" + (device.IsScalar() ? device.Scalar() : std::string()) + "'";
}

// NotFound for a recipe name this registry lacks, the same words for `run` and `validate`: a torchtune recipe
// tune-matrix does not implement is named as such; anything else gets the closest name.
Status UnknownRecipe(const Registry& registry, const std::string& name) {
  if (FindTorchtuneRecipe(name) != nullptr) {
    return Status::NotFound("recipe '" + name + "' is torchtune's, but tune-matrix does not implement it " +
                            "(implemented: " + Implemented(registry) + ")");
  }
  std::string hint = ClosestMatch(name, registry.RecipeNames());
  return Status::NotFound("unknown recipe '" + name + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?") +
                          " (implemented: " + Implemented(registry) + "; `tune ls` lists them with their configs)");
}

// Chooses the recipe to validate a config against: --recipe; the one listing a built-in config; the recipe
// the file names in its comment or that torchtune's registry lists it under; else the recipe it fits best.
// A recipe of torchtune's that tune-matrix lacks is an error naming it, never a silent substitute.
StatusOr<RecipeChoice> ChooseRecipe(const Registry& registry, const LocatedConfig& located, const Config& config,
                                    const std::string& requested) {
  RecipeChoice choice;
  if (!requested.empty()) {
    choice.recipe = registry.FindRecipe(requested);
    if (choice.recipe != nullptr) return choice;
    return UnknownRecipe(registry, requested);
  }
  if (located.recipe != nullptr) {
    choice.recipe = located.recipe;
    return choice;
  }
  StatusOr<std::string> text = ReadFile(located.path, ConfigInput());
  if (!text.ok()) return text.status();
  RecipeHint hint = RecipeHintForFile(located.path, *text, registry.RecipeNames());
  if (!hint.recipe.empty()) {
    choice.recipe = registry.FindRecipe(hint.recipe);
    if (choice.recipe == nullptr) {
      return Status::FailedPrecondition(
          located.path + ": this config is for torchtune's recipe '" + hint.recipe + "' (from " + hint.source +
          "), which tune-matrix does not implement (implemented: " + Implemented(registry) +
          "); pass --recipe <name> to check it against one of those anyway");
    }
    choice.why = "recipe " + hint.recipe + " from " + hint.source;
    return choice;
  }
  size_t best_count = 0;
  for (const RecipeSpec& r : registry.recipes()) {
    size_t n = ValidateConfig(config, r, registry, nullptr).size();
    if (choice.recipe == nullptr || n < best_count) {
      choice.recipe = &r;
      best_count = n;
    }
  }
  choice.why = "no recipe is named in the file; " + choice.recipe->name +
               " is the one it fits best (choose with --recipe <name>)";
  return choice;
}

// No 64-bit machine addresses more than 2^57 bytes (128 PiB: x86-64's 5-level paging; arm64 stops at 2^52).
constexpr int64_t kMaxAddressableBytes = int64_t{1} << 57;

// A config no machine can start, whatever its device: the recipe's memory prediction beyond what any machine
// addresses (batch_size=1000000000000 validated with a warning). Refused by validate and run alike: the
// prediction errs high by tens of percent, not by such factors. Added to an otherwise valid config's problems.
void RefuseBeyondAnyMachine(const Config& config, const RecipeSpec& recipe, const Registry& registry,
                            DeviceCheckResult* check) {
  if (!check->problems.empty() || !recipe.estimate) return;
  StatusOr<CellEstimate> estimate = recipe.Estimate(config, registry, check->device);
  if (!estimate.ok() || estimate->peak_memory_bytes <= kMaxAddressableBytes) return;
  check->problems.push_back({config.OriginOf("batch_size").ToString(), "batch_size",
                             "the predicted peak memory, " + FormatBytes(estimate->peak_memory_bytes) +
                                 ", is more than any 64-bit machine addresses (2^57 bytes, 128 PiB), so no run of it "
                                 "can start on any device; lower batch_size or tokenizer.max_seq_len"});
}

// A valid config that this machine cannot hold: the recipe's memory prediction above the device's memory,
// or the matrix's record of the config as too large on this device type. A warning, not an error: the
// prediction is conservative, and the config may be meant for another machine.
void WarnIfTooLarge(const Config& config, const RecipeSpec& recipe, const Registry& registry,
                    const DeviceCheckResult& check, std::ostream& err) {
  const DeviceInfo& device = check.device;
  if (recipe.estimate && check.device_available && device.total_memory_bytes > 0) {
    StatusOr<CellEstimate> estimate = recipe.Estimate(config, registry, device);
    if (!estimate.ok()) err << "warning: " << estimate.status().message() << "\n";
    if (estimate.ok() && estimate->peak_memory_bytes > device.total_memory_bytes) {
      err << "warning: predicted peak memory " << FormatBytes(estimate->peak_memory_bytes) << " is more than "
          << device.id << "'s " << FormatBytes(device.total_memory_bytes)
          << ": a run would most likely run out of memory; lower batch_size or tokenizer.max_seq_len, set "
             "enable_activation_checkpointing=True, use a LoRA config, or a device with more memory\n";
    }
  }
  RecordedSupport entry = RecordedHere(config, device, err);
  if (entry.status == "too_large") {
    err << "warning: tune-matrix recorded this config (as written) as too_large on " << device.type << " ("
        << (entry.verified_at.empty() ? "no date" : entry.verified_at)
        << "): " << (entry.reason.empty() ? "no reason recorded" : entry.reason) << "\n";
  }
}

// What the device table says a device type can do, for a check made without the device:
// "trains, bf16 and fp16, collectives over nccl".
std::string DescribeTraits(const DeviceInfo& device) {
  const DeviceTypeTraits& traits = device.traits();
  std::vector<std::string> parts = {traits.trains ? "trains" : "does not train"};
  std::vector<std::string> dtypes;
  if (device.bf16_matmul_backward) dtypes.push_back("bf16");
  if (device.fp16_matmul_backward) dtypes.push_back("fp16");
  if (!dtypes.empty()) parts.push_back(JoinAlternatives(dtypes, "and"));
  if (!traits.distributed_backend.empty()) parts.push_back("collectives over " + traits.distributed_backend);
  return JoinStrings(parts, ", ");
}

// The built-in config that a user's file is a copy of (the same text outside the support block, as `tune cp`
// writes it or a download of torchtune's config is), or "" when none is.
// Whether two parsed YAML values are the same values: maps with the same keys (in any order) and the same value
// under each, sequences element for element, scalars by their text (`['q_proj']` and `[q_proj]` are one value;
// comments and layout are not values). At the top level the `metadata` key is left out of both (the support
// block tune-matrix writes).
bool SameValues(const YAML::Node& a, const YAML::Node& b, bool top = false) {
  if (a.Type() != b.Type()) return false;
  if (a.IsScalar()) return a.Scalar() == b.Scalar();
  if (a.IsSequence()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!SameValues(a[i], b[i])) return false;
    }
    return true;
  }
  if (!a.IsMap()) return true;  // both null
  auto keys = [top](const YAML::Node& m) {
    std::map<std::string, YAML::Node> out;
    for (const auto& kv : m) {
      const std::string key = kv.first.as<std::string>("");
      if (!(top && key == "metadata")) out.emplace(key, kv.second);
    }
    return out;
  };
  const std::map<std::string, YAML::Node> ka = keys(a), kb = keys(b);
  if (ka.size() != kb.size()) return false;
  for (const auto& [key, value] : ka) {
    auto other = kb.find(key);
    if (other == kb.end() || !SameValues(value, other->second)) return false;
  }
  return true;
}

// The built-in config a user's file is, as written: the same values outside the support block, whatever their
// order, layout and comments (torchtune's own file of a config this project mirrors is one), or "". The built-in
// whose name the file's path ends with is tried first, then every other.
std::string BuiltinTwin(const Registry& registry, const LocatedConfig& located) {
  if (located.builtin) return "";
  StatusOr<std::string> text = ReadFile(located.path, ConfigInput());
  if (!text.ok()) return "";
  YAML::Node mine;
  try {
    mine = YAML::Load(*text);
  } catch (const YAML::Exception&) {
    return "";
  }
  const std::string hash = ConfigHash(*text);
  std::vector<std::string> names;
  for (const RecipeSpec& recipe : registry.recipes()) {
    for (const std::string& name : recipe.configs) {
      const std::string tail = "/" + name + ".yaml";
      const bool named = located.path.size() >= tail.size() &&
                         located.path.compare(located.path.size() - tail.size(), tail.size(), tail) == 0;
      names.insert(named ? names.begin() : names.end(), name);
    }
  }
  for (const std::string& name : names) {
    StatusOr<std::string> builtin = ReadFile(BuiltinConfigPath(name), ConfigInput());
    if (!builtin.ok()) continue;
    if (ConfigHash(*builtin) == hash) return name;
    try {
      if (SameValues(YAML::Load(*builtin), mine, /*top=*/true)) return name;
    } catch (const YAML::Exception&) {
    }
  }
  return "";
}

// The config whose support block speaks for `config`: its own when it has one, else that of the built-in config
// the file is (BuiltinTwin: torchtune's file of a mirrored config), else its own (none). `twin` is set to the
// built-in's name when it is one.
Config RecordsOf(const Registry& registry, const LocatedConfig& located, const Config& config, std::string* twin) {
  *twin = BuiltinTwin(registry, located);
  if (twin->empty() || config.Find("metadata.support").IsDefined()) return config;
  StatusOr<LocatedConfig> builtin = LocateConfig(*twin, registry);
  if (!builtin.ok()) return config;
  StatusOr<Config> records = LoadResolvedConfig(*builtin, {});
  return records.ok() ? *records : config;
}

// For a user's file that is a built-in config as written: what tune-matrix recorded for that built-in in `column`
// (every column when `column` is empty or has no entry), and whether the overrides leave it so.
void ShowBuiltinSupport(const Registry& registry, const std::string& twin, const std::string& column,
                        const std::vector<std::string>& changed, std::ostream& out) {
  StatusOr<LocatedConfig> located = LocateConfig(twin, registry);
  if (!located.ok()) return;
  StatusOr<Config> config = LoadResolvedConfig(*located, {});
  if (!config.ok()) return;
  out << "note: this file is the built-in config " << twin << " (the same values outside its support block); ";
  std::map<std::string, RecordedSupport> columns = RecordedColumns(config->Find("metadata.support"));
  auto entry = columns.find(column);
  if (entry != columns.end()) {
    out << "tune-matrix recorded it on " << column << ": " << DescribeRecordedSupport(entry->second);
  } else if (!columns.empty()) {
    std::vector<std::string> recorded;
    for (const auto& [key, r] : columns) recorded.push_back(key + ": " + DescribeRecordedSupport(r));
    out << "tune-matrix has " << (column.empty() ? "" : "no record of it on " + column + "; it has ")
        << JoinStrings(recorded, "; ");
  } else {
    out << "tune-matrix has no record of it yet";
  }
  if (!changed.empty()) out << "; that is the config as written, and your overrides change " << JoinStrings(changed, ", ");
  out << "\n";
}

int Validate(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {"repair"}, {"recipe"}, &parsed, &error)) return UsageError(err, "validate", error);
  if (parsed.positional.empty()) return UsageError(err, "validate", "expected <config> [key=value ...]");
  std::string requested = parsed.Get("recipe");
  StatusOr<LocatedConfig> located = LocateConfig(parsed.positional[0], registry, registry.FindRecipe(requested));
  if (!located.ok()) return Fail(err, located.status());
  std::vector<std::string> overrides(parsed.positional.begin() + 1, parsed.positional.end());
  StatusOr<Config> as_written = LoadResolvedConfig(*located, overrides);
  if (!as_written.ok()) return Fail(err, as_written.status());
  StatusOr<RecipeChoice> choice = ChooseRecipe(registry, *located, *as_written, requested);
  if (!choice.ok()) return Fail(err, choice.status());
  const RecipeSpec* recipe = choice->recipe;
  StatusOr<Config> config = LoadResolvedConfig(*located, overrides, recipe, &registry);
  if (!config.ok()) return Fail(err, config.status());
  DeviceCheckResult check = ValidateForDevice(*config, *recipe, registry, ProbeDevice);
  std::string twin;  // the built-in config this file is, whose records speak for it
  const Config records = RecordsOf(registry, *located, *config, &twin);
  std::optional<Repaired> repaired;
  if (!check.problems.empty()) repaired = Repair(*located, overrides, *recipe, registry, check.problems);
  if (parsed.Has("repair")) {
    if (check.problems.empty()) {
      out << "note: --repair: " << located->name << " is valid on " << check.device.id << " as it is; nothing to repair\n";
    } else if (repaired && repaired->check.problems.empty()) {
      out << "note: --repair: applied " << JoinStrings(repaired->repair, " ") << " for " << repaired->check.device.id
          << "; " << RepairRecord(records, repaired->repair, repaired->check.device) << "\n";
      *config = std::move(repaired->config);
      check = std::move(repaired->check);
    } else {
      err << "note: --repair: no repair is known for every problem below\n";
    }
  }
  if (!choice->why.empty()) (check.problems.empty() ? out : err) << "note: " << choice->why << "\n";
  if (!twin.empty()) {
    std::ostringstream quiet;
    ShowBuiltinSupport(registry, twin, check.device.type.empty() ? "" : ColumnKey(RunningColumn(check.device, quiet)),
                       KeysChangedByOverrides(*located, overrides, *config, *recipe, registry),
                       check.problems.empty() ? out : err);
  }
  if (check.absent) {
    // Judged for the device type without a device: said, so that "valid" is not read as "probed here".
    (check.problems.empty() ? out : err)
        << "note: " << check.absent->message << "; " << located->name << " was checked against what the device "
        << "table knows of " << check.device.type << " (" << DescribeTraits(check.device)
        << "), not a probed device: what only the device shows (its memory, a kernel that fails) is not checked\n";
  }
  RefuseBeyondAnyMachine(*config, *recipe, registry, &check);
  if (!check.problems.empty()) {
    err << "error: " << located->name << " is not valid for recipe " << recipe->name << " on device "
        << DeviceShown(check, *config) << " (" << check.problems.size() << " problem" << (check.problems.size() == 1 ? "" : "s")
        << "):\n";
    PrintProblems(check.problems, err);
    ShowRepair(repaired, records, "validate", err);
    return kExitUsage;
  }
  out << "Config " << located->name << " is valid for recipe " << recipe->name << " on " << check.device.id << " ("
      << (check.absent ? check.device.type + " by its traits; not on this machine" : check.device.name) << ").\n";
  WarnIfTooLarge(*config, *recipe, registry, check, err);
  WarnOfTheTorchAxis(records, located->name, check.device, err);
  if (recipe->missing_inputs) {
    // Warnings only: the files may be fetched before the run.
    for (const Problem& p : recipe->missing_inputs(*config, registry)) err << "warning: " << p.ToString() << "\n";
  }
  return kExitOk;
}

// Why this machine cannot give `nproc` ranks on `device`'s type ("" when it can): ranks sharing the host
// (cpu) each train a whole process on cores of their own, so more ranks than cores only thrash; ranks on an
// accelerator take one device each (rank r uses index r).
std::string RanksProblem(int nproc, const DeviceInfo& device) {
  const DeviceTypeTraits& traits = device.traits();
  if (traits.HostMemory()) {
    const int cores = ReadUsableCores().count;  // affinity and cgroup quota, not the host's CPUs
    if (nproc <= cores) return "";
    return "--nproc_per_node " + std::to_string(nproc) + " is more ranks than this machine's " + std::to_string(cores) +
           " cores; each " + device.type + " rank is a training process of its own; use --nproc_per_node " +
           std::to_string(cores) + " or fewer";
  }
  if (!traits.takes_index || nproc == 1) return "";
  StatusOr<DeviceSelector> last = ParseDeviceSelector(device.type + ":" + std::to_string(nproc - 1));
  if (last.ok() && ProbeDevice(*last).ok()) return "";
  return "--nproc_per_node " + std::to_string(nproc) + " needs " + std::to_string(nproc) + " " + device.type +
         " devices (one per rank) and " + device.type + ":" + std::to_string(nproc - 1) +
         " is not on this machine (`tune devices` lists them); use fewer ranks";
}

// `tune run --nproc_per_node N ...`: the same command, without the option, as N ranks (harness/launcher.h).
// When a rank other than 0 fails first, its failure goes into the run's summary.json, which rank 0 wrote
// (or could not write), so that the summary names the rank that ended the run.
int LaunchRun(const std::vector<std::string>& args, int nproc, const Config& config, const RecipeSpec& recipe,
              const std::string& config_name, const std::string& device, std::ostream& err) {
  LaunchOptions options;
  options.nproc = nproc;
  char self[4096];
  ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return Fail(err, Status::Unavailable("cannot find this program's path (/proc/self/exe) to start ranks"));
  options.argv = {std::string(self, static_cast<size_t>(len)), "run"};
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc_per_node") {
      ++i;
    } else if (args[i].rfind("--nproc_per_node=", 0) != 0) {
      options.argv.push_back(args[i]);
    }
  }
  StatusOr<LaunchResult> result = LaunchRanks(options);
  if (!result.ok()) return Fail(err, result.status());
  if (result->interrupt_signal != 0) {
    const char* name = ::strsignal(result->interrupt_signal);
    err << "error: tune run: interrupted by signal " << result->interrupt_signal
        << (name != nullptr ? " (" + std::string(name) + ")" : "") << "; stopped the ranks\n";
    return kExitInterrupted;
  }
  if (!result->failed_rank) return kExitOk;
  const std::string what = "rank " + std::to_string(*result->failed_rank) + " of " + std::to_string(nproc) + " " +
                           result->failure;
  err << "error: tune run: " << what;
  if (!result->stopped_ranks.empty()) err << "; stopped the other ranks";
  err << "\n";
  StatusOr<std::string> output_dir = config.GetString("output_dir", "");
  if (*result->failed_rank != 0 && output_dir.ok() && !output_dir->empty()) {
    StatusOr<RunSummary> written = ReadRunSummary(*output_dir);
    RunSummary summary;
    if (written.ok()) {
      summary = *written;
    } else {
      summary.recipe = recipe.name;
      summary.config = config_name;
      summary.device = device;
      summary.world_size = nproc;
    }
    summary.error = what + (summary.error.empty() ? "" : "; rank 0: " + summary.error);
    summary.ok = false;
    summary.error_kind = "rank_failed";
    Status w = WriteRunSummary(*output_dir, summary);
    if (!w.ok()) err << "warning: " << w.message() << "\n";
  }
  return kExitFailure;
}

// --nproc_per_node's ranks into `*nproc` (0 without it: the run stays in this process); an exit status where the
// option is wrong for `recipe` or the launcher's environment, -1 otherwise.
int RanksOption(const ParsedArgs& parsed, const RecipeSpec& recipe, int* nproc, std::ostream& err) {
  *nproc = 0;
  if (!parsed.Has("nproc_per_node")) return -1;
  const std::string v = parsed.Get("nproc_per_node");
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 1 || n > 1024) {
    return UsageError(err, "run", "--nproc_per_node '" + v + "' is not a number of ranks from 1 to 1024");
  }
  if (!recipe.launches_ranks()) {
    return UsageError(err, "run", "recipe " + recipe.name + " runs on one device and takes no --nproc_per_node; " +
                                      "drop it, or use a distributed recipe (tune ls)");
  }
  // The ranks run without the option; torchrun's variables set around it are refused, not obeyed.
  Status launchable = CheckLauncherEnvironment(static_cast<int>(n));
  if (!launchable.ok()) return UsageError(err, "run", launchable.message());
  *nproc = static_cast<int>(n);
  return -1;
}

// The device check's problems, each with its repair where one exists, and where the device is absent the
// devices the matrix recorded the config running on.
int RefuseToRun(const RecipeSpec& recipe, const LocatedConfig& located, const Config& config,
                const DeviceCheckResult& check, const std::optional<Repaired>& repaired, const Config& records,
                std::ostream& err) {
  err << "error: cannot run " << recipe.name << " with " << located.name << " on " << DeviceShown(check, config)
      << ":\n";
  PrintProblems(check.problems, err);
  if (check.device_available) ShowRepair(repaired, records, "run", err);
  YAML::Node recorded = records.Find("metadata.supported_devices");
  if (!check.device_available && recorded.IsSequence() && recorded.size() > 0) {
    std::vector<std::string> types;
    for (const auto& t : recorded) types.push_back(t.as<std::string>(""));
    err << "  tune-matrix recorded this config as running on: " << JoinStrings(types, ", ")
        << " (for example device=" << ColumnDeviceType(types.front()) << ")\n";
  }
  return kExitUsage;
}

// The config's generated support metadata (written by tune-matrix) may already know this fails here: it describes
// the config as written, so it stands only when the overrides leave the config as it was, and only of the column
// this run is in (another CPU class's or torch's record says nothing of it: harness/column.h). An exit status
// where the record refuses the run (without --force), -1 otherwise.
int CheckRecordedSupport(const Registry& registry, const RecipeSpec& recipe, const LocatedConfig& located,
                         const std::vector<std::string>& overrides, const Config& config, const Config& records,
                         const std::vector<std::string>& applied, const DeviceCheckResult& check, bool force,
                         std::ostream& err) {
  std::ostringstream quiet;
  const std::string type = ColumnKey(RunningColumn(check.device, quiet));
  RecordedSupport entry = RecordedHere(records, check.device, err);
  WarnOfTheTorchAxis(records, located.name, check.device, err);
  // With a repair applied, what the matrix recorded of the config run with that repair (nothing: another one).
  if (!applied.empty()) entry = RecordedRepair(entry, applied);
  if (!entry.blocks()) return -1;
  const std::string& status = entry.status;
  std::vector<std::string> changed = KeysChangedByOverrides(located, overrides, config, recipe, registry);
  if (!changed.empty()) {
    err << "note: tune-matrix recorded " << located.name << " as '" << status << "' on " << type
        << " as written; the overrides change " << JoinStrings(changed, ", ") << ", so this run is judged afresh\n";
    return -1;
  }
  const std::string reason = entry.reason.empty() ? "no reason recorded" : entry.reason;
  const std::string when = entry.verified_at.empty() ? "an unknown date" : entry.verified_at;
  if (!force) {
    err << "error: tune-matrix recorded " << located.name << " as '" << status << "' on " << type << " (" << when
        << "): " << reason << "\nPass --force to run it anyway.\n";
    return kExitUsage;
  }
  err << "warning: tune-matrix recorded " << located.name << " as '" << status << "' on " << type << " (" << when
      << "): " << reason << "; running anyway (--force)\n";
  return -1;
}

// Every missing input and unwritable output at once, before a model is built (minutes for a large one) or a
// rank started: an exit status where there are any, -1 otherwise.
int RefuseMissingInputs(const Registry& registry, const RecipeSpec& recipe, const LocatedConfig& located,
                        const Config& config, std::ostream& err) {
  if (!recipe.missing_inputs) return -1;
  std::vector<Problem> missing = recipe.missing_inputs(config, registry);
  if (missing.empty()) return -1;
  err << "error: " << located.name << " cannot run on this machine: " << missing.size() << " problem"
      << (missing.size() == 1 ? "" : "s") << " with the files it reads or writes:\n";
  PrintProblems(missing, err);
  err << "Nothing was built or written. A missing input (weights, tokenizer file, dataset) can be replaced by "
         "the shipped sample of its kind with --allow-stand-ins.\n";
  return kExitUsage;
}

// The recipe in this process; an exception it throws is its error, named with the recipe and the device.
int RunInThisProcess(const Registry& registry, const RecipeSpec& recipe, const Config& config,
                     const std::string& config_name, const DeviceInfo& device, bool allow_stand_ins,
                     std::ostream& out, std::ostream& err) {
  RunContext context;
  context.registry = &registry;
  context.device = device;
  context.config_name = config_name;
  context.out = &out;
  context.allow_stand_ins = allow_stand_ins;
  Status s;
  try {
    s = recipe.run(config, context);
  } catch (const std::exception& e) {
    std::string what = e.what();
    s = Status::Internal(recipe.name + " failed on " + device.id + ": " + what.substr(0, what.find('\n')));
  }
  if (!s.ok()) return Fail(err, s);
  return kExitOk;
}

int Run(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {"force", "allow-stand-ins", "repair"}, {"config", "nproc_per_node"}, &parsed, &error)) {
    return UsageError(err, "run", error);
  }
  if (parsed.positional.empty()) return UsageError(err, "run", "expected <recipe> --config <config> [key=value ...]");
  const std::string recipe_name = parsed.positional[0];
  const RecipeSpec* recipe = registry.FindRecipe(recipe_name);
  if (recipe == nullptr) return Fail(err, UnknownRecipe(registry, recipe_name));
  if (!parsed.Has("config")) return UsageError(err, "run", "--config <config> is required");
  int nproc = 0;
  if (int refused = RanksOption(parsed, *recipe, &nproc, err); refused >= 0) return refused;
  StatusOr<LocatedConfig> located = LocateConfig(parsed.Get("config"), registry, recipe);
  if (!located.ok()) return Fail(err, located.status());
  const std::vector<std::string> overrides(parsed.positional.begin() + 1, parsed.positional.end());
  StatusOr<Config> config = LoadResolvedConfig(*located, overrides, recipe, &registry);
  if (!config.ok()) return Fail(err, config.status());
  DeviceCheckResult check = ValidateForDevice(*config, *recipe, registry, ProbeDevice);
  std::string twin;  // the built-in config this file is, whose records speak for it
  const Config records = RecordsOf(registry, *located, *config, &twin);
  // --repair: a config invalid on its device runs with every problem's repair, when that makes it valid.
  std::optional<Repaired> repaired;
  if (!check.problems.empty()) repaired = Repair(*located, overrides, *recipe, registry, check.problems);
  std::vector<std::string> applied;
  if (parsed.Has("repair") && repaired && repaired->check.problems.empty()) {
    err << "note: --repair: applied " << JoinStrings(repaired->repair, " ") << " for " << repaired->check.device.id
        << "; " << RepairRecord(records, repaired->repair, repaired->check.device) << "\n";
    applied = repaired->repair;
    *config = std::move(repaired->config);
    check = std::move(repaired->check);
    repaired.reset();
  }
  RefuseBeyondAnyMachine(*config, *recipe, registry, &check);
  // A run needs the device itself: its absence is the first problem.
  if (check.absent) check.problems.insert(check.problems.begin(), *check.absent);
  if (!check.problems.empty()) return RefuseToRun(*recipe, *located, *config, check, repaired, records, err);
  if (int refused = CheckRecordedSupport(registry, *recipe, *located, overrides, *config, records, applied, check,
                                         parsed.Has("force"), err);
      refused >= 0) {
    return refused;
  }
  if (!recipe->run) {
    return Fail(err, Status::FailedPrecondition("recipe '" + recipe->name + "' cannot be run by this build"));
  }
  if (!parsed.Has("allow-stand-ins")) {
    if (int refused = RefuseMissingInputs(registry, *recipe, *located, *config, err); refused >= 0) return refused;
  }
  if (nproc > 0) {
    std::string problem = RanksProblem(nproc, check.device);
    if (!problem.empty()) return UsageError(err, "run", problem);
    return LaunchRun(args, nproc, *config, *recipe, located->name, check.device.id, err);
  }
  return RunInThisProcess(registry, *recipe, *config, located->name, check.device, parsed.Has("allow-stand-ins"),
                          out, err);
}

int Devices(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {"json", "matmul-peak"}, {"device"}, &parsed, &error) || !parsed.positional.empty()) {
    return UsageError(err, "devices", error.empty() ? "takes no positional arguments" : error);
  }
  std::vector<DeviceInfo> devices;
  if (parsed.Has("device")) {
    StatusOr<DeviceSelector> selector = ParseDeviceSelector(parsed.Get("device"));
    if (!selector.ok()) return UsageError(err, "devices", "--device: " + selector.status().message());
    StatusOr<DeviceInfo> one = ProbeDevice(*selector);
    if (one.ok()) devices.push_back(*one);  // an absent device: an empty list, so a caller can tell
  } else {
    devices = ProbeAllDevices();
  }
  if (parsed.Has("matmul-peak")) {
    for (DeviceInfo& d : devices) {
      Status measured = MeasureMatmulPeaks(MatmulPeakOptions{}, &d);
      if (measured.ok()) measured = MeasureMemoryBandwidth(MemoryBandwidthOptions{}, &d);
      if (!measured.ok()) return Fail(err, measured);
    }
  }
  if (parsed.Has("json")) {
    nlohmann::json j = nlohmann::json::array();
    for (const DeviceInfo& d : devices) j.push_back(DeviceInfoToJson(d));
    out << DumpJson(j, 2) << "\n";
    return kExitOk;
  }
  for (const DeviceInfo& d : devices) {
    std::ostringstream quiet;
    const Column column = RunningColumn(d, quiet);
    out << d.id << "  " << d.name << (column.cpu_class.empty() ? "" : "  class " + column.cpu_class) << "  memory "
        << (d.total_memory_bytes ? FormatBytes(d.total_memory_bytes) : "unknown") << "  bf16 "
        << (d.bf16_matmul_backward ? "yes" : "no") << "  fp16 " << (d.fp16_matmul_backward ? "yes" : "no")
        << "  memory-stats " << (d.memory_stats ? "yes" : "no") << "  distributed "
        << (d.distributed_backend.empty() ? "none" : d.distributed_backend) << "\n";
    for (const std::string& n : d.notes) out << "    note: " << n << "\n";
    for (const auto& [dtype, flops] : d.matmul_peak_flops) {
      out << "    matmul peak " << dtype << ": " << FormatFlops(flops) << " at " << d.matmul_peak_threads
          << (d.matmul_peak_threads == 1 ? " thread" : " threads") << "\n";
    }
    for (const auto& [kernel, rate] : d.memory_bandwidth) {
      out << "    memory bandwidth " << kernel << ": " << FormatNumber(rate / 1e9, 1) << " GB/s\n";
    }
  }
  out << "LibTorch " << TorchVersion() << "\n";
  return kExitOk;
}

}  // namespace

std::vector<Subcommand> TuneSubcommands(const Registry& registry) {
  const Registry* r = &registry;
  return {
      {"download",
       "download <repo_id> [--output-dir DIR] [--hf-token TOKEN] [--ignore-patterns GLOB[,GLOB...]] [--revision REV]"
       " [--repo-type model|dataset]",
       "Download a model or dataset from the Hugging Face Hub",
       "Fetches every file of the repo's revision (default main) into --output-dir (default /tmp/<name>, as\n"
       "torchtune's; for --repo-type dataset, $TUNE_MATRIX_DATA/<repo_id> or ~/.cache/tune-matrix/datasets/<repo_id>,\n"
       "where a config's `source: <repo_id>` is read). The token comes from --hf-token or HF_TOKEN (gated and\n"
       "private repos need one) and goes only to the Hub, from HF_ENDPOINT (default https://huggingface.co).\n"
       "--ignore-patterns skips files matching a glob (`*` crosses folders), e.g. --ignore-patterns 'original/*';\n"
       "nothing is skipped by default. A file is written as <file>.incomplete, checked against the Hub's sha256\n"
       "(LFS) or git sha1, then renamed; a dropped connection or a busy Hub is retried within the run (5 times,\n"
       "waiting 1 s doubling to 8 s), an interrupted download resumes where it stopped when run again, and\n"
       "complete files are skipped. Paths in .git and other control folders, links in the output folder, and\n"
       "output folders inside the checkout's configs/ or reports/ are refused.\n"
       "Example: tune download meta-llama/Llama-3.2-1B-Instruct --output-dir /tmp/Llama-3.2-1B-Instruct",
       [](const auto& a, auto& o, auto& e) {
         std::unique_ptr<HttpTransport> transport = MakeCurlTransport();
         return RunDownloadCommand(a, o, e, *transport);
       }},
      {"ls", "ls [--verbose] [--json] | ls --components [KIND]", "List recipes and their built-in configs",
       "--verbose adds each config's model component and its parameter count.\n"
       "--components lists every component a config can name (of KIND: model, tokenizer, dataset, optimizer,\n"
       "...), with torchtune's names for it, and those recognised but not supported here with the reason.",
       [r](const auto& a, auto& o, auto& e) { return Ls(*r, a, o, e); }},
      {"cp", "cp <config> <destination> [--force] [--make-parents]", "Copy a built-in config to edit it",
       "Refuses to overwrite an existing file unless --force is given. A folder as destination keeps the file name.",
       [r](const auto& a, auto& o, auto& e) { return Cp(*r, a, o, e); }},
      {"cat", "cat <config> [key=value ...]", "Print a config with overrides and ${...} interpolation applied",
       "Overrides: a.b=v sets a key, ~a.b removes one, model=<component> replaces a component.",
       [r](const auto& a, auto& o, auto& e) { return Cat(*r, a, o, e); }},
      {"validate", "validate <config> [--recipe <name>] [--repair] [key=value ...]",
       "Check a config against its recipe's schema and its device",
       "Lists every problem: unknown keys (with the nearest valid key), wrong types, values out of range,\n"
       "unknown components, and what the config's device cannot do (bf16, paged optimizers, activation\n"
       "offloading...). The recipe is --recipe, the one listing a built-in config, or the one a file names\n"
       "(`tune run <recipe>` in its comment, or torchtune's registry for its name); a torchtune recipe\n"
       "tune-matrix lacks is named as such. Exit status 0 when valid, 2 otherwise.\n"
       "A config invalid only on its device, each problem with a known override (a paged optimizer on cpu ->\n"
       "AdamW, activation offloading on cpu -> off), gets those overrides as its repair, with whether and where\n"
       "tune-matrix ran it so (from the config's support entry); --repair applies them (so does `tune run`).",
       [r](const auto& a, auto& o, auto& e) { return Validate(*r, a, o, e); }},
      {"run", "run [--nproc_per_node N] <recipe> --config <config> [--force] [--allow-stand-ins] [--repair] [key=value ...]",
       "Run a recipe with a config",
       "Example: tune run lora_finetune_single_device --config llama3_2/1B_lora_single_device device=cpu\n"
       "A tokenizer file, dataset or checkpoint the config names but this machine lacks stops the run before\n"
       "training, naming what is missing and where to put it; with --allow-stand-ins the shipped sample of\n"
       "the same kind (or weights from the seed) stands in and the run summary says so (matrix cells do this).\n"
       "An output folder it cannot create or write, or less free disk than its checkpoints need, stops it too.\n"
       "It prints where its outputs go, each start-up phase with its time, and with each step the time left.\n"
       "A distributed recipe runs N ranks with --nproc_per_node N (torchrun's environment; torchrun can also\n"
       "launch `tune run` itself), e.g. tune run --nproc_per_node 2 lora_finetune_distributed --config\n"
       "llama3_2/1B_lora device=cpu; without it, one rank.\n"
       "--repair runs a config that is invalid on its device with the overrides `tune validate` names as its\n"
       "repair, e.g. tune run full_finetune_single_device --config qwen2/1.5B_full_single_device device=cpu --repair",
       [r](const auto& a, auto& o, auto& e) { return Run(*r, a, o, e); }},
      {"devices", "devices [--device D] [--json] [--matmul-peak]", "List this machine's devices with their probed capabilities",
       "--device probes only that device (an absent one gives an empty list). --matmul-peak also measures each\n"
       "device's matmul peak per dtype and its memory bandwidth (STREAM copy and triad).",
       [](const auto& a, auto& o, auto& e) { return Devices(a, o, e); }},
  };
}

int RunTune(const Registry& registry, const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            const std::vector<Subcommand>& extra) {
  std::vector<std::string> rest = args;
  if (!LoadDevicePluginsForCommandLine("tune", &rest, err)) return kExitUsage;
  std::vector<Subcommand> table = TuneSubcommands(registry);
  table.insert(table.end(), extra.begin(), extra.end());
  return DispatchSubcommand("tune", "fine-tune LLMs on any device (tune-matrix)\n" + DevicePluginHelp(), table, rest,
                            out, err);
}

}  // namespace tmx
