// Publishing results: every journal record is added to the history (history.h), the newest record of each
// cell is written back into its config's metadata block, then reports/SUPPORT.md, reports/support.json and
// reports/index.html are regenerated from every config's metadata and the history.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "harness/registry.h"
#include "matrix/cell.h"
#include "matrix/history.h"
#include "matrix/report.h"
#include "matrix/support_block.h"

namespace tmx::matrix {

// For each config with records, per device type the newest record (see Supersedes) becomes that device
// type's entry, unless the entry there was verified later; device types without records keep their
// entries. Every config is rendered before any is written; unchanged files are not rewritten.
Status WriteBackResults(const Registry& registry, const std::vector<CellResult>& records, std::ostream& log);

// Adds the records of built-in configs to the history under `reports_dir` (records of other configs have no
// place there), logging what was added.
Status RecordHistory(const Registry& registry, const std::vector<CellResult>& records, const std::string& reports_dir,
                     std::ostream& log);

// One generated report: its file in the reports folder and the reporter that writes it. ReportFiles() is
// the one list of them: rendering, writing, checking, log lines and help texts read it.
struct ReportFile {
  const char* file;  // "SUPPORT.md"
  std::unique_ptr<SupportReporter> (*reporter)(const History& history);
};
// SUPPORT.md, support.json, index.html.
const std::vector<ReportFile>& ReportFiles();
// The report files as a list for messages, each name after `prefix`, the last two joined by `conjunction`
// (by ", " when it is empty): ReportFileList("reports/", "and") is "reports/SUPPORT.md, reports/support.json
// and reports/index.html".
std::string ReportFileList(const std::string& prefix, const std::string& conjunction);

// A generated report: its file name in the reports folder and its text.
struct GeneratedReport {
  std::string name;  // a ReportFile's file
  std::string text;
};

// Reads every built-in config's block, sorted by config name. A damaged block fails with its file and line.
StatusOr<std::vector<ConfigSupport>> ReadBuiltinClaims(const Registry& registry);

// SUPPORT.md and support.json rendered from the configs' metadata, and index.html from it and `history`.
std::vector<GeneratedReport> RenderReports(const std::vector<ConfigSupport>& configs, const History& history);
// Reads every built-in config's metadata and their history under `reports_dir`, and writes
// <reports_dir>/SUPPORT.md, support.json and index.html atomically.
Status WriteReports(const Registry& registry, const std::string& reports_dir);

// Removes the temporary files killed writes left in the configs and `reports_dir` (RemoveStaleTempFiles;
// callers hold the checkout lock), then RecordHistory, WriteBackResults, then WriteReports into
// `reports_dir`, logging what was written. The folder
// is made and every config block and history file read first, so a folder that cannot be made or a damaged
// block or file stops it with nothing written.
Status PublishResults(const Registry& registry, const std::vector<CellResult>& records, const std::string& reports_dir,
                      std::ostream& log);

// What a run of user configs (matrix/user_configs.h) publishes, from `records` (its journal) alone: every
// record is added to the history under `reports_dir`, and SUPPORT.md, support.json and index.html there show
// every config of the journal, each device type's entry taken from its newest record in the history (one
// measured beside other work keeps the speeds of the newest undisturbed one). No config file is written.
Status PublishJournalResults(const std::vector<CellResult>& records, const std::string& reports_dir,
                             std::ostream& log);

}  // namespace tmx::matrix
