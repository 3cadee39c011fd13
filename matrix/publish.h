// Publishing results: the newest journal record of each cell is written back into its config's metadata
// block, then reports/SUPPORT.md and reports/support.json are regenerated from every config's metadata.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "harness/registry.h"
#include "matrix/cell.h"

namespace tmx::matrix {

// For each config with records, per device type the newest record (by verified_at) becomes that device
// type's entry; device types without records keep their entries. Unchanged files are not rewritten.
Status WriteBackResults(const Registry& registry, const std::vector<CellResult>& records, std::ostream& log);

// A generated report: its file name in the reports folder and its text.
struct GeneratedReport {
  std::string name;  // "SUPPORT.md", "support.json"
  std::string text;
};

// SUPPORT.md and support.json rendered from every built-in config's metadata.
StatusOr<std::vector<GeneratedReport>> RenderReports(const Registry& registry);

// Reads every built-in config's metadata and writes <reports_dir>/SUPPORT.md and support.json atomically.
Status WriteReports(const Registry& registry, const std::string& reports_dir);

}  // namespace tmx::matrix
