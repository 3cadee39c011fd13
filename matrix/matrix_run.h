// What `tune-matrix run` and `tune-matrix cell` do, without the process plumbing: plan the cells on the
// given devices, take care of the journal, run the cells through a CellRunner, and publish the results.
// The CLI supplies the real devices (probed in a child), provenance and subprocess runner; tests supply a
// fake runner and a test checkout, so everything between the command line and the child processes is
// tested without starting any.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/device.h"
#include "harness/registry.h"
#include "matrix/cell.h"
#include "matrix/plan.h"
#include "matrix/runner.h"
#include "matrix/scheduler.h"

namespace tmx::matrix {

// Where and with what the cells run.
struct RunSetting {
  std::vector<DeviceInfo> devices;  // this machine's devices (DiscoverDevices)
  Provenance provenance;            // recorded with every cell (LocalProvenance)
  CellRunner* runner = nullptr;     // starts the cells
  std::function<std::string()> now = UtcNow;
  // What the caller's look at the machine's load found before the run (BusyMachineWarning; empty: quiet or not
  // looked), printed as a warning before the first cell. The machine is probed once per command.
  std::string busy_warning;
};

// The whole run: plans options' cells; with options.resume skips the cells the journal holds, with
// options.fresh moves the journal aside (to <journal>.prev, after adding its records to the history under
// options.reports_dir when write_back), otherwise appends to it; runs the cells; then, unless interrupted and
// when write_back, adds the journal's records to the history, writes its newest records into the configs
// (PublishResults; for options.user_configs PublishJournalResults, which writes no config) and the reports,
// and keeps the newest record per cell in the journal; and writes the planned cells as JUnit (when
// options.junit_path is set). Progress goes to `out`.
StatusOr<MatrixRun> RunMatrix(const Registry& registry, const MatrixOptions& options, bool write_back,
                              const RunSetting& setting, std::ostream& out, std::ostream& err);

// One config on one device: a built-in config by name, or options.user_configs' one config (named
// `config`) on one device (a device id present in setting.devices) as a matrix cell, with the
// same child command and budget as RunMatrix, recorded in a journal of its own (options.journal_path) and
// nowhere else: no config or report changes. Unless interrupted, `recorded` holds exactly that cell.
StatusOr<MatrixRun> RunOneCell(const Registry& registry, const std::string& config, const std::string& device,
                                MatrixOptions options, const RunSetting& setting, std::ostream& out);

}  // namespace tmx::matrix
