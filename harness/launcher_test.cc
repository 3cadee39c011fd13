#include "harness/launcher.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "base/subprocess.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

using Clock = std::chrono::steady_clock;

const char* const kMisbehave = TM_MISBEHAVE_PATH;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Sends this process's stdout and stderr (which the ranks inherit) to a file while it lives.
class CaptureOutput {
 public:
  explicit CaptureOutput(const std::string& path) : path_(path) {
    std::fflush(stdout);
    std::fflush(stderr);
    saved_out_ = dup(1);
    saved_err_ = dup(2);
    file_ = std::fopen(path.c_str(), "w");
    if (file_ != nullptr) {
      dup2(fileno(file_), 1);
      dup2(fileno(file_), 2);
    }
  }
  ~CaptureOutput() { Restore(); }
  CaptureOutput(const CaptureOutput&) = delete;
  CaptureOutput& operator=(const CaptureOutput&) = delete;

  // Restores stdout and stderr and returns what was written meanwhile.
  std::string Restore() {
    if (saved_out_ >= 0) {
      dup2(saved_out_, 1);
      dup2(saved_err_, 2);
      close(saved_out_);
      close(saved_err_);
      saved_out_ = saved_err_ = -1;
    }
    if (file_ != nullptr) std::fclose(file_);
    file_ = nullptr;
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string path_;
  FILE* file_ = nullptr;
  int saved_out_ = -1;
  int saved_err_ = -1;
};

std::vector<std::string> SortedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

// Ranks that run `script` in /bin/sh, which reads RANK to decide how each one ends.
LaunchOptions ShellRanks(int nproc, const std::string& script) {
  LaunchOptions options;
  options.nproc = nproc;
  options.argv = {"/bin/sh", "-c", script};
  options.kill_grace_s = 1;
  return options;
}

TEST(LauncherTest, EachRankGetsTorchrunsEnvironmentOnTopOfOurs) {
  test::ScratchDir dir("tm_launcher_env");
  const char* saved_omp = std::getenv("OMP_NUM_THREADS");
  const std::string omp = saved_omp ? saved_omp : "";
  unsetenv("OMP_NUM_THREADS");
  setenv("TM_LAUNCHER_TEST_INHERITED", "from the launcher", 1);
  LaunchOptions options;
  options.nproc = 3;
  options.argv = {kMisbehave, "envs", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                  "OMP_NUM_THREADS", "TM_LAUNCHER_TEST_INHERITED", "TM_LAUNCHER_TEST_ADDED", "MASTER_PORT"};
  options.env = {{"TM_LAUNCHER_TEST_ADDED", "by options"}};
  CaptureOutput capture(dir.path() + "/out.txt");
  StatusOr<LaunchResult> result = LaunchRanks(options);
  const std::string output = capture.Restore();
  if (saved_omp) setenv("OMP_NUM_THREADS", omp.c_str(), 1);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_FALSE(result->failed_rank) << result->failure;
  EXPECT_EQ(result->exit_code, 0);

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max(1u, cores / 3));
  std::vector<std::string> lines = SortedLines(output);
  ASSERT_EQ(lines.size(), 3u) << output;
  std::string port;
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string r = std::to_string(rank);
    const std::string expected = "RANK=" + r + " LOCAL_RANK=" + r +
                                 " WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 OMP_NUM_THREADS=" + threads +
                                 " TM_LAUNCHER_TEST_INHERITED=from the launcher TM_LAUNCHER_TEST_ADDED=by options" +
                                 " MASTER_PORT=";
    const std::string& line = lines[static_cast<size_t>(rank)];
    ASSERT_EQ(line.substr(0, expected.size()), expected) << line;
    // Every rank meets the others at the same free port.
    const std::string rank_port = line.substr(expected.size());
    EXPECT_GT(std::atoi(rank_port.c_str()), 0) << line;
    if (rank == 0) port = rank_port;
    EXPECT_EQ(rank_port, port);
  }
}

TEST(LauncherTest, TorchrunsVariablesAlreadySetAreRefusedNotObeyed) {
  // RANK left in the shell made `tune run --nproc_per_node 2` run as one silent rank.
  unsetenv("LOCAL_RANK");
  EXPECT_TRUE(CheckLauncherEnvironment(2).ok());
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  Status s = CheckLauncherEnvironment(2);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "RANK=0 and WORLD_SIZE=1 are already set in the environment (left from an earlier run, or "
                         "torchrun's), so --nproc_per_node 2 would run this process as one of their ranks instead "
                         "of starting 2; fix: unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR "
                         "MASTER_PORT, or drop --nproc_per_node where torchrun starts the ranks");
}

