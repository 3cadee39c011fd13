// Running planned cells: one child process per cell, one running cell per device lane, every finished cell
// appended to the journal at once, a progress line per cell. The scheduler talks to a CellRunner, so tests
// drive it with a fake runner and no processes (ninja's habit).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "matrix/cell.h"
#include "matrix/plan.h"
#include "matrix/runner.h"

namespace tmx::matrix {

struct MatrixRun {
  std::vector<CellResult> recorded;  // cells recorded by this run, in finishing order
  bool interrupted = false;          // stopped by Ctrl-C/SIGTERM; cells in flight were not recorded
  // Cells whose child failed because of the machine (a full disk, an unwritable folder, no file
  // descriptors: harness/env_failure.h), each with the reason. They are not journaled: an environment
  // failure is no verdict on the device, and the cell's earlier record stands. The run must fail. Also cells
  // whose record broke a record rule (matrix/record_rules.h), which no reader would take from the journal.
  std::vector<CellResult> environment_errors;
  // Cells left for a later run by the time limit (MatrixOptions::time_limit_s), by the plan or, once the run
  // fell behind its predictions, before they started: not recorded; their earlier records stand.
  std::vector<CellKey> deferred;
};

// Builds a cell's result from how its child ended and the summary.json it wrote (if any).
CellResult ResultFromOutcome(const PlannedCell& cell, const SubprocessResult& outcome, const MatrixOptions& options);

// Fills `r`'s CPU accounting (cpu_time_s, others_cpu_share, steal_share, disturbed) from the runner's
// readings around the cell (base/cpu_usage.h); leaves the shares unknown when it took none (a fake runner).
void AddCpuAccounting(const CellOutcome& outcome, CellResult* r, const DisturbanceOptions& options = {});

// Now, UTC, ISO 8601 ("2026-12-02T11:30:00Z").
std::string UtcNow();

// Runs `cells` (skipping keys in `done`, which resume leaves finished). A cell whose child failed for an
// environment reason goes to MatrixRun::environment_errors instead of the journal. Invalid and too-large cells are
// recorded without starting. Each recorded cell gets `provenance` (with verified_at set from `now` when it
// finished) and is appended to options.journal_path before the next one starts.
StatusOr<MatrixRun> RunCells(const std::vector<PlannedCell>& cells, const std::vector<CellKey>& done,
                             CellRunner& runner, const MatrixOptions& options, const Provenance& provenance,
                             std::ostream& progress, const std::function<std::string()>& now = UtcNow);

}  // namespace tmx::matrix
