#include "matrix/runner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

namespace tmx::matrix {

CellRunner::~CellRunner() = default;

Disturbance CellRunner::ProbeLoad(double window_s) { return ProbeMachineLoad(window_s); }

namespace {

std::string CellName(const CellKey& key) { return "cell " + key.config + " on " + key.device; }

class SubprocessRunner : public CellRunner {
 public:
  explicit SubprocessRunner(int max_parallel_lanes)
      : max_parallel_(static_cast<size_t>(std::max(1, max_parallel_lanes))) {}

  bool CanStart(const std::string& lane) const override {
    return busy_lanes_.count(lane) == 0 && cells_.size() < max_parallel_ && !set_.interrupted();
  }

  Status Start(const CellCommand& cmd) override {
    if (busy_lanes_.count(cmd.lane) != 0) {
      return Status::FailedPrecondition("cannot start " + CellName(cmd.key) + ": lane '" + cmd.lane +
                                        "' is busy (wait for its cell to finish)");
    }
    if (cells_.size() >= max_parallel_) {
      return Status::FailedPrecondition("cannot start " + CellName(cmd.key) + ": all " +
                                        std::to_string(max_parallel_) + " parallel lanes are busy");
    }
    SubprocessOptions options;
    options.argv = cmd.argv;
    options.working_dir = cmd.working_dir;
    options.env = cmd.env;
    options.timeout_s = cmd.timeout_s;
    options.memory_limit_bytes = cmd.memory_limit_bytes;
    options.log_path = cmd.log_path;
    options.cpus = cmd.cpus;
    // A cell's child (and, through the launcher, its ranks) ends with this process: a tune-matrix killed
    // outright (SIGKILL, the OOM killer) leaves no cell running on and holding the device.
    options.die_with_parent = true;
    const MachineCpuTimes before = ReadMachineCpuTimes(cmd.cpus);
    StatusOr<Subprocess*> sub = set_.Add(options);
    if (!sub.ok()) return sub.status().WithContext(CellName(cmd.key));
    cells_[*sub] = Cell{cmd.key, cmd.lane, cmd.cpus, before};
    busy_lanes_.insert(cmd.lane);
    return Status::OK();
  }

  bool WaitForOne(CellOutcome* out) override {
    using Clock = std::chrono::steady_clock;
    const auto every = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(heartbeat_every_s_));
    auto beat = Clock::now() + every;
    for (;;) {
      if (set_.interrupted() || cells_.empty()) return false;
      if (std::unique_ptr<Subprocess> sub = set_.NextFinished()) {
        *out = Collect(*sub);
        return true;
      }
      if (set_.running() == 0) return false;  // cannot happen while cells_ is not empty
      if (!heartbeat_ || heartbeat_every_s_ <= 0) {
        set_.DoWork(-1);
        continue;
      }
      if (Clock::now() >= beat) {
        heartbeat_();
        beat = Clock::now() + every;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(beat - Clock::now()).count();
      set_.DoWork(static_cast<int>(std::max<int64_t>(1, left)));
    }
  }

  std::vector<CellOutcome> Abort() override {
    set_.TerminateAll();
    std::vector<CellOutcome> outcomes;
    while (std::unique_ptr<Subprocess> sub = set_.NextFinished()) outcomes.push_back(Collect(*sub));
    return outcomes;
  }

  // The set notices a signal in its next DoWork, but Start refuses a child as soon as one was received: a stop
  // between two cells is an interruption too, not a failure to start (the set's flag alone lost that race in CI).
  bool interrupted() const override { return set_.interrupted() || SubprocessSet::interrupt_signal() != 0; }

 private:
  struct Cell {
    CellKey key;
    std::string lane;
    std::vector<int> cpus;
    MachineCpuTimes machine_before;
  };

  CellOutcome Collect(const Subprocess& sub) {
    auto it = cells_.find(&sub);
    CellOutcome outcome{it->second.key, it->second.lane, sub.result(), it->second.machine_before,
                        ReadMachineCpuTimes(it->second.cpus)};
    busy_lanes_.erase(it->second.lane);
    cells_.erase(it);
    return outcome;
  }

  size_t max_parallel_;
  SubprocessSet set_;
  std::map<const Subprocess*, Cell> cells_;  // started and not yet returned
  std::set<std::string> busy_lanes_;
};

}  // namespace

std::unique_ptr<CellRunner> MakeSubprocessRunner(int max_parallel_lanes) {
  return std::make_unique<SubprocessRunner>(max_parallel_lanes);
}

}  // namespace tmx::matrix
