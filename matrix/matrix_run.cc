#include "matrix/matrix_run.h"

#include <unistd.h>

#include <cstdio>
#include <map>

#include "harness/file_util.h"
#include "matrix/journal.h"
#include "matrix/junit.h"
#include "matrix/publish.h"

namespace tmx::matrix {
namespace {

// The cells already in the journal (resume), or none after moving the journal aside (a fresh run). With
// `keep_history`, the records of the journal moved aside are first added to the history (the journal it
// moves aside is replaced when the next run moves its own), so a journal that cannot be read stops the run.
StatusOr<std::vector<CellKey>> PrepareJournal(const Registry& registry, const MatrixOptions& options,
                                              bool keep_history, std::ostream& out, std::ostream& err) {
  std::vector<CellKey> done;
  if (options.resume) {
    std::vector<std::string> warnings;
    StatusOr<std::vector<CellResult>> previous = ReadJournal(options.journal_path, &warnings);
    if (!previous.ok() && previous.status().code() != Status::Code::kNotFound) return previous.status();
    for (const std::string& w : warnings) err << "warning: " << w << "\n";
    if (previous.ok()) {
      for (const auto& [key, cell] : LatestByCell(*previous)) done.push_back(key);
    }
  } else if (::access(options.journal_path.c_str(), F_OK) == 0) {
    if (keep_history) {
      std::vector<std::string> warnings;
      StatusOr<std::vector<CellResult>> replaced = ReadJournal(options.journal_path, &warnings);
      if (!replaced.ok()) {
        return replaced.status().WithContext(
            "the previous journal's records cannot be kept in history (fix: repair the line, or move the "
            "journal away)");
      }
      for (const std::string& w : warnings) err << "warning: " << w << "\n";
      TM_RETURN_IF_ERROR(RecordHistory(registry, *replaced, options.reports_dir, out));
    }
    std::string previous = options.journal_path + ".prev";
    if (::rename(options.journal_path.c_str(), previous.c_str()) != 0) {
      return Status::IoError(options.journal_path + ": cannot move the previous journal aside");
    }
    out << "Previous journal kept as " << previous << "\n";
  }
  return done;
}

std::string ShardText(const MatrixOptions& options) {
  if (options.shard_count <= 1) return "";
  return " in shard " + std::to_string(options.shard_index) + "/" + std::to_string(options.shard_count);
}

}  // namespace

StatusOr<MatrixRun> RunMatrix(const Registry& registry, const MatrixOptions& options, bool write_back,
                              const RunSetting& setting, std::ostream& out, std::ostream& err) {
  StatusOr<std::vector<PlannedCell>> cells = PlanCells(registry, setting.devices, options);
  if (!cells.ok()) return cells.status();
  StatusOr<std::vector<CellKey>> done = PrepareJournal(registry, options, write_back, out, err);
  if (!done.ok()) return done.status();
  size_t runnable = 0;
  for (const PlannedCell& c : *cells) runnable += c.runnable;
  out << "tune-matrix: " << cells->size() << " cells" << ShardText(options) << " (" << runnable << " to run, "
      << cells->size() - runnable << " recorded without running) on " << setting.devices.size() << " device(s); "
      << done->size() << " already in the journal\n";

  StatusOr<MatrixRun> run = RunCells(*cells, *done, *setting.runner, options, setting.provenance, out, setting.now);
  if (!run.ok() || run->interrupted) return run;
  std::vector<std::string> warnings;
  StatusOr<std::vector<CellResult>> all = ReadJournal(options.journal_path, &warnings);
  if (!all.ok()) return all.status();
  if (write_back) TM_RETURN_IF_ERROR(PublishResults(registry, *all, options.reports_dir, out));
  if (!options.junit_path.empty()) {
    std::map<CellKey, CellResult> latest = LatestByCell(*all);
    std::vector<CellResult> planned;
    for (const PlannedCell& c : *cells) {
      auto it = latest.find(c.key);
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
  options.configs_glob = config;
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