TEST(LauncherTest, OmpNumThreadsIsLeftAloneWhenSetAndOptionsEnvWins) {
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string saved_value = saved ? saved : "";
  LaunchOptions options;
  options.nproc = 2;
  options.argv = {kMisbehave, "ok"};
  options.env = {{"MASTER_ADDR", "10.0.0.1"}};
  auto value = [](const std::vector<std::pair<std::string, std::string>>& env, const std::string& name) {
    std::string found = "<unset>";
    for (const auto& [k, v] : env) {
      if (k == name) found = v;  // the last one wins, as in the child
    }
    return found;
  };
  setenv("OMP_NUM_THREADS", "7", 1);
  EXPECT_EQ(value(RankEnvironment(options, 1, 1234), "OMP_NUM_THREADS"), "<unset>");  // inherited as 7
  setenv("OMP_NUM_THREADS", "", 1);
  EXPECT_NE(value(RankEnvironment(options, 1, 1234), "OMP_NUM_THREADS"), "<unset>");
  if (saved) {
    setenv("OMP_NUM_THREADS", saved_value.c_str(), 1);
  } else {
    unsetenv("OMP_NUM_THREADS");
  }
  EXPECT_EQ(value(RankEnvironment(options, 1, 1234), "MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(value(RankEnvironment(options, 1, 1234), "RANK"), "1");
  EXPECT_EQ(value(RankEnvironment(options, 1, 1234), "MASTER_PORT"), "1234");
}

TEST(LauncherTest, RanksThatSucceedEndTheRunWithoutAFailure) {
  StatusOr<LaunchResult> result = LaunchRanks(ShellRanks(3, "exit 0"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_FALSE(result->failed_rank);
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_TRUE(result->stopped_ranks.empty());
  EXPECT_EQ(result->interrupt_signal, 0);
}

TEST(LauncherTest, AFailedRankStopsTheOthersAndIsNamed) {
  struct Case {
    std::string script;  // rank 1's end; the others sleep
    std::string failure;
    int exit_code;
  };
  const Case cases[] = {{"exit 3", "exited with code 3", 3},
                        {"kill -9 $$", "was killed by signal 9 (Killed)", 137}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.script);
    const auto start = Clock::now();
    StatusOr<LaunchResult> result =
        LaunchRanks(ShellRanks(2, "if [ \"$RANK\" = 1 ]; then " + c.script + "; fi; exec sleep 30"));
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    ASSERT_TRUE(result->failed_rank);
    EXPECT_EQ(*result->failed_rank, 1);
    EXPECT_EQ(result->failure, c.failure);
    EXPECT_EQ(result->exit_code, c.exit_code);
    EXPECT_EQ(result->stopped_ranks, std::vector<int>{0});
    EXPECT_EQ(result->interrupt_signal, 0);
    EXPECT_LT(SecondsSince(start), 10.0);
  }
}

TEST(LauncherTest, ARankThatCannotStartIsAnErrorNamingIt) {
  LaunchOptions options;
  options.nproc = 2;
  options.argv = {"/nonexistent/tm-launcher-rank"};
  StatusOr<LaunchResult> result = LaunchRanks(options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(result.status().message().find("starting rank 0"), std::string::npos) << result.status().ToString();
  EXPECT_NE(result.status().message().find("/nonexistent/tm-launcher-rank"), std::string::npos);

  options.nproc = 0;
  EXPECT_EQ(LaunchRanks(options).status().code(), Status::Code::kInvalidArgument);
}

TEST(LauncherTest, SigtermToTheLauncherStopsEveryRank) {
  LaunchOptions options;
  options.nproc = 2;
  options.argv = {kMisbehave, "sleep", "30"};
  options.kill_grace_s = 1;
  std::thread interrupter([] {
    // Long enough for LaunchRanks to have installed its handlers and started the ranks.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(getpid(), SIGTERM);
  });
  const auto start = Clock::now();
  StatusOr<LaunchResult> result = LaunchRanks(options);
  interrupter.join();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->interrupt_signal, SIGTERM);
  EXPECT_FALSE(result->failed_rank);
  EXPECT_EQ(result->stopped_ranks, (std::vector<int>{0, 1}));
  EXPECT_LT(SecondsSince(start), 5.0);
  // The handlers LaunchRanks installed are gone again, and the signal it reported forgotten.
  EXPECT_FALSE(SubprocessSet::interrupt_handlers_installed());
  EXPECT_EQ(SubprocessSet::interrupt_signal(), 0);
}

}  // namespace
}  // namespace tmx
