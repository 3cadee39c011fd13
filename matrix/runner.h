// The interface the matrix scheduler starts cells through, after ninja's CommandRunner: the real runner
// starts child processes; tests of the scheduler use a fake that starts none.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/cpu_usage.h"
#include "base/status.h"
#include "base/subprocess.h"
#include "matrix/cell.h"

namespace tmx::matrix {

// One cell to run as a child process.
struct CellCommand {
  CellKey key;
  // The resource the cell occupies, e.g. "cpu" or "cuda:0". Cells of one lane run one at a time.
  std::string lane;
  // Program and arguments, never a shell string (see SubprocessOptions::argv).
  std::vector<std::string> argv;
  std::string working_dir;  // "" keeps the current directory
  std::string log_path;     // "" writes no log; otherwise the full merged output goes there
  double timeout_s = 0;     // wall-clock limit; 0 means none
  int64_t memory_limit_bytes = 0;  // resident memory of the cell's process group; 0 means none
  std::vector<std::pair<std::string, std::string>> env;  // added or overridden variables
  // The CPUs the cell may run on (its cpu lane's, matrix/lanes.h); empty: not pinned. The machine's CPU time
  // around the cell (CellOutcome) is then read over these CPUs only.
  std::vector<int> cpus;
};

// How a started cell ended.
struct CellOutcome {
  CellKey key;
  std::string lane;
  SubprocessResult result;
  // The machine's CPU time (over the cell's CPUs when pinned) when the cell started and when it was collected
  // (unknown from a fake runner).
  MachineCpuTimes machine_before;
  MachineCpuTimes machine_after;
};

class CellRunner {
 public:
  virtual ~CellRunner();
  // True if a cell could start on `lane` now: the lane is idle and a parallel slot is free.
  virtual bool CanStart(const std::string& lane) const = 0;
  // Starts the cell. REQUIRES: CanStart(cmd.lane); otherwise FailedPrecondition. Errors name the cell.
  virtual Status Start(const CellCommand& cmd) = 0;
  // Blocks until one started cell finishes and fills `out`. False if none is running or an interrupt
  // arrived; after an interrupt, Abort() returns the cells it stopped.
  virtual bool WaitForOne(CellOutcome* out) = 0;
  // Kills every running cell and returns all started cells not yet returned by WaitForOne(): those it
  // stopped (or an interrupt stopped) with result.interrupted set, any that had already finished with
  // their real result.
  virtual std::vector<CellOutcome> Abort() = 0;
  // True once an interrupt (SIGINT, SIGTERM, SIGHUP) was caught; see
  // SubprocessSet::InstallInterruptHandlers(), which main() must call for signals to be caught.
  virtual bool interrupted() const = 0;
  // The machine's load over the next `window_s` seconds, this process sleeping (ProbeMachineLoad): what a cell
  // started now would be measured beside. The real runner probes; a fake one scripts it.
  virtual Disturbance ProbeLoad(double window_s);

  // While WaitForOne waits, `heartbeat` is called each `every_s` seconds that no cell finishes, so a reader of
  // the progress is never left without a line for longer (a proxied cell's children can take minutes). None by
  // default. A fake runner calls it once per wait.
  void SetHeartbeat(std::function<void()> heartbeat, double every_s) {
    heartbeat_ = std::move(heartbeat);
    heartbeat_every_s_ = every_s;
  }

 protected:
  std::function<void()> heartbeat_;
  double heartbeat_every_s_ = 0;
};

// The real runner: one child process per cell, one running cell per lane, and at most
// `max_parallel_lanes` (at least 1) lanes busy at once.
std::unique_ptr<CellRunner> MakeSubprocessRunner(int max_parallel_lanes);

}  // namespace tmx::matrix
