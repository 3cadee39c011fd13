#include "matrix/runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "base/process_info.h"

namespace tmx::matrix {
namespace {

using Clock = std::chrono::steady_clock;

CellCommand Cell(const std::string& config, const std::string& lane, std::vector<std::string> args) {
  CellCommand cmd;
  cmd.key = CellKey{config, lane};
  cmd.lane = lane;
  cmd.argv.push_back(TM_MISBEHAVE_PATH);
  cmd.argv.insert(cmd.argv.end(), args.begin(), args.end());
  cmd.timeout_s = 20;  // a safety net; tests that hang set their own
  return cmd;
}

CellCommand Hang(const std::string& config, const std::string& lane, double timeout_s) {
  CellCommand cmd = Cell(config, lane, {"hang"});
  cmd.timeout_s = timeout_s;
  return cmd;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(RunnerTest, OneCellPerLane) {
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(4);
  EXPECT_TRUE(runner->CanStart("cpu"));
  ASSERT_TRUE(runner->Start(Hang("a", "cpu", 0.3)).ok());
  EXPECT_FALSE(runner->CanStart("cpu"));
  EXPECT_TRUE(runner->CanStart("cuda:0"));

  const Status busy = runner->Start(Cell("b", "cpu", {"ok"}));
  EXPECT_EQ(busy.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(busy.message().find("lane 'cpu' is busy"), std::string::npos) << busy.ToString();
  EXPECT_NE(busy.message().find("cell b on cpu"), std::string::npos) << busy.ToString();

  CellOutcome outcome;
  ASSERT_TRUE(runner->WaitForOne(&outcome));
  EXPECT_EQ(outcome.key, (CellKey{"a", "cpu"}));
  EXPECT_EQ(outcome.lane, "cpu");
  EXPECT_TRUE(outcome.result.timed_out);
  EXPECT_TRUE(runner->CanStart("cpu"));
  EXPECT_FALSE(runner->WaitForOne(&outcome)) << "nothing is running";
}

// A cell run beside a CPU hog (one spinning process per core, started outside the runner) is judged disturbed
// from the runner's readings of the machine around it; its own CPU time is its tree's alone.
TEST(RunnerTest, ACellBesideACpuHogIsJudgedDisturbed) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::unique_ptr<CellRunner> hogs = MakeSubprocessRunner(static_cast<int>(cores));
  for (unsigned i = 0; i < cores; ++i) {
    ASSERT_TRUE(hogs->Start(Cell("hog" + std::to_string(i), "hog" + std::to_string(i), {"spin", "8"})).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(1);
  ASSERT_TRUE(runner->Start(Cell("quiet", "cpu", {"sleep", "1"})).ok());
  CellOutcome outcome;
  ASSERT_TRUE(runner->WaitForOne(&outcome));
  ASSERT_TRUE(outcome.result.Succeeded()) << outcome.result.Describe();
  ASSERT_TRUE(outcome.machine_before.known && outcome.machine_after.known);
  EXPECT_LT(outcome.result.cpu_time_s, 0.2);  // it slept
  Disturbance d = JudgeDisturbance(outcome.machine_before, outcome.machine_after, outcome.result.cpu_time_s);
  ASSERT_TRUE(d.known);
  EXPECT_GT(d.others_share, 0.5) << "the hogs kept every core busy";
  EXPECT_EQ(d.reason.rfind("other processes used ", 0), 0u) << d.reason;
  for (const CellOutcome& stopped : hogs->Abort()) EXPECT_TRUE(stopped.result.interrupted);
}

// While a cell runs, the heartbeat says so at its interval; it stops when the cell finishes.
TEST(RunnerTest, TheHeartbeatBeatsWhileACellRuns) {
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(1);
  int beats = 0;
  runner->SetHeartbeat([&beats] { ++beats; }, 0.1);
  ASSERT_TRUE(runner->Start(Cell("a", "cpu", {"sleep", "1"})).ok());
  CellOutcome outcome;
  ASSERT_TRUE(runner->WaitForOne(&outcome));
  EXPECT_EQ(outcome.result.exit_code, 0);
  EXPECT_GE(beats, 5);   // 1 s at 0.1 s, on a loaded machine
  EXPECT_LE(beats, 11);  // never more often than asked
  runner->SetHeartbeat(nullptr, 0);
}

TEST(RunnerTest, ParallelLaneLimit) {
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(1);
  ASSERT_TRUE(runner->Start(Cell("a", "cpu", {"exit", "0"})).ok());
  EXPECT_FALSE(runner->CanStart("cuda:0"));
  const Status full = runner->Start(Cell("b", "cuda:0", {"ok"}));
  EXPECT_EQ(full.code(), Status::Code::kFailedPrecondition);
  CellOutcome outcome;
  ASSERT_TRUE(runner->WaitForOne(&outcome));
  EXPECT_TRUE(runner->CanStart("cuda:0"));
}

TEST(RunnerTest, TwoLanesRunInParallel) {
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(2);
  const auto start = Clock::now();
  ASSERT_TRUE(runner->Start(Hang("llama/1B", "cpu", 0.5)).ok());
  ASSERT_TRUE(runner->Start(Hang("llama/1B", "cuda:0", 0.5)).ok());
  EXPECT_FALSE(runner->CanStart("cuda:1"));
  std::map<std::string, bool> timed_out_by_lane;
  CellOutcome outcome;
  while (runner->WaitForOne(&outcome)) {
    EXPECT_EQ(outcome.key.device, outcome.lane);
    timed_out_by_lane[outcome.lane] = outcome.result.timed_out;
  }
  EXPECT_EQ(timed_out_by_lane, (std::map<std::string, bool>{{"cpu", true}, {"cuda:0", true}}));
  EXPECT_LT(SecondsSince(start), 0.9) << "two 0.5 s cells on different lanes should overlap";
}

TEST(RunnerTest, OutcomesCarryKeysAndResults) {
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(3);
  ASSERT_TRUE(runner->Start(Cell("three", "cpu", {"exit", "3"})).ok());
  ASSERT_TRUE(runner->Start(Cell("five", "cuda:0", {"exit", "5"})).ok());
  CellCommand env = Cell("env", "cuda:1", {"env", "TM_RUNNER_TEST"});
  env.env = {{"TM_RUNNER_TEST", "passed"}};
  ASSERT_TRUE(runner->Start(env).ok());
  std::map<std::string, int> codes;
  std::string env_output;
  CellOutcome outcome;
  while (runner->WaitForOne(&outcome)) {
    ASSERT_TRUE(outcome.result.exit_code.has_value()) << outcome.key.config;
    codes[outcome.key.config] = *outcome.result.exit_code;
    if (outcome.key.config == "env") env_output = outcome.result.output_tail;
  }
  EXPECT_EQ(codes, (std::map<std::string, int>{{"three", 3}, {"five", 5}, {"env", 0}}));
  EXPECT_EQ(env_output, "passed\n");
}

TEST(RunnerTest, StartErrorNamesTheCellAndFreesTheLane) {
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(2);
  CellCommand cmd;
  cmd.key = CellKey{"qwen/0.5B_full", "cpu"};
  cmd.lane = "cpu";
  cmd.argv = {"tm-no-such-recipe-binary"};
  const Status status = runner->Start(cmd);
  EXPECT_EQ(status.code(), Status::Code::kNotFound);
  EXPECT_NE(status.message().find("cell qwen/0.5B_full on cpu"), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("tm-no-such-recipe-binary"), std::string::npos) << status.ToString();
  EXPECT_TRUE(runner->CanStart("cpu"));
}

TEST(RunnerTest, AbortKillsAndReturnsRunningCells) {
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(2);
  ASSERT_TRUE(runner->Start(Hang("a", "cpu", 20)).ok());
  ASSERT_TRUE(runner->Start(Hang("b", "cuda:0", 20)).ok());
  const auto start = Clock::now();
  std::vector<CellOutcome> outcomes = runner->Abort();
  EXPECT_LT(SecondsSince(start), 1.0);
  ASSERT_EQ(outcomes.size(), 2u);
  for (const CellOutcome& o : outcomes) {
    SCOPED_TRACE(o.key.config);
    EXPECT_TRUE(o.result.interrupted);
    EXPECT_TRUE(o.result.term_signal.has_value());
  }
  EXPECT_FALSE(runner->interrupted());
  CellOutcome outcome;
  EXPECT_FALSE(runner->WaitForOne(&outcome));
  EXPECT_TRUE(runner->CanStart("cpu"));
  EXPECT_TRUE(runner->CanStart("cuda:0"));
}

TEST(RunnerTest, InterruptStopsWaitingAndAbortReturnsTheCells) {
  ASSERT_TRUE(SubprocessSet::InstallInterruptHandlers().ok());
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(2);
  ASSERT_TRUE(runner->Start(Hang("a", "cpu", 20)).ok());
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    kill(getpid(), SIGINT);
  });
  const auto start = Clock::now();
  CellOutcome outcome;
  EXPECT_FALSE(runner->WaitForOne(&outcome));
  interrupter.join();
  EXPECT_LT(SecondsSince(start), 1.5);
  EXPECT_TRUE(runner->interrupted());
  EXPECT_FALSE(runner->CanStart("cuda:0"));
  std::vector<CellOutcome> outcomes = runner->Abort();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].key, (CellKey{"a", "cpu"}));
  EXPECT_TRUE(outcomes[0].result.interrupted);
  SubprocessSet::UninstallInterruptHandlers();
  SubprocessSet::ResetInterrupt();
}

// A stop received between two cells, before any wait saw it: the runner refuses the next child and says it was
// interrupted, so the run ends interrupted instead of failing to start a cell (CliTest's kill between two cells).
TEST(RunnerTest, AStopBeforeAnyWaitSawItIsAnInterruption) {
  ASSERT_TRUE(SubprocessSet::InstallInterruptHandlers().ok());
  std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(1);
  EXPECT_FALSE(runner->interrupted());
  kill(getpid(), SIGTERM);
  EXPECT_TRUE(runner->interrupted());
  Status refused = runner->Start(Hang("b", "cpu", 20));
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("an interrupt was received"), std::string::npos) << refused.message();
  EXPECT_TRUE(runner->Abort().empty());
  SubprocessSet::UninstallInterruptHandlers();
  SubprocessSet::ResetInterrupt();
}

