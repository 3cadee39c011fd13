// Publishing results: every journal record is added to the history (history.h), the newest record of each
// cell is written back into its config's metadata block, then reports/SUPPORT.md, reports/support.json and
// reports/index.html are regenerated from every config's metadata and the history.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/registry.h"
#include "matrix/cell.h"
#include "matrix/history.h"
#include "matrix/report.h"
#include "matrix/support_block.h"

namespace tmx::matrix {

// What a write-back did with each record it wrote back (one per config and column), for a run's closing tally
// (TallyLine). Every record counts once among new_entries, updated, unchanged and kept_newer; disturbed and
// `statuses` count them again by what they were.
struct WriteBackTally {
  int new_entries = 0;  // the config had no entry for the column
  int updated = 0;      // the entry changed
  int unchanged = 0;    // the record gave the entry it had
  int kept_newer = 0;   // the config's entry was verified after the record, so it stands
  int disturbed = 0;    // measured beside other work: its status written, the entry's speeds kept
  int disturbed_published = 0;  // of those, the speeds published marked instead (--accept-disturbed)
  std::map<std::string, int> statuses;  // the records' statuses ("runs" -> 50), written back or not
  int files_written = 0;                // config files rewritten
};
// "Tally: 62 cells: 3 new, 40 updated, 17 unchanged, 2 kept (a newer entry stands); 60 runs, 2 fails; 5 measured
// beside other work (status recorded, speeds kept; 2 published marked, --accept-disturbed); 43 config files
// updated". Empty when no record was tallied.
std::string TallyLine(const WriteBackTally& tally);

// How a publish logs. `verbose` (default): a line per config file and per entry kept ("updated ...",
// "unchanged ...", "kept ..."), as merge prints them; off (`tune-matrix run` without --verbose): those lines
// are left out and only counted into `tally` (where given). Lines that need a reader's attention (an entry
// dated ahead replaced, a stale temporary file removed) are always written.
struct PublishLog {
  bool verbose = true;
  WriteBackTally* tally = nullptr;
};

// For each config with records, per device type the newest record (see Supersedes) becomes that device
// type's entry, unless the entry there was verified later; device types without records keep their
// entries. Every config is rendered before any is written; unchanged files are not rewritten.
Status WriteBackResults(const Registry& registry, const std::vector<CellResult>& records, std::ostream& log,
                        const PublishLog& how = {});

// Adds the records of built-in configs to the history under `reports_dir` (records of other configs have no
// place there), logging what was added.
Status RecordHistory(const Registry& registry, const std::vector<CellResult>& records, const std::string& reports_dir,
                     std::ostream& log);

// One generated report: its file in the reports folder and the reporter that writes it. ReportFiles() is
// the one list of them: rendering, writing, checking, log lines and help texts read it.
// What the reports are rendered with besides the configs and history.
struct ReportOptions {
  // The repository's web address, which the page links commits to (HtmlReportOptions::repository_url); "":
  // plain text.
  std::string repository_url;
};

struct ReportFile {
  const char* file;  // "SUPPORT.md"
  std::unique_ptr<SupportReporter> (*reporter)(const History& history, const ReportOptions& options);
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
std::vector<GeneratedReport> RenderReports(const std::vector<ConfigSupport>& configs, const History& history,
                                           const ReportOptions& options = {});
// Reads every built-in config's metadata and their history under `reports_dir`, and writes
// <reports_dir>/SUPPORT.md, support.json and index.html atomically, with `options`; none given: the repository
// address is that of the `origin` remote of the repository holding `reports_dir` (OriginWebUrl), if any.
Status WriteReports(const Registry& registry, const std::string& reports_dir,
                    const std::optional<ReportOptions>& options = std::nullopt);

// Removes the temporary files killed writes left in the configs and `reports_dir` (RemoveStaleTempFiles;
// callers hold the checkout lock), then RecordHistory, WriteBackResults, then WriteReports into
// `reports_dir`, logging what was written. The folder
// is made and every config block and history file read first, so a folder that cannot be made or a damaged
// block or file stops it with nothing written.
Status PublishResults(const Registry& registry, const std::vector<CellResult>& records, const std::string& reports_dir,
                      std::ostream& log, const PublishLog& how = {});

// What a run of user configs (matrix/user_configs.h) publishes, from `records` (its journal) alone: every
// record is added to the history under `reports_dir`, and SUPPORT.md, support.json and index.html there show
// every config of the journal, each device type's entry taken from its newest record in the history (one
// measured beside other work keeps the speeds of the newest undisturbed one). No config file is written.
Status PublishJournalResults(const std::vector<CellResult>& records, const std::string& reports_dir,
                             std::ostream& log);

}  // namespace tmx::matrix
