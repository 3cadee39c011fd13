// A user's own configs in the matrix: `tune-matrix run|plan|cell` take config files and folders as well as
// built-in names. Their cells run exactly as built-in ones do, but their records go to a journal and
// reports of the user's choosing (by default under matrix-results/), never into the built-in configs, the
// checkout's journal or its reports.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "harness/registry.h"

namespace tmx::matrix {

// One config file of the user's.
struct UserConfig {
  // The name its cells and records carry: the file's name without .yaml for a file given by itself, its path
  // inside the folder without .yaml for a file found in a folder given ("team/8B_lora"). Plain names only
  // ([A-Za-z0-9._-] per part), since the history keeps a file per config and device type.
  std::string name;
  std::string path;    // the file, as given or found
  std::string recipe;  // the recipe its cells run (see ResolveUserConfigs)
};

// Where a run of user configs keeps its journal, reports and cell folders unless told otherwise.
inline constexpr char kUserResultsDir[] = "matrix-results";

// Whether a --configs item names files rather than built-in configs: a path ending in .yaml or .yml, or an
// existing folder. Built-in names and patterns ("llama3_2/*") have neither.
bool IsConfigPath(const std::string& item);

// The items of a --configs list: split at commas, except that pieces whose joining with commas names an existing
// file or folder stay one item ("runs/a,b/mine.yaml" is one path where that file exists; it used to become
// "runs/a" and "b/mine.yaml"). The longest such run wins; other pieces stand alone.
std::vector<std::string> SplitConfigsList(const std::string& list);

// The user configs `items` name (each IsConfigPath): a file itself, or every .yaml under a folder (sub-folders
// too, not through symbolic links). A config's recipe is the one its leading comment names (`# tune run
// <recipe> --config ...`, as torchtune's configs and `tune cp`'s copies say) or that torchtune's registry
// lists a config of its name under; a file naming none takes the recipe when `recipes` (--recipes) names
// exactly one. With `recipes` given, configs of other recipes are left out.
// Errors (InvalidArgument, naming the file and the fix): a missing file, a file naming no recipe (or one
// tune-matrix does not implement), a name with other characters, two files with one name, nothing selected.
// In a folder, files that name no recipe or an unimplemented one are left out with a line in `warnings`.
StatusOr<std::vector<UserConfig>> ResolveUserConfigs(const Registry& registry, const std::vector<std::string>& items,
                                                     const std::vector<std::string>& recipes,
                                                     std::vector<std::string>* warnings);

// InvalidArgument when a run of user configs would write into the checkout's own records: `journal_path` (or
// its lock), `reports_dir` (its history and reports), or anything that exists below `reports_dir`, resolving
// anywhere inside the checkout's reports/ or configs/ (base/folder_guard.h: real paths, so a symbolic link to
// the committed journal or `--journal reports/history/<config>/cpu.jsonl` is refused, not only the folders
// themselves).
Status CheckUserDestinations(const std::string& journal_path, const std::string& reports_dir);

}  // namespace tmx::matrix