// A tune-matrix killed outright (SIGKILL: no handler, no destructor) takes its running cell with it, instead of
// leaving the cell's child running on the device with nobody to record it (issue 55).
TEST(RunnerTest, ACellEndsWhenTheMatrixIsKilled) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t matrix = fork();
  ASSERT_GE(matrix, 0);
  if (matrix == 0) {  // the tune-matrix to be killed: starts a cell, reports the cell's pid, waits
    close(fds[0]);
    std::unique_ptr<CellRunner> runner = MakeSubprocessRunner(1);
    const std::string pid_file = ::testing::TempDir() + "/runner_test_cell_" + std::to_string(getpid());
    CellCommand cmd = Cell("a", "cpu", {"pidfile", pid_file});
    cmd.timeout_s = 60;
    pid_t cell = -1;
    if (runner->Start(cmd).ok()) {
      for (int i = 0; i < 500 && cell <= 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::ifstream(pid_file) >> cell;
      }
    }
    if (write(fds[1], &cell, sizeof cell) != sizeof cell) _exit(1);
    for (;;) pause();
  }
  close(fds[1]);
  pid_t cell = -1;
  ASSERT_EQ(read(fds[0], &cell, sizeof cell), static_cast<ssize_t>(sizeof cell));
  close(fds[0]);
  ASSERT_GT(cell, 0);
  EXPECT_FALSE(ProcessEnded(cell));
  kill(matrix, SIGKILL);
  waitpid(matrix, nullptr, 0);
  const auto start = Clock::now();
  while (!ProcessEnded(cell) && SecondsSince(start) < 5) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(ProcessEnded(cell)) << "the cell's child outlived the killed matrix";
  if (!ProcessEnded(cell)) kill(cell, SIGKILL);
}

}  // namespace
}  // namespace tmx::matrix
