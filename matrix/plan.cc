#include "matrix/plan.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "base/file_util.h"
#include "base/input_file.h"
#include "base/text.h"
#include "harness/column.h"
#include "harness/config_store.h"
#include "harness/proxy.h"
#include "matrix/journal.h"
#include "matrix/shard.h"
#include "matrix/support_block.h"

namespace tmx::matrix {
namespace {

std::string Slug(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return out;
}

bool DeviceSelected(const DeviceInfo& d, const std::vector<std::string>& wanted) {
  if (wanted.empty()) return true;
  for (const std::string& w : wanted) {
    if (w == d.id || w == d.type) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> CellOverrides(const RecipeSpec& recipe, const std::string& device, int steps,
                                       const std::string& output_dir) {
  std::vector<std::string> overrides = {"device=" + device};
  if (recipe.cell_overrides) {
    for (std::string& o : recipe.cell_overrides(steps)) overrides.push_back(std::move(o));
  }
  overrides.push_back("output_dir=" + output_dir);
  return overrides;
}

// The steps aim below the share: a cell's step time moves by up to a third from one run to the next on a
// shared machine (the recorded step was 3.2 s, the next run's 2.2 s), and the limit should hold in both.
constexpr double kStartupShareAim = 2.0 / 3.0;

int CellSteps(double startup_s, double step_s, const MatrixOptions& options) {
  if (!(options.startup_share > 0 && options.startup_share < 1) || !(step_s > 0) || !(startup_s >= 0)) {
    return options.max_steps;
  }
  const double share = options.startup_share * kStartupShareAim;
  // startup / (startup + n x step) <= share  <=>  n >= startup x (1 - share) / (share x step)
  const double needed = std::ceil(startup_s * (1 - share) / (share * step_s) - 1e-9);
  if (needed <= options.max_steps) return options.max_steps;
  if (needed > options.max_extended_steps) return options.max_steps;
  const int steps = static_cast<int>(needed);
  if (options.cell_budget_s > 0 && startup_s + steps * step_s > options.cell_budget_s) {
    const int fitting = static_cast<int>(std::floor((options.cell_budget_s - startup_s) / step_s));
    return std::max(options.max_steps, fitting);
  }
  return steps;
}

bool MatchesGlob(const std::string& pattern, const std::string& name) {
  return pattern.empty() || ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

void DeferOverTheTimeLimit(double limit_s, std::vector<PlannedCell>* cells) {
  std::vector<PlannedCell*> order;
  for (PlannedCell& c : *cells) {
    if (c.runnable) order.push_back(&c);
  }
  // Oldest record first (none: first of all), then the shorter: the most cells refreshed in the time.
  std::stable_sort(order.begin(), order.end(), [](const PlannedCell* a, const PlannedCell* b) {
    if (a->recorded_at != b->recorded_at) return a->recorded_at < b->recorded_at;
    return a->ExpectedTotalS() < b->ExpectedTotalS();
  });
  // Strictly in that order, up to the first that does not fit: filling the time left with shorter cells would
  // measure the newest records again and again. The oldest always runs, however long, so every cell gets its turn.
  double planned_s = 0;
  bool first = true, full = false;
  for (PlannedCell* c : order) {
    full = full || (!first && planned_s + c->ExpectedTotalS() > limit_s);
    c->deferred = full;
    planned_s += c->ExpectedTotalS();
    first = false;
  }
}

std::string TooLargeReason(const MemoryJudgement& judged, int64_t bytes) {
  using Basis = MemoryJudgement::Basis;
  const std::string basis = judged.basis == Basis::kExtrapolated ? "extrapolated (from its proxies)"
                            : judged.basis == Basis::kMeasured   ? "measured"
                                                                 : "predicted";
  if (judged.limit_bytes > 0 && bytes <= judged.limit_bytes) {
    return basis + " peak memory " + FormatBytes(bytes) + " is within " + judged.limit + " (the last proxies' " +
           FormatBytes(judged.bytes) + " was not): the next run tries it in full";
  }
  return basis + " peak memory " + FormatBytes(bytes) + " exceeds " + judged.limit;
}

std::string DeviceShown(const PlannedCell& cell) {
  if (cell.column.rfind(cell.device_type, 0) != 0) return cell.key.device;
  return cell.key.device + cell.column.substr(cell.device_type.size());
}

int64_t MemoryLimit(const DeviceInfo& device, const MatrixOptions& options) {
  if (device.total_memory_bytes <= 0) return 0;
  return static_cast<int64_t>(options.memory_fraction * static_cast<double>(device.total_memory_bytes));
}

std::string MemoryShare(const DeviceInfo& device, const MatrixOptions& options) {
  return std::to_string(static_cast<int>(options.memory_fraction * 100)) + "% of " + device.id + "'s " +
         (device.total_memory_bytes > 0 ? FormatBytes(device.total_memory_bytes) : "memory");
}

namespace {

constexpr double kBudgetBand = 1.25;

// How long cells take in one column (a device type, its CPU class and torch), fitted from its measured cells.
struct DeviceRates {
  double fixed_s = 0;            // start-up of the smallest cell (process, device probe, data)
  double s_per_parameter = 0;    // start-up per model parameter (building and initialising weights)
  double s_per_work = 1e-9;      // step time per unit of CellEstimate::work
  double Startup(double parameters) const { return fixed_s + s_per_parameter * parameters; }
  double Step(double work) const { return s_per_work * work; }
  double Predict(double parameters, double work, int steps) const { return Startup(parameters) + steps * Step(work); }
};

// The most memory a cell may be predicted to need on `device` and still start: its MemoryLimit plus
// kMemoryPredictionTolerance (a prediction's margin, never a measured stop's); 0 when the memory is unknown.
int64_t StartLimit(const DeviceInfo& device, const MatrixOptions& options) {
  return static_cast<int64_t>((1 + kMemoryPredictionTolerance) * static_cast<double>(MemoryLimit(device, options)));
}

// The size proxies are cut from (ProxyCut::real_layers, real_vocab; vocab 0 unless cut).
struct RealSize {
  int layers = 0;
  int vocab = 0;
};

// How a cell's config was found and the overrides its own run has: what its proxies start from.
struct CellSource {
  LocatedConfig located;
  std::vector<std::string> launch;  // `tune run` up to the overrides
  // What every child of the cell starts its overrides with: the repair (PlannedCell::repair), and seed=0 for a
  // config that leaves its seed to chance (torchtune's `seed: null`), so that its proxies and its numeric check's
  // reference train the same batches from the same weights as the cell.
  std::vector<std::string> prefix;
  // The config's dtype, repaired where it is: the numeric check's tolerance (its proxies keep it).
  std::string dtype = "fp32";
};

// One cell as the plan's passes see it: the PlannedCell they build, how its config is launched, and what its
// record in its column says (each field empty for a cell never measured there).
struct CellDraft {
  PlannedCell cell;
  CellSource source;
  // Cells outside --recipes and --configs are planned too, for the rates their measurements give (a run of a
  // few configs predicts them from every measured cell of the column), then left out.
  bool selected = false;
  double work = 0;                                 // training work per step (CellEstimate::work)
  double parameters = 0;                           // model parameters (CellEstimate::parameters)
  std::optional<double> recorded_s;                // recorded wall time
  std::optional<double> recorded_step_s;           // recorded median step time
  std::optional<double> recorded_startup_s;        // recorded start-up (with a step time)
  std::optional<double> recorded_reference_s;      // its numeric check's reference run's wall time
  bool recorded_too_slow = false;                  // its last record here is too_slow
};

// Each column's rates, fitted over the cells measured in it (ratios of sums, so the large, kernel-bound cells
// set the rates).
std::map<std::string, DeviceRates> FitDeviceRates(const std::vector<CellDraft>& drafts, int steps) {
  struct Sums {
    double step_s = 0, work = 0, startup_s = 0, parameters = 0;
    std::optional<double> fixed_s;
  };
  std::map<std::string, Sums> sums;
  for (const CellDraft& d : drafts) {
    if (!d.recorded_s || !d.recorded_step_s || d.work <= 0) continue;
    Sums& s = sums[d.cell.column];
    // A record made before start-up was recorded ran `steps` steps; its warm-up step counts as start-up here,
    // good enough for the rates but not for choosing the cell's steps.
    const double startup =
        d.recorded_startup_s ? *d.recorded_startup_s : std::max(0.0, *d.recorded_s - steps * *d.recorded_step_s);
    s.step_s += *d.recorded_step_s;
    s.work += d.work;
    s.startup_s += startup;
    s.parameters += d.parameters;
    s.fixed_s = s.fixed_s ? std::min(*s.fixed_s, startup) : startup;
  }
  std::map<std::string, DeviceRates> rates;
  for (const auto& [type, s] : sums) {
    DeviceRates r;
    r.fixed_s = s.fixed_s.value_or(0);
    r.s_per_work = s.step_s / s.work;
    if (s.parameters > 0) r.s_per_parameter = std::max(0.0, s.startup_s - r.fixed_s) / s.parameters;
    rates[type] = r;
  }
  return rates;
}

// One proxy of a cell, cut to `layers`: false, with `*note` (starting "no proxy: ") saying why, for a config
// without a model to cut, a proxy the recipe refuses, one predicted over the memory limit (`*over_memory`), or
// one predicted over the wall-clock limit of a cell (judged only when `measured_rates`: the rates were fitted
// to cells of the column, as for the cell itself). Not the cell budget: the rates, fitted to whole
// models, overestimate a proxy several times (Llama 3.1 8B LoRA's pair: 99 s predicted, 28 s measured), and a
// proxy that does run long is stopped at the limit and says so.
// `vocab_divisor` above 1 cuts the vocabulary too (harness/proxy.h ProxyOf).
bool PlanProxyRun(const PlannedCell& cell, const CellSource& source, const Registry& registry,
                  const MatrixOptions& options, const DeviceRates& rates, bool measured_rates, int64_t layers,
                  int64_t vocab_divisor, ProxyRun* run, RealSize* real, std::string* note, bool* over_memory) {
  const RecipeSpec& recipe = *source.located.recipe;
  *over_memory = false;
  run->layers = layers;
  StatusOr<Config> config = LoadResolvedConfig(source.located, source.prefix, &recipe, &registry);
  if (!config.ok()) {
    *note = "no proxy: " + config.status().message();
    return false;
  }
  StatusOr<ProxyCut> cut = ProxyOf(*config, registry, layers, vocab_divisor);
  if (!cut.ok()) {
    *note = "no proxy: " + cut.status().message();
    return false;
  }
  real->layers = static_cast<int>(cut->real_layers);
  real->vocab = static_cast<int>(cut->real_vocab);
  run->cut = cut->description;
  run->vocab = cut->vocab;
  run->output_dir = cell.output_dir + "__proxy" + std::to_string(layers) +
                    (cut->vocab > 0 ? "v" + std::to_string(cut->vocab) : "");
  std::vector<std::string> overrides = source.prefix;
  for (std::string& o : CellOverrides(recipe, cell.device.id, cell.steps, run->output_dir)) {
    overrides.push_back(std::move(o));
  }
  for (const std::string& o : cut->overrides) overrides.push_back(o);
  config = LoadResolvedConfig(source.located, overrides, &recipe, &registry);
  std::vector<Problem> problems;
  if (config.ok()) problems = ValidateConfig(*config, recipe, registry, &cell.device);
  if (!config.ok() || !problems.empty()) {
    *note = "no proxy: the recipe refuses the proxy of " + std::to_string(layers) + " layers (" + run->cut + "): " +
            (config.ok() ? problems.front().key + ": " + problems.front().message : config.status().message());
    return false;
  }
  StatusOr<CellEstimate> estimate = recipe.Estimate(*config, registry, cell.device);
  if (estimate.ok()) {
    run->predicted_memory_bytes = estimate->peak_memory_bytes;
    run->expected_duration_s = rates.Predict(static_cast<double>(estimate->parameters), estimate->work, cell.steps);
  }
  const std::string even = "no proxy: even " + std::to_string(layers) + (layers == 1 ? " layer (" : " layers (") +
                           run->cut + (layers == 1 ? ") is" : ") are") + " predicted to ";
  const int64_t limit = static_cast<int64_t>(kProxyMemoryAim * static_cast<double>(StartLimit(cell.device, options)));
  if (limit > 0 && run->predicted_memory_bytes > limit) {
    *over_memory = true;
    *note = even + "need " + FormatBytes(run->predicted_memory_bytes) + ", over the " + FormatBytes(limit) +
            " a proxy may plan (" + FormatNumber(kProxyMemoryAim * 100, 0) + "% of the limit, " +
            MemoryShare(cell.device, options) + ")" +
            (layers == 1 ? "; the embeddings and output alone do not fit" : "");
    return false;
  }
  if (measured_rates && options.cell_timeout_s > 0 && run->expected_duration_s > options.cell_timeout_s) {
    *note = even + "take " + FormatDuration(run->expected_duration_s) + ", over the wall-clock limit of " +
            FormatDuration(options.cell_timeout_s);
    return false;
  }
  run->argv = source.launch;
  run->argv.insert(run->argv.end(), overrides.begin(), overrides.end());
  return true;
}

// The proxies of a cell at one vocabulary (`vocab_divisor`): kProxyLayers, or kProxyFallbackLayers as the
// deeper where that is all that fits; none with `*note` saying why (PlanProxyRun) and `*over_memory` when
// what did not fit was the memory. Where the shallow one fits and no deeper one does for memory, `*alone`
// becomes the shallow with its real size, unless it holds one already (with more ids).
struct ShallowAlone {
  ProxyRun run;
  RealSize real;
};
std::vector<ProxyRun> PlanProxyDepths(const PlannedCell& cell, const CellSource& source, const Registry& registry,
                                      const MatrixOptions& options, const DeviceRates& rates, bool measured_rates,
                                      int64_t vocab_divisor, RealSize* real, std::string* note, bool* over_memory,
                                      std::optional<ShallowAlone>* alone) {
  ProxyRun shallow, deep;
  if (!PlanProxyRun(cell, source, registry, options, rates, measured_rates, kProxyLayers[0], vocab_divisor, &shallow, real,
                    note, over_memory)) {
    return {};
  }
  if (PlanProxyRun(cell, source, registry, options, rates, measured_rates, kProxyLayers[1], vocab_divisor, &deep, real,
                   note, over_memory)) {
    return {shallow, deep};
  }
  if (!*over_memory) return {};
  std::string deeper_note = *note;
  if (PlanProxyRun(cell, source, registry, options, rates, measured_rates, kProxyFallbackLayers, vocab_divisor, &deep, real,
                   note, over_memory)) {
    note->clear();
    return {shallow, deep};
  }
  if (*over_memory && !*alone) *alone = ShallowAlone{shallow, *real};
  *note = deeper_note;
  return {};
}

// The proxies of a cell: layers cut (PlanProxyDepths), or where those do not fit the memory, the vocabulary
// cut too by the smallest divisor up to kMaxVocabDivisor that fits, with a third proxy at the shallow depth
// and twice the divisor for the cost per id. Where no two depths fit at any of those, the shallow proxy alone
// with the most ids that fit, with `*note` saying so: it verifies the operations and extrapolates nothing.
// None with `*note` saying why (the whole vocabulary's reason, and that no cut fitted). `*real_vocab` is the
// config's ids when the vocabulary was cut.
std::vector<ProxyRun> PlanProxies(const PlannedCell& cell, const CellSource& source, const Registry& registry,
                                  const MatrixOptions& options, const DeviceRates& rates, bool measured_rates,
                                  RealSize* real, std::string* note) {
  bool over_memory = false;
  std::optional<ShallowAlone> alone;
  std::vector<ProxyRun> runs =
      PlanProxyDepths(cell, source, registry, options, rates, measured_rates, 1, real, note, &over_memory, &alone);
  if (!runs.empty() || !over_memory) return runs;
  auto shallow_alone = [&]() -> std::vector<ProxyRun> {
    *real = alone->real;
    const int64_t layers = alone->run.layers;
    *note = "only the proxy of " + std::to_string(layers) + " layer" + (layers == 1 ? "" : "s") + " (" +
            alone->run.cut + ") fits the memory here, so nothing is extrapolated";
    return {alone->run};
  };
  const std::string whole_vocabulary = *note;
  for (int64_t divisor = 2; divisor <= kMaxVocabDivisor; divisor *= 2) {
    std::string cut_note;
    runs = PlanProxyDepths(cell, source, registry, options, rates, measured_rates, divisor, real, &cut_note,
                           &over_memory, &alone);
    ProxyRun fewer_ids;
    RealSize same;
    if (!runs.empty() && PlanProxyRun(cell, source, registry, options, rates, measured_rates, kProxyLayers[0],
                                      divisor * 2, &fewer_ids, &same, &cut_note, &over_memory)) {
      runs.push_back(fewer_ids);
      note->clear();
      return runs;
    }
    if (!runs.empty() || !over_memory) {
      if (alone) return shallow_alone();
      const std::string why = cut_note.rfind("no proxy: ", 0) == 0 ? cut_note.substr(10) : cut_note;
      *note = whole_vocabulary + "; with its vocabulary cut by " + std::to_string(divisor) + ": " + why;
      real->vocab = 0;
      return {};
    }
  }
  if (alone) return shallow_alone();
  *note = whole_vocabulary + "; nor with its vocabulary cut by up to " + std::to_string(kMaxVocabDivisor);
  real->vocab = 0;
  return {};
}

// The numeric check's reference run of a cell that trains (ReferenceRun): the checked run's overrides (the
// cell's own, or its shallowest proxy's) with float32, the reference device and one step. None, with the note
// saying why, for a recipe without a loss, no reference device, or a reference the recipe refuses there or
// predicts over the memory limit.
ReferenceRun PlanReference(const PlannedCell& cell, const CellSource& source, const Registry& registry,
                           const std::vector<DeviceInfo>& devices, const MatrixOptions& options) {
  ReferenceRun ref;
  const RecipeSpec& recipe = *source.located.recipe;
  // A recipe that trains has a loss; one that generates from a prompt is checked by its first token (its runs
  // write the first token's logits and greedy tokens to the numeric probe, recipes/generate.cc).
  const bool trains = std::any_of(recipe.fields.begin(), recipe.fields.end(),
                                  [](const FieldSpec& f) { return f.name == "loss" || f.name == "prompt"; });
  if (!trains) {
    ref.note = "not checked: " + recipe.name + " trains no loss";
    return ref;
  }
  const DeviceInfo* device = nullptr;
  for (const DeviceInfo& d : devices) {
    if (device == nullptr && d.traits().numeric_reference) device = &d;
  }
  if (device == nullptr) {
    ref.note = "not checked: this machine has no device of a reference type (cpu)";
    return ref;
  }
  ref.device = device->id;
  const std::vector<std::string>& checked = cell.argv.empty() ? cell.proxies.front().argv : cell.argv;
  std::vector<std::string> overrides(checked.begin() + static_cast<std::ptrdiff_t>(source.launch.size()), checked.end());
  ref.dtype = source.dtype;
  ref.output_dir = cell.output_dir + "__reference";
  for (std::string& o : CellOverrides(recipe, device->id, 1, ref.output_dir)) overrides.push_back(std::move(o));
  overrides.push_back("dtype=fp32");
  StatusOr<Config> config = LoadResolvedConfig(source.located, overrides, &recipe, &registry);
  std::vector<Problem> problems;
  if (config.ok()) problems = ValidateConfig(*config, recipe, registry, device);
  if (!config.ok() || !problems.empty()) {
    ref.note = "not checked: the float32 reference on " + device->id + " is refused: " +
               (config.ok() ? problems.front().key + ": " + problems.front().message : config.status().message());
    return ref;
  }
  StatusOr<CellEstimate> estimate = recipe.Estimate(*config, registry, *device);
  const int64_t limit = StartLimit(*device, options);
  if (estimate.ok() && limit > 0 && estimate->peak_memory_bytes > limit) {
    ref.note = "not checked: the float32 reference on " + device->id + " is predicted to need " +
               FormatBytes(estimate->peak_memory_bytes) + ", over " + MemoryShare(*device, options);
    return ref;
  }
  ref.argv = source.launch;
  ref.argv.insert(ref.argv.end(), overrides.begin(), overrides.end());
  return ref;
}

// Whether --recipes and --configs select the built-in `config` of `recipe` (the one selection rule of
// CheckSelection and PlanCells). A run of user configs selects no built-in one.
bool Selected(const MatrixOptions& options, const RecipeSpec& recipe, const std::string& config) {
  if (!options.user_configs.empty()) return false;
  const bool recipe_selected = options.recipes.empty() || std::find(options.recipes.begin(), options.recipes.end(),
                                                                    recipe.name) != options.recipes.end();
  if (!recipe_selected) return false;
  if (options.config_globs.empty()) return true;
  return std::any_of(options.config_globs.begin(), options.config_globs.end(),
                     [&](const std::string& glob) { return MatchesGlob(glob, config); });
}

// A config the plan reads: every built-in one, selected or not (the unselected give the rates), and the
// user's.
struct PlanConfig {
  std::string name;
  std::string path;
  const RecipeSpec* recipe = nullptr;
  bool builtin = true;
  bool selected = false;
};

// The newest record per (config, column) in the run's journal, as support entries: what a user config has
// recorded (the matrix writes no block into a user's file). No journal: nothing recorded.
StatusOr<std::map<std::string, SupportEntries>> JournalEntries(const LoadedJournal& journal) {
  std::map<std::string, SupportEntries> entries;
  if (!journal.exists) return entries;
  if (!journal.status.ok()) return journal.status;
  for (const auto& [cell, record] : LatestByColumn(journal.records))
    entries[cell.first][cell.second] = SupportFromCell(record);
  return entries;
}

// Plans `cell`'s proxies (PlanProxies, at its column's rates) and records in its preset the real sizes they
// are cut from; returns their expected time in all, 0 with `*note` saying why where none fit.
double AddProxies(PlannedCell* cell, const CellSource& source, const Registry& registry, const MatrixOptions& options,
                  const std::map<std::string, DeviceRates>& rates, std::string* note) {
  auto rate = rates.find(cell->column);
  RealSize real;
  cell->proxies = PlanProxies(*cell, source, registry, options, rate == rates.end() ? DeviceRates() : rate->second,
                              rate != rates.end(), &real, note);
  cell->preset.real_layers = real.layers;
  cell->preset.real_vocab = real.vocab;
  return cell->ProxiesExpectedS();
}

// Plans `cell` to run its proxies instead of its own run (a cell too large or too slow for its device, or one
// whose run was stopped at the memory limit), max_steps each: false, with the reason in its preset, where none
// fit.
bool PlanProxiesInstead(PlannedCell* cell, const CellSource& source, const Registry& registry,
                        const MatrixOptions& options, const std::map<std::string, DeviceRates>& rates) {
  cell->argv.clear();
  cell->steps = options.max_steps;
  std::string note;
  const double proxies_s = AddProxies(cell, source, registry, options, rates, &note);
  cell->preset.proxy_note = note;
  if (cell->proxies.empty()) {
    if (!note.empty()) cell->preset.reason += "; " + note;
    return false;
  }
  cell->runnable = true;
  cell->expected_duration_s = proxies_s;
  return true;
}

// The numeric check's reference of `cell` (PlanReference) with its expected time: `recorded_s`, else that of
// the run it checks (the cell's own, or its shallowest proxy's where it runs them instead).
ReferenceRun PlanTimedReference(const PlannedCell& cell, const CellSource& source, const Registry& registry,
                                const std::vector<DeviceInfo>& devices, const MatrixOptions& options,
                                std::optional<double> recorded_s) {
  ReferenceRun ref = PlanReference(cell, source, registry, devices, options);
  if (ref.argv.empty()) return ref;
  const double checked_s = cell.argv.empty() ? cell.proxies.front().expected_duration_s
                                             : cell.expected_duration_s - cell.ProxiesExpectedS();
  ref.expected_duration_s = recorded_s.value_or(checked_s);
  return ref;
}

}  // namespace

Status CheckSelection(const Registry& registry, const MatrixOptions& options) {
  for (const std::string& r : options.recipes) {
    if (registry.FindRecipe(r) == nullptr) {
      std::string hint = ClosestMatch(r, registry.RecipeNames());
      return Status::InvalidArgument("--recipes: unknown recipe '" + r + "'" +
                                     (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
  }
  if (!options.user_configs.empty()) {
    if (!options.config_globs.empty()) {
      return Status::InvalidArgument(
          "--configs mixes built-in names (" + JoinStrings(options.config_globs, ", ") + ") with config files (" +
          options.user_configs.front().path + (options.user_configs.size() > 1 ? ", ..." : "") +
          "): built-in configs record into the checkout's journal and their own files, yours into a journal of "
          "your own; fix: run them separately");
    }
    for (const UserConfig& c : options.user_configs) {
      if (registry.FindRecipe(c.recipe) == nullptr) {
        return Status::InvalidArgument(c.path + ": recipe '" + c.recipe + "' is not implemented");
      }
    }
    return Status::OK();
  }
  for (const RecipeSpec& recipe : registry.recipes()) {
    for (const std::string& name : recipe.configs) {
      if (Selected(options, recipe, name)) return Status::OK();
    }
  }
  // A selection of nothing is a mistake (a typo in the pattern), never a run that records nothing.
  return Status::InvalidArgument(
      "--configs '" + JoinStrings(options.config_globs, ",") + "'" +
      (options.recipes.empty() ? "" : " with --recipes " + JoinStrings(options.recipes, ",")) +
      " selects no built-in config; fix: `tune ls` lists the configs (a pattern like 'llama3_2/*' or '*lora*'; * "
      "stands for any characters)");
}

namespace {

// The devices --devices selects, each of its words naming an available device.
StatusOr<std::vector<const DeviceInfo*>> ChosenDevices(const std::vector<DeviceInfo>& devices,
                                                       const MatrixOptions& options) {
  std::vector<const DeviceInfo*> chosen;
  for (const DeviceInfo& d : devices) {
    if (DeviceSelected(d, options.devices)) chosen.push_back(&d);
  }
  for (const std::string& w : options.devices) {
    bool found = false;
    for (const DeviceInfo& d : devices) found = found || w == d.id || w == d.type;
    if (!found) {
      std::vector<std::string> ids;
      for (const DeviceInfo& d : devices) ids.push_back(d.id);
      return Status::Unavailable("--devices: device '" + w + "' is not available on this machine (available: " +
                                 JoinStrings(ids, ", ") + ")");
    }
  }
  return chosen;
}

// Every built-in config (selected or not) and the user's.
std::vector<PlanConfig> PlanConfigs(const Registry& registry, const MatrixOptions& options) {
  std::vector<PlanConfig> configs;
  for (const RecipeSpec& recipe : registry.recipes()) {
    for (const std::string& name : recipe.configs) {
      configs.push_back({name, BuiltinConfigPath(name), &recipe, true, Selected(options, recipe, name)});
    }
  }
  for (const UserConfig& user : options.user_configs) {
    configs.push_back({user.name, user.path, registry.FindRecipe(user.recipe), false, true});
  }
  return configs;
}

// A new cell of `config` on `device`, as its own run would start: the preset record and how it launches.
CellDraft NewDraft(const PlanConfig& planned, const LocatedConfig& located, const std::string& hash,
                   const DeviceInfo& device, const MatrixOptions& options) {
  const RecipeSpec& recipe = *planned.recipe;
  CellDraft d;
  d.selected = planned.selected;
  d.source = CellSource{located, {options.tune_path, "run"}};
  for (const std::string& a : recipe.CellLaunchArgs(device.traits())) d.source.launch.push_back(a);
  d.source.launch.insert(d.source.launch.end(), {recipe.name, "--config", located.name, "--force", "--allow-stand-ins"});
  PlannedCell& cell = d.cell;
  cell.key = {planned.name, device.id};
  cell.recipe = recipe.name;
  cell.config_path = located.path;
  cell.device = device;
  cell.device_type = device.type;
  cell.column = ColumnKey({device.type, device.type == "cpu" ? options.cpu_class : "", options.torch_version});
  cell.output_dir = options.work_dir + "/" + Slug(planned.name) + "__" + Slug(device.id);
  cell.steps = options.max_steps;
  CellResult& r = cell.preset;
  r.key = cell.key;
  r.recipe = recipe.name;
  r.device_type = cell.device_type;
  r.config_hash = hash;
  r.device_memory_bytes = device.total_memory_bytes;
  r.world_size = recipe.CellRanks(device.traits());
  return d;
}

// The recipe's checks of the cell's config for its device. Invalid as written: with every problem's repair
// applied (options.repairs), the repaired config is planned instead (and RepairedResult records it as this
// invalid cell with its repair); returns the problems left.
std::vector<Problem> ValidateOrRepair(CellDraft* d, const std::vector<std::string>& overrides,
                                      const Registry& registry, const MatrixOptions& options, Config* config) {
  const RecipeSpec& recipe = *d->source.located.recipe;
  std::vector<Problem> problems = ValidateConfig(*config, recipe, registry, &d->cell.device);
  if (problems.empty()) return problems;
  CellResult& r = d->cell.preset;
  r.status = CellStatus::kInvalid;
  for (const Problem& p : problems) r.problems.push_back(p.key + ": " + p.message);
  r.reason = r.problems.front() + (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : "");
  std::vector<std::string> repair = options.repairs ? RepairOf(problems) : std::vector<std::string>();
  if (repair.empty()) return problems;
  std::vector<std::string> repaired_overrides = repair;
  repaired_overrides.insert(repaired_overrides.end(), overrides.begin(), overrides.end());
  StatusOr<Config> repaired = LoadResolvedConfig(d->source.located, repaired_overrides, &recipe, &registry);
  std::vector<Problem> left;
  if (repaired.ok()) left = ValidateConfig(*repaired, recipe, registry, &d->cell.device);
  if (!repaired.ok() || !left.empty()) {
    r.reason += "; the repair (" + JoinStrings(repair, " ") + ") leaves it invalid: " +
                (repaired.ok() ? left.front().key + ": " + left.front().message : repaired.status().message());
    return problems;
  }
  d->cell.repair = repair;
  d->cell.written = r;
  d->source.prefix = repair;
  *config = std::move(repaired).value();
  r.status = CellStatus::kFails;
  r.problems.clear();
  r.reason.clear();
  return {};
}

// What the cell's record in its column says, read into the draft; the peak it measured (0: none).
int64_t ReadRecorded(const SupportEntry& entry, const std::string& hash, CellDraft* d, std::optional<CellStatus>* status) {
  // A repaired cell's timings are its repaired config's, which is what runs again.
  *status = ParseCellStatus(entry.repaired_status.empty() ? entry.status : entry.repaired_status);
  if (*status && CellStarted(**status) && entry.wall_time_s) d->recorded_s = entry.wall_time_s;
  if (*status == CellStatus::kRuns) d->recorded_step_s = entry.step_time_s;
  if (d->recorded_s && d->recorded_step_s) d->recorded_startup_s = entry.startup_time_s;
  d->recorded_too_slow = *status == CellStatus::kTooSlow;
  d->recorded_reference_s = entry.reference_time_s;
  if (entry.config_hash == hash) d->cell.recorded_at = entry.verified_at;
  return entry.peak_memory_gib ? static_cast<int64_t>(*entry.peak_memory_gib * static_cast<double>(int64_t{1} << 30)) : 0;
}

// The cell's memory judgement; a valid cell is then too_large, or runnable with its argv up to the step
// overrides (an invalid one is recorded as validated).
void JudgeMemory(const SupportEntry* entry, int64_t recorded_peak, std::optional<CellStatus> status, bool valid,
                 const MatrixOptions& options, CellDraft* d) {
  PlannedCell& cell = d->cell;
  CellResult& r = cell.preset;
  const DeviceInfo& device = cell.device;
  // A cell measured here before is judged by the larger of its prediction and its measured peak: the
  // estimate assumes typical sequence lengths, and a config's data may be longer.
  // A cell whose proxies ran (and that never ran in full) is judged by their extrapolation instead of the
  // recipe's estimate: a measurement of the config's own operations, sequences and allocator at two depths.
  MemoryJudgement& judged = cell.memory;
  judged.bytes = std::max(cell.predicted_memory_bytes, recorded_peak);
  judged.basis = judged.bytes > cell.predicted_memory_bytes ? MemoryJudgement::Basis::kMeasured
                                                            : MemoryJudgement::Basis::kPredicted;
  if (recorded_peak == 0 && entry != nullptr && entry->extrapolated_peak_memory_gib) {
    judged.bytes = static_cast<int64_t>(*entry->extrapolated_peak_memory_gib * static_cast<double>(int64_t{1} << 30));
    judged.basis = MemoryJudgement::Basis::kExtrapolated;
  }
  judged.limit_bytes = StartLimit(device, options);
  judged.limit = MemoryShare(device, options);
  // A run stopped here at the memory limit recorded the resident memory it was stopped at, at least the
  // limit then: it is too large for any limit up to that, whatever the prediction says (the tolerance
  // above the limit is the prediction's, not a measured stop's). A larger device's limit tries it again.
  const bool stopped_at_limit =
      status == CellStatus::kTooLarge && recorded_peak > 0 && recorded_peak >= MemoryLimit(device, options);
  if (!valid) return;
  if (stopped_at_limit || (judged.limit_bytes > 0 && judged.bytes > judged.limit_bytes)) {
    r.status = CellStatus::kTooLarge;
    r.reason = stopped_at_limit ? "its last run here was stopped at the memory limit, at " +
                                      FormatBytes(recorded_peak) + " resident, over " + judged.limit
                                : TooLargeReason(judged, judged.bytes);
    // The stop stays the cell's evidence in the record its proxies make, or the next plan would judge it
    // by their extrapolation alone and try the run that was stopped again.
    if (stopped_at_limit) r.peak_memory_bytes = recorded_peak;
    return;
  }
  judged = MemoryJudgement();
  cell.runnable = true;
  // --force: the cell runs even when the config's metadata records an earlier failure here;
  // --allow-stand-ins: inputs this machine lacks are replaced by shipped samples, and the cell says so.
  // The overrides follow once the cell's steps are chosen (PredictTime).
  cell.argv = d->source.launch;
  cell.argv.insert(cell.argv.end(), d->source.prefix.begin(), d->source.prefix.end());
}

// One cell of `planned` on `device`: validated (or repaired), estimated, and judged against the memory.
StatusOr<CellDraft> DraftCell(const PlanConfig& planned, const LocatedConfig& located, const std::string& hash,
                              const SupportEntries& recorded, const DeviceInfo& device, const Registry& registry,
                              const MatrixOptions& options) {
  const RecipeSpec& recipe = *planned.recipe;
  CellDraft d = NewDraft(planned, located, hash, device, options);
  PlannedCell& cell = d.cell;
  std::vector<std::string> overrides = CellOverrides(recipe, device.id, cell.steps, cell.output_dir);
  StatusOr<Config> config = LoadResolvedConfig(located, overrides, &recipe, &registry);
  if (!config.ok()) return config.status().WithContext("planning " + planned.name);
  const std::vector<Problem> problems = ValidateOrRepair(&d, overrides, registry, options, &*config);
  // The proxies must train the same batches, or their difference is the data's, not the layers'; the
  // numeric check's reference the same batch from the same weights.
  if (config->Find("seed").IsDefined() && config->IsNull("seed")) d.source.prefix.push_back("seed=0");
  if (StatusOr<std::string> dtype = config->GetString("dtype", "fp32"); dtype.ok()) d.source.dtype = *dtype;
  // The recipe's own prediction; a config it cannot estimate (its problems are reported by validation
  // above, an estimate's own failure is no verdict) predicts nothing and is planned as free work.
  StatusOr<CellEstimate> estimate = recipe.Estimate(*config, registry, device);
  if (estimate.ok()) {
    cell.predicted_memory_bytes = estimate->peak_memory_bytes;
    d.work = estimate->work;
    d.parameters = static_cast<double>(estimate->parameters);
  }
  cell.preset.predicted_memory_bytes = cell.predicted_memory_bytes;
  // The wall time of the cell's last started run here; a cell never started here is estimated.
  auto entry = recorded.find(cell.column);
  std::optional<CellStatus> status;
  const int64_t recorded_peak = entry != recorded.end() ? ReadRecorded(entry->second, hash, &d, &status) : 0;
  JudgeMemory(entry != recorded.end() ? &entry->second : nullptr, recorded_peak, status, problems.empty(), options,
              &d);
  return d;
}

// Every cell of every planned config on every chosen device.
StatusOr<std::vector<CellDraft>> DraftCells(const std::vector<PlanConfig>& configs,
                                            const std::vector<const DeviceInfo*>& chosen, const Registry& registry,
                                            const MatrixOptions& options, const LoadedJournal* journal) {
  std::map<std::string, SupportEntries> journaled;  // a user config's measurements are in the run's journal
  if (!options.user_configs.empty()) {
    StatusOr<std::map<std::string, SupportEntries>> entries =
        JournalEntries(journal != nullptr ? *journal : LoadJournal(options.journal_path));
    if (!entries.ok()) return entries.status();
    journaled = std::move(entries).value();
  }
  std::vector<CellDraft> drafts;
  for (const PlanConfig& planned : configs) {
    LocatedConfig located;
    located.name = planned.builtin ? planned.name : planned.path;
    located.path = planned.path;
    located.builtin = planned.builtin;
    located.recipe = planned.recipe;
    StatusOr<std::string> text = ReadFile(located.path, ConfigInput());
    if (!text.ok()) return text.status();
    const std::string hash = ConfigHash(*text);
    // A built-in config's measurements are in its block; a user config's in the run's journal.
    StatusOr<SupportEntries> recorded = planned.builtin ? ReadSupportEntries(*text, located.path)
                                                        : StatusOr<SupportEntries>(journaled[planned.name]);
    if (!recorded.ok()) return recorded.status();
    for (const DeviceInfo* device : chosen) {
      StatusOr<CellDraft> d = DraftCell(planned, located, hash, *recorded, *device, registry, options);
      if (!d.ok()) return d.status();
      drafts.push_back(std::move(d).value());
    }
  }
  return drafts;
}

// The budget judges only predictions made from this column's own measurements, with a band around it so that
// a cell does not flip between runs and too_slow from one run to the next: a measured cell stays in until it
// took kBudgetBand times the budget, a cell recorded too_slow stays out until it is predicted under the budget
// divided by kBudgetBand. True, with the cell recorded too_slow, when it is over.
bool OverTheBudget(CellDraft* d, bool measured_type, const MatrixOptions& options) {
  PlannedCell& cell = d->cell;
  double limit = options.cell_budget_s;
  if (d->recorded_s) limit *= kBudgetBand;
  if (d->recorded_too_slow) limit /= kBudgetBand;
  const bool predicted = d->recorded_s || measured_type;
  if (!(options.cell_budget_s > 0 && predicted && cell.expected_duration_s > limit)) return false;
  CellResult& slow = cell.preset;
  slow.status = CellStatus::kTooSlow;
  slow.reason = "predicted to take " + FormatDuration(cell.expected_duration_s) + " on " + cell.device.id +
                (d->recorded_s ? " (its last recorded run)"
                               : " (its size and work at the rates measured on " + cell.column + ")") +
                ", over the cell budget of " + FormatDuration(options.cell_budget_s) +
                "; run it with: tune-matrix cell " +
                (options.user_configs.empty() ? cell.key.config : cell.config_path) + " --device " + cell.device.id;
  cell.runnable = false;
  cell.argv.clear();
  cell.expected_duration_s = 0;
  return true;
}

// A runnable cell's expected time and steps, from its record here, else its column's rates; too_slow when
// that is over the budget; then the overrides that end its argv.
void PredictTime(CellDraft* d, const std::map<std::string, DeviceRates>& rates, const Registry& registry,
                 const MatrixOptions& options) {
  PlannedCell& cell = d->cell;
  auto rate = rates.find(cell.column);
  const bool measured_type = rate != rates.end();
  const DeviceRates r = measured_type ? rate->second : DeviceRates();
  // Start-up and step time: the cell's record here, else the column's rates; judged at max_steps.
  std::optional<double> startup_s, step_s;
  if (d->recorded_startup_s) {
    startup_s = d->recorded_startup_s;
    step_s = d->recorded_step_s;
  } else if (!d->recorded_s && measured_type) {
    startup_s = r.Startup(d->parameters);
    step_s = r.Step(d->work);
  }
  if (startup_s && step_s) {
    cell.expected_duration_s = *startup_s + options.max_steps * *step_s;
  } else {
    cell.expected_duration_s = d->recorded_s ? *d->recorded_s : r.Predict(d->parameters, d->work, options.max_steps);
  }
  if (OverTheBudget(d, measured_type, options)) return;
  if (startup_s && step_s) {
    cell.steps = CellSteps(*startup_s, *step_s, options);
    cell.expected_duration_s = *startup_s + cell.steps * *step_s;
  }
  const RecipeSpec& recipe = *registry.FindRecipe(cell.recipe);
  for (std::string& o : CellOverrides(recipe, cell.device.id, cell.steps, cell.output_dir)) {
    cell.argv.push_back(std::move(o));
  }
}

// A selected cell's proxies: a cell too large or too slow for its device runs them instead, where they fit
// (the note says why not); with --calibrate, a cell that runs in full runs them first, where it has any.
void PlanProxiesOf(CellDraft* d, const std::map<std::string, DeviceRates>& rates, const Registry& registry,
                   const MatrixOptions& options) {
  PlannedCell& cell = d->cell;
  const CellStatus status = cell.preset.status;
  if (options.proxies && !cell.runnable && (status == CellStatus::kTooLarge || status == CellStatus::kTooSlow)) {
    PlanProxiesInstead(&cell, d->source, registry, options, rates);
    return;
  }
  if (!options.calibrate || !cell.runnable) return;
  std::string note;
  const double proxies_s = AddProxies(&cell, d->source, registry, options, rates, &note);
  // One depth alone extrapolates nothing to compare with the cell's own run: no calibration to make.
  if (cell.proxies.size() < 2) {
    cell.proxies.clear();
    cell.preset.real_layers = cell.preset.real_vocab = 0;
  } else {
    cell.expected_duration_s += proxies_s;
  }
}

// What a host cell that runs in full goes on with if its run is stopped at the memory limit: its proxies,
// with their own reference, as a cell predicted too large runs them. The scheduler replaces the copy's
// preset with the stopped run's record, keeping the real sizes its proxies are cut from.
void PlanStopFallback(CellDraft* d, const std::map<std::string, DeviceRates>& rates, const Registry& registry,
                      const std::vector<DeviceInfo>& devices, const MatrixOptions& options) {
  PlannedCell& cell = d->cell;
  if (!cell.runnable || cell.argv.empty() || !cell.proxies.empty() || !cell.device.traits().HostMemory()) return;
  PlannedCell stopped = cell;
  stopped.reference = ReferenceRun();
  if (!PlanProxiesInstead(&stopped, d->source, registry, options, rates)) return;
  if (options.numeric_check) {
    stopped.reference = PlanTimedReference(stopped, d->source, registry, devices, options, std::nullopt);
  }
  cell.if_stopped_at_memory_limit = std::make_shared<const PlannedCell>(std::move(stopped));
}

// The selected cells of this shard, in the order they start.
std::vector<PlannedCell> SelectedInOrder(std::vector<CellDraft>* drafts, const MatrixOptions& options) {
  std::vector<PlannedCell> cells;
  for (CellDraft& d : *drafts) {
    if (d.selected) cells.push_back(std::move(d.cell));
  }
  if (options.shard_count > 1) {
    std::vector<ShardItem> items;
    for (const PlannedCell& c : cells) items.push_back({c.key, c.ExpectedTotalS()});
    std::vector<int> shard = AssignShards(items, options.shard_count);
    std::vector<PlannedCell> mine;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (shard[i] == options.shard_index) mine.push_back(std::move(cells[i]));
    }
    cells = std::move(mine);
  }
  if (options.time_limit_s > 0) DeferOverTheTimeLimit(options.time_limit_s, &cells);
  std::stable_sort(cells.begin(), cells.end(), [](const PlannedCell& a, const PlannedCell& b) {
    if (a.runnable != b.runnable) return !a.runnable;  // recorded-without-running cells first: they are free
    return a.expected_duration_s < b.expected_duration_s;
  });
  return cells;
}

}  // namespace

// The plan's passes, in order: select the devices and configs; draft each cell (validate or repair, estimate,
// judge its memory); predict the runnable cells' times from their records or their columns' rates (too_slow
// over the budget); proxies, numeric references and the proxies a stopped run goes on with, for the selected
// cells; then this shard's cells, deferred by the time limit, in the order they start.
StatusOr<std::vector<PlannedCell>> PlanCells(const Registry& registry, const std::vector<DeviceInfo>& devices,
                                             const MatrixOptions& options, const LoadedJournal* journal) {
  TM_RETURN_IF_ERROR(CheckSelection(registry, options));
  StatusOr<std::vector<const DeviceInfo*>> chosen = ChosenDevices(devices, options);
  if (!chosen.ok()) return chosen.status();
  StatusOr<std::vector<CellDraft>> drafts = DraftCells(PlanConfigs(registry, options), *chosen, registry, options, journal);
  if (!drafts.ok()) return drafts.status();
  // A cell never measured here is predicted from the cells of its column that were:
  //   wall time = fixed start-up + start-up per parameter x parameters + steps x step time per work x work.
  const std::map<std::string, DeviceRates> rates = FitDeviceRates(*drafts, options.max_steps);
  for (CellDraft& d : *drafts) {
    if (d.cell.runnable) PredictTime(&d, rates, registry, options);  // a cell recorded from the plan takes no time
  }
  for (CellDraft& d : *drafts) {
    if (d.selected) PlanProxiesOf(&d, rates, registry, options);
  }
  // The numeric check's reference of each selected cell that starts (one more child, after the cell's own).
  for (CellDraft& d : *drafts) {
    if (!options.numeric_check || !d.selected || !d.cell.runnable) continue;
    d.cell.reference = PlanTimedReference(d.cell, d.source, registry, devices, options, d.recorded_reference_s);
  }
  for (CellDraft& d : *drafts) {
    if (options.proxies && d.selected) PlanStopFallback(&d, rates, registry, devices, options);
  }
  return SelectedInOrder(&*drafts, options);
}

}  // namespace tmx::matrix
