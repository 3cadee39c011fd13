// A CellRunner for tests that starts no process (ninja's build_test habit).
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "matrix/runner.h"

namespace tmx::matrix {

// Finishes cells in start order with scripted outcomes; records what ran concurrently.
class FakeRunner : public CellRunner {
 public:
  // The wall time of an outcome that scripts none.
  static constexpr double kUnscriptedWallTimeS = 60;

  // Called for each cell as it starts, e.g. to write the run summary its child would write.
  std::function<void(const CellCommand&)> on_start;
  std::map<std::string, SubprocessResult> outcomes;  // by config name
  // When set, each command's outcome (before `outcomes`): a cell's children that end differently.
  std::function<SubprocessResult(const CellCommand&)> outcome_of;
  std::vector<std::string> started;
  std::vector<CellCommand> commands;  // every command started, in order
  size_t max_running = 0;
  bool interrupt_after_first = false;
  // When above 0, the stop arrives as that start (1-based) is asked for, between two cells: Start refuses it, as
  // the subprocess runner refuses to start a child once an interrupt was received.
  size_t interrupt_at_start = 0;
  // The finishes (0-based, in finishing order) whose machine readings show other work taking 95% of the machine.
  std::set<int> disturbed_finishes;
  // The loads ProbeLoad returns, in order (the last one again when they run out; quiet when none), and the
  // windows it was asked for.
  std::vector<Disturbance> loads;
  std::vector<double> probes;

  bool CanStart(const std::string& lane) const override { return !busy_.count(lane) && !interrupted_; }
  Status Start(const CellCommand& cmd) override {
    if (interrupt_at_start > 0 && commands.size() + 1 == interrupt_at_start) {
      interrupted_ = true;
      return Status::Unavailable("not starting " + cmd.key.config + ": an interrupt was received");
    }
    started.push_back(cmd.key.config + "@" + cmd.lane);
    commands.push_back(cmd);
    if (on_start) on_start(cmd);
    busy_[cmd.lane] = cmd;
    order_.push_back(cmd.lane);
    max_running = std::max(max_running, busy_.size());
    return Status::OK();
  }
  bool WaitForOne(CellOutcome* out) override {
    if (interrupted_ || order_.empty()) return false;
    if (heartbeat_) heartbeat_();  // once per wait, as if the cell took a while
    if (interrupt_after_first && finished_ == 1) {
      interrupted_ = true;
      return false;
    }
    std::string lane = order_.front();
    order_.pop_front();
    CellCommand cmd = busy_[lane];
    busy_.erase(lane);
    out->key = cmd.key;
    out->lane = lane;
    out->result = outcome_of ? outcome_of(cmd) : outcomes[cmd.key.config];
    // A child takes time: the steps its summary reports fit in it (matrix/record_rules.h), unless scripted.
    if (out->result.wall_time_s == 0) out->result.wall_time_s = kUnscriptedWallTimeS;
    if (disturbed_finishes.count(finished_)) {
      out->machine_before = {true, 100, 0, 1000};
      out->machine_after = {true, 119, 0, 1020};
    }
    ++finished_;
    return true;
  }
  std::vector<CellOutcome> Abort() override {
    busy_.clear();
    order_.clear();
    return {};
  }
  bool interrupted() const override { return interrupted_; }
  Disturbance ProbeLoad(double window_s) override {
    probes.push_back(window_s);
    if (loads.empty()) return Disturbance{true, 0, 0, ""};
    return loads[std::min(probes.size(), loads.size()) - 1];
  }

 private:
  std::map<std::string, CellCommand> busy_;
  std::deque<std::string> order_;
  int finished_ = 0;
  bool interrupted_ = false;
};

}  // namespace tmx::matrix
