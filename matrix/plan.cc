#include "matrix/plan.h"

#include <fnmatch.h>

#include <algorithm>
#include <optional>

#include "harness/config_store.h"
#include "harness/file_util.h"
#include "harness/text.h"
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

std::vector<std::string> CellOverrides(const RecipeSpec& recipe, const std::string& device,
                                       const MatrixOptions& options, const std::string& output_dir) {
  std::vector<std::string> overrides = {"device=" + device};
  if (recipe.cell_overrides) {
    for (std::string& o : recipe.cell_overrides(options.max_steps)) overrides.push_back(std::move(o));
  }
  overrides.push_back("output_dir=" + output_dir);
  return overrides;
}

bool MatchesGlob(const std::string& pattern, const std::string& name) {
  return pattern.empty() || ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

StatusOr<std::vector<PlannedCell>> PlanCells(const Registry& registry, const std::vector<DeviceInfo>& devices,
                                             const MatrixOptions& options) {
  for (const std::string& r : options.recipes) {
    if (registry.FindRecipe(r) == nullptr) {
      std::string hint = ClosestMatch(r, registry.RecipeNames());
      return Status::InvalidArgument("--recipes: unknown recipe '" + r + "'" +
                                     (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
  }
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

  std::vector<PlannedCell> cells;
  std::vector<double> work;                          // training work per step of each cell (CellEstimate::work)
  std::vector<std::optional<double>> recorded_s;     // recorded wall time per cell
  for (const RecipeSpec& recipe : registry.recipes()) {
    if (!options.recipes.empty() &&
        std::find(options.recipes.begin(), options.recipes.end(), recipe.name) == options.recipes.end()) {
      continue;
    }
    for (const std::string& name : recipe.configs) {
      if (!MatchesGlob(options.configs_glob, name)) continue;
      LocatedConfig located;
      located.name = name;
      located.path = BuiltinConfigPath(name);
      located.builtin = true;
      located.recipe = &recipe;
      StatusOr<std::string> text = ReadFile(located.path);
      if (!text.ok()) return text.status();
      std::string hash = ConfigHash(*text);
      StatusOr<SupportEntries> recorded = ReadSupportEntries(*text, located.path);
      if (!recorded.ok()) return recorded.status();
      for (const DeviceInfo* device : chosen) {
        PlannedCell cell;
        cell.key = {name, device->id};
        cell.recipe = recipe.name;
        cell.config_path = located.path;
        cell.device = *device;
        cell.device_type = device->type;
        cell.output_dir = options.work_dir + "/" + Slug(name) + "__" + Slug(device->id);
        std::vector<std::string> overrides = CellOverrides(recipe, device->id, options, cell.output_dir);
        StatusOr<Config> config = LoadResolvedConfig(located, overrides, &recipe, &registry);
        if (!config.ok()) return config.status().WithContext("planning " + name);
        CellResult& r = cell.preset;
        r.key = cell.key;
        r.recipe = recipe.name;
        r.device_type = cell.device_type;
        r.config_hash = hash;
        r.device_memory_bytes = device->total_memory_bytes;
        // The recipe's own prediction; a config it cannot estimate (its problems are reported by validation
        // below) predicts nothing and is planned as free work.
        StatusOr<CellEstimate> estimate =
            recipe.estimate ? recipe.estimate(*config, registry, *device) : StatusOr<CellEstimate>(CellEstimate());
        if (estimate.ok()) {
          cell.predicted_memory_bytes = estimate->peak_memory_bytes;
          work.push_back(estimate->work * options.max_steps);
        } else {
          work.push_back(0);
        }
        r.predicted_memory_bytes = cell.predicted_memory_bytes;
        // A cell recorded as never started (invalid, too_large) takes no time; one never measured is estimated.
        auto entry = recorded->find(cell.device_type);
        std::optional<double> seconds;
        if (entry != recorded->end()) {
          std::optional<CellStatus> status = ParseCellStatus(entry->second.status);
          seconds = status && CellStarted(*status) ? entry->second.wall_time_s : 0.0;
        }
        recorded_s.push_back(seconds);

        std::vector<Problem> problems = ValidateConfig(*config, recipe, registry, device);
        if (!problems.empty()) {
          r.status = CellStatus::kInvalid;
          for (const Problem& p : problems) r.problems.push_back(p.key + ": " + p.message);
          r.reason = r.problems.front() + (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : "");
        } else if (device->total_memory_bytes > 0 &&
                   cell.predicted_memory_bytes > static_cast<int64_t>(options.memory_fraction *
                                                                      static_cast<double>(device->total_memory_bytes))) {
          r.status = CellStatus::kTooLarge;
          r.reason = "predicted peak memory " + FormatBytes(cell.predicted_memory_bytes) + " exceeds " +
                     std::to_string(static_cast<int>(options.memory_fraction * 100)) + "% of " + device->id + "'s " +
                     FormatBytes(device->total_memory_bytes);
        } else {
          cell.runnable = true;
          // --force: the cell runs even when the config's metadata records an earlier failure here;
          // --allow-stand-ins: inputs this machine lacks are replaced by shipped samples, and the cell says so.
          cell.argv = {options.tune_path, "run", recipe.name, "--config", name, "--force", "--allow-stand-ins"};
          for (const std::string& o : overrides) cell.argv.push_back(o);
        }
        cells.push_back(std::move(cell));
      }
    }
  }
  // Cells never measured get the seconds per unit of work of the cells that were.
  double known_s = 0, known_work = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (recorded_s[i] && *recorded_s[i] > 0) {
      known_s += *recorded_s[i];
      known_work += work[i];
    }
  }
  double seconds_per_work = known_work > 0 ? known_s / known_work : 1e-7;
  std::vector<ShardItem> items;
  for (size_t i = 0; i < cells.size(); ++i) {
    cells[i].expected_duration_s = recorded_s[i] ? *recorded_s[i] : work[i] * seconds_per_work;
    items.push_back({cells[i].key, cells[i].expected_duration_s});
  }
  if (options.shard_count > 1) {
    std::vector<int> shard = AssignShards(items, options.shard_count);
    std::vector<PlannedCell> mine;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (shard[i] == options.shard_index) mine.push_back(std::move(cells[i]));
    }
    cells = std::move(mine);
  }
  std::stable_sort(cells.begin(), cells.end(), [](const PlannedCell& a, const PlannedCell& b) {
    if (a.runnable != b.runnable) return !a.runnable;  // recorded-without-running cells first: they are free
    return a.expected_duration_s < b.expected_duration_s;
  });
  return cells;
}

}  // namespace tmx::matrix
