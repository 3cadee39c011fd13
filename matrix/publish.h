// Publishing results: the newest journal record of each cell is written back into its config's metadata
// block, then reports/SUPPORT.md and reports/support.json are regenerated from every config's metadata.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "harness/registry.h"
#include "matrix/cell.h"
#include "matrix/support_block.h"

namespace tmx::matrix {

// For each config with records, per device type the newest record (see Supersedes) becomes that device
// type's entry, unless the entry there was verified later; device types without records keep their
// entries. Every config is rendered before any is written; unchanged files are not rewritten.
Status WriteBackResults(const Registry& registry, const std::vector<CellResult>& records, std::ostream& log);

// A generated report: its file name in the reports folder and its text.
struct GeneratedReport {
  std::string name;  // "SUPPORT.md", "support.json"
  std::string text;
};

// Reads every built-in config's block, sorted by config name. A damaged block fails with its file and line.
StatusOr<std::vector<ConfigSupport>> ReadBuiltinClaims(const Registry& registry);

// SUPPORT.md and support.json rendered from the configs' metadata.
std::vector<GeneratedReport> RenderReports(const std::vector<ConfigSupport>& configs);
// Reads every built-in config's metadata and writes <reports_dir>/SUPPORT.md and support.json atomically.
Status WriteReports(const Registry& registry, const std::string& reports_dir);

// WriteBackResults, then WriteReports into `reports_dir` (made first, so a folder that cannot be made stops
// it before any config changes), logging what was written.
Status PublishResults(const Registry& registry, const std::vector<CellResult>& records, const std::string& reports_dir,
                      std::ostream& log);

}  // namespace tmx::matrix
