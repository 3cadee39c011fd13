#include "matrix/matrix_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "base/file_util.h"
#include "base/text.h"
#include "matrix/journal.h"
#include "matrix/junit.h"
#include "matrix/publish.h"

namespace tmx::matrix {
namespace {


// The cells the run may skip: those already in the journal with --resume, else none. The journal itself is
// kept (a run appends to it, and a completed run with write-back compacts it to the newest record per cell),
// so a run that is stopped and started again, however often, loses no record; it is checked here, so that a
// damaged one stops the run before any cell. Only --fresh sets it aside (as <journal>.prev, its records first
// added to the history with `keep_history`).
// `journal` is the run's journal as read before planning; a journal set aside leaves it empty.
StatusOr<std::set<CellColumn>> PrepareJournal(const Registry& registry, const MatrixOptions& options, bool keep_history,
                                              LoadedJournal* journal, std::ostream& out, std::ostream& err) {
  std::set<CellColumn> done;
  if (!journal->exists) return done;
  if (!journal->status.ok()) {
    return journal->status.WithContext(
        "the journal's records cannot be kept (fix: repair the line, or move the journal away; --fresh sets it "
        "aside)");
  }
  for (const std::string& w : journal->warnings) err << "warning: " << w << "\n";
  const std::vector<CellResult>& previous = journal->records;
  if (options.resume) {
    for (const auto& [key, cell] : LatestByCell(previous)) done.insert(key);
  } else if (options.fresh) {
    if (keep_history && options.user_configs.empty()) {
      TM_RETURN_IF_ERROR(RecordHistory(registry, previous, options.reports_dir, out));
    } else if (keep_history) {
      TM_RETURN_IF_ERROR(AddToHistory(HistoryDir(options.reports_dir), previous, nullptr));
    }
    std::string aside = options.journal_path + ".prev";
    if (::rename(options.journal_path.c_str(), aside.c_str()) != 0) {
      return Status::IoError(options.journal_path + ": cannot move the previous journal aside");
    }
    out << "Previous journal kept as " << aside << "\n";
    journal->records.clear();
  }
  return done;
}

// The newest record per cell and column, in journal order: what a completed run leaves in its journal.
std::vector<CellResult> Compacted(const std::vector<CellResult>& all) {
  std::map<CellColumn, CellResult> latest = LatestByCell(all);
  std::vector<CellResult> kept;
  for (const CellResult& r : all) {
    auto it = latest.find({r.key, ColumnOf(r)});
    if (it != latest.end() && JournalLine(it->second) == JournalLine(r)) {
      kept.push_back(r);
      latest.erase(it);
    }
  }
  return kept;
}

std::string ShardText(const MatrixOptions& options) {
  if (options.shard_count <= 1) return "";
  return " in shard " + std::to_string(options.shard_index) + "/" + std::to_string(options.shard_count);
}

// The run's first line: its cells, how many run, are recorded without running or wait for a later run, on
// which devices and columns, and with --resume how many the journal holds; then a warning when the machine
// is busy.
void PrintRunHead(const std::vector<PlannedCell>& cells, size_t journaled, const MatrixOptions& options,
                  const RunSetting& setting, std::ostream& out, std::ostream& err) {
  size_t runnable = 0, deferred = 0;
  double deferred_s = 0;
  for (const PlannedCell& c : cells) {
    runnable += c.runnable && !c.deferred;
    deferred += c.deferred;
    if (c.deferred) deferred_s += c.ExpectedTotalS();
  }
  const size_t left = cells.size() - journaled;
  out << "tune-matrix: " << Counted(static_cast<int64_t>(cells.size()), "cell") << ShardText(options) << " (" << runnable << " to run, "
      << cells.size() - runnable - deferred << " recorded without running";
  if (deferred > 0) {
    out << ", " << deferred << " left for a later run by --time-limit " << FormatDuration(options.time_limit_s)
        << ": about " << FormatDuration(deferred_s) << " of work, the cells with the newest records";
  }
  out << ") on " << setting.devices.size() << " device(s)";
  std::vector<std::string> shown;  // each device with the class and torch its records go to
  for (const PlannedCell& c : cells) {
    if (std::find(shown.begin(), shown.end(), DeviceShown(c)) == shown.end()) shown.push_back(DeviceShown(c));
  }
  if (!shown.empty()) out << ": " << JoinStrings(shown, ", ");
  if (options.resume) {
    out << "; " << cells.size() - left << " already in the journal, " << left << " left";
    if (left == 0) out << ": nothing to do (run without --resume to measure them again)";
  }
  out << std::endl;  // before the first cell, which may take minutes, also where the output is a file (CI logs)
  if (runnable > 0 && left > 0 && !setting.busy_warning.empty()) {
    err << "tune-matrix: warning: " << setting.busy_warning << "\n";
  }
}

}  // namespace

StatusOr<MatrixRun> RunMatrix(const Registry& registry, const MatrixOptions& options, bool write_back,
                              const RunSetting& setting, std::ostream& out, std::ostream& err) {
  // The journal is read once: for planning (a user config's records), keeping, resuming, and publishing, with
  // this run's records appended in memory as they were to the file.
  LoadedJournal journal = LoadJournal(options.journal_path);
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(registry, setting.devices, options, &journal);
  if (!cells.ok()) return cells.status();
  StatusOr<std::set<CellColumn>> journaled = PrepareJournal(registry, options, write_back, &journal, out, err);
  if (!journaled.ok()) return journaled.status();
  // A cell is done when the journal holds a record of it in the column this run records into.
  std::vector<CellKey> done;
  for (const PlannedCell& c : *cells) {
    if (journaled->count({c.key, c.column})) done.push_back(c.key);
  }
  PrintRunHead(*cells, done.size(), options, setting, out, err);
  StatusOr<MatrixRun> run = RunCells(*cells, done, *setting.runner, options, setting.provenance, out, setting.now);
  if (!run.ok() || run->interrupted) return run;
  if (!run->deferred.empty()) {
    std::vector<std::string> names;
    for (size_t i = 0; i < run->deferred.size() && i < 3; ++i) {
      names.push_back(run->deferred[i].config + " on " + run->deferred[i].device);
    }
    out << "tune-matrix: " << Counted(static_cast<int64_t>(run->deferred.size()), "cell") << " left for a later run by --time-limit (their records "
        << "stand; the next run with a limit takes the oldest first): " << JoinStrings(names, ", ")
        << (run->deferred.size() > names.size() ? ", ..." : "") << "\n";
  }
  StatusOr<std::vector<CellResult>> all = AsJournaled(run->recorded, options.journal_path);
  if (!all.ok()) return all.status();
  all->insert(all->begin(), journal.records.begin(), journal.records.end());
  std::string tally_line;  // what the write-back did, counted
  if (write_back) {
    // Every record goes to the history first; the journal then keeps the newest per cell. A run of user
    // configs writes its own reports and no config.
    if (options.user_configs.empty()) {
      WriteBackTally tally;
      TM_RETURN_IF_ERROR(PublishResults(registry, *all, options.reports_dir, out, {options.verbose, &tally}));
      tally_line = TallyLine(tally);
    } else {
      TM_RETURN_IF_ERROR(PublishJournalResults(*all, options.reports_dir, out));
    }
    std::vector<CellResult> kept = Compacted(*all);
    if (kept.size() != all->size()) {
      std::string text;
      for (const CellResult& r : kept) text += JournalLine(r) + "\n";
      TM_RETURN_IF_ERROR(WriteFileAtomically(options.journal_path, text));
      out << "Journal " << options.journal_path << ": " << Counted(static_cast<int64_t>(kept.size()), "cell") << ", newest record each ("
          << all->size() - kept.size() << " older records are in the history)\n";
    }
    if (!tally_line.empty()) out << tally_line << (options.verbose ? "" : " (--verbose lists each)") << "\n";
  }
  if (!options.junit_path.empty()) {
    std::map<CellColumn, CellResult> latest = LatestByCell(*all);
    std::vector<CellResult> planned;
    for (const PlannedCell& c : *cells) {
      auto it = latest.find({c.key, c.column});
      if (it != latest.end()) planned.push_back(it->second);
    }
    TM_RETURN_IF_ERROR(WriteJUnitFile(planned, options.junit_path));
    out << "Wrote " << options.junit_path << " (" << planned.size() << " test cases)\n";
  }
  return run;
}

StatusOr<MatrixRun> RunOneCell(const Registry& registry, const std::string& config, const std::string& device,
                                MatrixOptions options, const RunSetting& setting, std::ostream& out) {
  options.devices = {device};
  if (options.user_configs.empty()) options.config_globs = {config};
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(registry, setting.devices, options);
  if (!cells.ok()) return cells.status();
  StatusOr<MatrixRun> run = RunCells(*cells, {}, *setting.runner, options, setting.provenance, out, setting.now);
  if (run.ok() && !run->interrupted && run->environment_errors.empty() && run->recorded.size() != 1) {
    return Status::Internal("expected one cell for " + config + " on " + device + ", recorded " +
                            std::to_string(run->recorded.size()));
  }
  return run;
}

}  // namespace tmx::matrix
