#include "base/subprocess.h"

#include "base/cpu_usage.h"
#include "base/process_info.h"
#include "tests/scratch_dir.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace tmx {
namespace {

using Clock = std::chrono::steady_clock;

const char* const kMisbehave = TM_MISBEHAVE_PATH;

SubprocessOptions Misbehave(std::vector<std::string> args) {
  SubprocessOptions options;
  options.argv.push_back(kMisbehave);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.timeout_s = 20;  // a safety net only; each test sets its own where it matters
  return options;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Drives the set until a subprocess finishes and returns it; null when none runs.
std::unique_ptr<Subprocess> WaitFinished(SubprocessSet* set) {
  for (;;) {
    if (std::unique_ptr<Subprocess> done = set->NextFinished()) return done;
    if (set->running() == 0) return nullptr;
    set->DoWork(-1);
  }
}

// Starts one child and runs it to the end.
SubprocessResult RunToEnd(const SubprocessOptions& options) {
  SubprocessSet set;
  StatusOr<Subprocess*> started = set.Add(options);
  EXPECT_TRUE(started.ok()) << started.status().ToString();
  if (!started.ok()) return {};
  std::unique_ptr<Subprocess> done = WaitFinished(&set);
  EXPECT_NE(done, nullptr);
  if (!done) return {};
  EXPECT_TRUE(done->Done());
  EXPECT_EQ(done.get(), *started);
  return done->result();
}

// True once `pid` no longer exists or is a zombie; waits up to a second for it to die.
bool ProcessGone(pid_t pid) {
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  for (;;) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!stat || !std::getline(stat, line)) return true;
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

pid_t GrandchildPid(const std::string& output) {
  const size_t at = output.find("grandchild ");
  if (at == std::string::npos) return -1;
  return static_cast<pid_t>(std::atol(output.c_str() + at + 11));
}

// Drives the set until the child `pid` has a child of its own (misbehave hang's grandchild); -1 if none
// appears within two seconds.
pid_t WaitForGrandchild(SubprocessSet* set, pid_t pid) {
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < deadline) {
    set->DoWork(20);
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name[0] < '0' || name[0] > '9') continue;
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      if (!std::getline(stat, line)) continue;
      const size_t paren = line.rfind(')');
      if (paren == std::string::npos) continue;
      std::istringstream fields(line.substr(paren + 2));
      std::string state;
      long ppid = 0;
      if (fields >> state >> ppid && ppid == pid) return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

// True if this process has no child at all, reaped or not.
bool NoChildrenLeft() {
  int status = 0;
  return waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(SubprocessTest, ExitCodes) {
  struct Case {
    std::vector<std::string> args;
    int code;
  };
  const Case cases[] = {{{"ok"}, 0}, {{"exit", "0"}, 0}, {{"exit", "1"}, 1}, {{"exit", "42"}, 42}, {{"exit", "255"}, 255}};
  for (const Case& c : cases) {
    SCOPED_TRACE("misbehave " + c.args[0] + (c.args.size() > 1 ? " " + c.args[1] : ""));
    const SubprocessResult r = RunToEnd(Misbehave(c.args));
    ASSERT_TRUE(r.exit_code.has_value());
    EXPECT_EQ(*r.exit_code, c.code);
    EXPECT_FALSE(r.term_signal.has_value());
    EXPECT_FALSE(r.timed_out || r.memory_exceeded || r.interrupted);
    EXPECT_EQ(r.Succeeded(), c.code == 0);
  }
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(SubprocessTest, MergesStdoutAndStderrAndMeasures) {
  const SubprocessResult r = RunToEnd(Misbehave({"ok"}));
  EXPECT_EQ(r.output_tail, "hello from stdout\nhello from stderr\n");
  EXPECT_GT(r.peak_rss_bytes, 0);
  EXPECT_GT(r.wall_time_s, 0);
  EXPECT_LT(r.wall_time_s, 2);
  EXPECT_EQ(r.Describe(), "exited with code 0");
}

TEST(SubprocessTest, CrashReportsSigsegv) {
  const SubprocessResult r = RunToEnd(Misbehave({"crash"}));
  EXPECT_FALSE(r.exit_code.has_value());
  ASSERT_TRUE(r.term_signal.has_value());
  EXPECT_EQ(*r.term_signal, SIGSEGV);
  EXPECT_NE(r.Describe().find("killed by signal 11"), std::string::npos) << r.Describe();
}

TEST(SubprocessTest, CpuTimeIsWhatTheChildUsedNotItsWallTime) {
  const SubprocessResult spun = RunToEnd(Misbehave({"spin", "0.4"}));
  ASSERT_TRUE(spun.Succeeded()) << spun.Describe();
  EXPECT_GE(spun.cpu_time_s, 0.39);  // it ran until its own CPU clock said 0.4 s
  EXPECT_LE(spun.cpu_time_s, spun.wall_time_s + 0.05);
  const SubprocessResult slept = RunToEnd(Misbehave({"sleep", "1"}));
  ASSERT_TRUE(slept.Succeeded()) << slept.Describe();
  EXPECT_GE(slept.wall_time_s, 0.9);
  EXPECT_LT(slept.cpu_time_s, 0.2);
}

TEST(SubprocessTest, AbortReportsSigabrt) {
  const SubprocessResult r = RunToEnd(Misbehave({"abort"}));
  ASSERT_TRUE(r.term_signal.has_value());
  EXPECT_EQ(*r.term_signal, SIGABRT);
}

TEST(SubprocessTest, StdinIsDevNull) {
  const SubprocessResult r = RunToEnd(Misbehave({"stdin"}));
  EXPECT_EQ(r.output_tail, "stdin bytes 0\n");
}

TEST(SubprocessTest, ChildLeadsItsOwnProcessGroup) {
  SubprocessSet set;
  SubprocessOptions options = Misbehave({"hang"});
  StatusOr<Subprocess*> sub = set.Add(options);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  EXPECT_EQ(getpgid((*sub)->pid()), (*sub)->pid());
  EXPECT_NE(getpgid((*sub)->pid()), getpgrp());
  EXPECT_FALSE((*sub)->Done());
  EXPECT_EQ(set.running(), 1u);
}

TEST(SubprocessTest, ChildStaysInOurGroupWhenAsked) {
  SubprocessSet set;
  SubprocessOptions options = Misbehave({"sleep", "30"});
  options.own_process_group = false;
  options.kill_grace_s = 0.2;
  StatusOr<Subprocess*> sub = set.Add(options);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  EXPECT_EQ(getpgid((*sub)->pid()), getpgrp());
  // Terminating it signals the child alone, never our own group.
  set.TerminateAll();
  std::unique_ptr<Subprocess> done = set.NextFinished();
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->result().term_signal, SIGTERM) << done->result().Describe();

  // A memory limit sums a process group, which the child does not have.
  options.memory_limit_bytes = 1 << 30;
  StatusOr<Subprocess*> limited = set.Add(options);
  ASSERT_FALSE(limited.ok());
  EXPECT_EQ(limited.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(limited.status().message().find("own_process_group"), std::string::npos) << limited.status().ToString();
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(SubprocessTest, InheritedOutputGoesToOurStdoutAndStderr) {
  test::ScratchDir dir("tm_subprocess_inherit");
  const std::string path = dir.path() + "/out.txt";
  SubprocessOptions options = Misbehave({"ok"});
  options.inherit_output = true;
  // Point our stdout and stderr at a file while the child runs.
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = dup(1);
  const int saved_err = dup(2);
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  dup2(fileno(file), 1);
  dup2(fileno(file), 2);
  const SubprocessResult r = RunToEnd(options);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  std::fclose(file);
  EXPECT_TRUE(r.Succeeded()) << r.Describe();
  EXPECT_EQ(r.output_tail, "");
  std::ifstream in(path);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), "hello from stdout\nhello from stderr\n");

  options.log_path = dir.path() + "/cell.log";
  SubprocessSet set;
  StatusOr<Subprocess*> logged = set.Add(options);
  ASSERT_FALSE(logged.ok());
  EXPECT_EQ(logged.status().code(), Status::Code::kInvalidArgument);
}

TEST(SubprocessTest, HangIsKilledAtTimeoutWithItsGrandchild) {
  SubprocessOptions options = Misbehave({"hang"});
  options.timeout_s = 0.3;
  const auto start = Clock::now();
  const SubprocessResult r = RunToEnd(options);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.memory_exceeded || r.interrupted);
  ASSERT_TRUE(r.term_signal.has_value());
  EXPECT_EQ(*r.term_signal, SIGTERM);
  EXPECT_GE(r.wall_time_s, 0.3);
  EXPECT_LT(SecondsSince(start), 1.5);
  const pid_t grandchild = GrandchildPid(r.output_tail);
  ASSERT_GT(grandchild, 0) << r.output_tail;
  EXPECT_TRUE(ProcessGone(grandchild)) << "grandchild " << grandchild << " survived the group kill";
  EXPECT_NE(r.Describe().find("timed out"), std::string::npos) << r.Describe();
}

TEST(SubprocessTest, IgnoredSigtermEscalatesToSigkill) {
  SubprocessOptions options = Misbehave({"ignore-term"});
  options.timeout_s = 0.3;
  options.kill_grace_s = 0.3;
  const SubprocessResult r = RunToEnd(options);
  EXPECT_TRUE(r.timed_out);
  ASSERT_TRUE(r.term_signal.has_value());
  EXPECT_EQ(*r.term_signal, SIGKILL);
  EXPECT_GE(r.wall_time_s, 0.6);
  EXPECT_LT(r.wall_time_s, 2);
  EXPECT_EQ(r.output_tail, "ignoring SIGTERM\n");
}

TEST(SubprocessTest, MemoryLimitKillsTheChild) {
  SubprocessOptions options = Misbehave({"alloc", "256"});
  options.memory_limit_bytes = int64_t{64} << 20;
  options.timeout_s = 10;
  const SubprocessResult r = RunToEnd(options);
  EXPECT_TRUE(r.memory_exceeded);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(r.term_signal.has_value());
  EXPECT_GT(r.peak_rss_bytes, options.memory_limit_bytes);
  EXPECT_LT(r.wall_time_s, 3);
  EXPECT_NE(r.Describe().find("memory limit"), std::string::npos) << r.Describe();
}

TEST(SubprocessTest, MemoryBelowLimitIsTracked) {
  SubprocessOptions options = Misbehave({"alloc", "32"});
  options.memory_limit_bytes = int64_t{512} << 20;
  options.timeout_s = 0.5;
  const SubprocessResult r = RunToEnd(options);
  EXPECT_FALSE(r.memory_exceeded);
  EXPECT_TRUE(r.timed_out);
  EXPECT_GE(r.peak_rss_bytes, int64_t{32} << 20);
}

TEST(SubprocessTest, GarbageOutputIsKeptRawAndBounded) {
  test::ScratchDir scratch("subprocess_test");
  const std::string dir = scratch.path();
  SubprocessOptions options = Misbehave({"garbage"});
  options.tail_bytes = 1000;
  options.log_path = dir + "/garbage.log";
  const SubprocessResult r = RunToEnd(options);
  ASSERT_TRUE(r.exit_code.has_value());
  EXPECT_EQ(*r.exit_code, 3);
  EXPECT_EQ(r.output_tail.size(), 1000u);
  const std::string end = "END-OF-GARBAGE\n";
  ASSERT_GE(r.output_tail.size(), end.size());
  EXPECT_EQ(r.output_tail.substr(r.output_tail.size() - end.size()), end);
  const std::string log = ReadAll(options.log_path);
  EXPECT_EQ(log.size(), 16u * 4096 + 3 * 200001 + 7 + end.size());
  EXPECT_EQ(log.substr(0, 4), std::string("\0\1\2\3", 4));
  EXPECT_TRUE(r.log_error.empty()) << r.log_error;
}

TEST(SubprocessTest, TailKeepsTheEndOfLongOutput) {
  test::ScratchDir scratch("subprocess_test");
  const std::string dir = scratch.path();
  SubprocessOptions options = Misbehave({"spew", "50000"});
  options.tail_bytes = 64;
  options.log_path = dir + "/spew.log";
  const SubprocessResult r = RunToEnd(options);
  EXPECT_EQ(r.output_tail.size(), 64u);
  EXPECT_EQ(r.output_tail.substr(r.output_tail.size() - 11), "line 49999\n");
  std::string expected;
  for (int i = 0; i < 50000; ++i) expected += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(ReadAll(options.log_path), expected);
}

TEST(SubprocessTest, ZeroTailBytesKeepsNothing) {
  SubprocessOptions options = Misbehave({"spew", "10"});
  options.tail_bytes = 0;
  EXPECT_EQ(RunToEnd(options).output_tail, "");
}

TEST(SubprocessTest, MissingProgramIsAClearError) {
  SubprocessSet set;
  SubprocessOptions options;
  options.argv = {"tm-no-such-program-1234", "--flag"};
  StatusOr<Subprocess*> sub = set.Add(options);
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status().code(), Status::Code::kNotFound);
  EXPECT_NE(sub.status().message().find("'tm-no-such-program-1234'"), std::string::npos) << sub.status().ToString();
  EXPECT_NE(sub.status().message().find("PATH"), std::string::npos) << sub.status().ToString();

  options.argv = {"/nonexistent/dir/tm-prog"};
  sub = set.Add(options);
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status().code(), Status::Code::kNotFound);
  EXPECT_NE(sub.status().message().find("'/nonexistent/dir/tm-prog'"), std::string::npos);

  EXPECT_EQ(set.running(), 0u);
  EXPECT_TRUE(NoChildrenLeft());
}

// A child pinned to CPUs runs on those only (what it starts too: the mask is inherited), and a CPU this process
// may not use fails the start naming it.
TEST(SubprocessTest, CpusPinTheChildAndABadCpuIsNamed) {
  const std::vector<int> mine = ReadAffinityCpus();
  ASSERT_FALSE(mine.empty());
  SubprocessOptions options;
  options.argv = {"grep", "Cpus_allowed_list", "/proc/self/status"};
  options.cpus = {mine.back()};
  EXPECT_EQ(RunToEnd(options).output_tail, "Cpus_allowed_list:\t" + std::to_string(mine.back()) + "\n");

  SubprocessSet set;
  options.cpus = {1000};
  StatusOr<Subprocess*> sub = set.Add(options);
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status().message().rfind("cannot start 'grep': cannot run it on CPUs 1000 (sched_setaffinity: ", 0), 0u)
      << sub.status().ToString();
  options.cpus = {-1};
  EXPECT_EQ(set.Add(options).status().message(), "cannot start 'grep': CPU -1 is outside 0 to 1023");
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(SubprocessTest, NonExecutableFileIsAClearError) {
  test::ScratchDir scratch("subprocess_test");
  const std::string path = scratch.path() + "/not-executable";
  std::ofstream(path) << "just text\n";
  chmod(path.c_str(), 0644);
  SubprocessSet set;
  SubprocessOptions options;
  options.argv = {path};
  StatusOr<Subprocess*> sub = set.Add(options);
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(sub.status().message().find("permission denied"), std::string::npos) << sub.status().ToString();
}

TEST(SubprocessTest, PathFromEnvIsSearched) {
  const std::string exe = kMisbehave;
  const std::string dir = exe.substr(0, exe.rfind('/'));
  const std::string name = exe.substr(exe.rfind('/') + 1);
  SubprocessOptions options;
  options.argv = {name, "exit", "7"};
  options.env = {{"PATH", "/nonexistent:" + dir}};
  const SubprocessResult r = RunToEnd(options);
  ASSERT_TRUE(r.exit_code.has_value());
  EXPECT_EQ(*r.exit_code, 7);
}

TEST(SubprocessTest, BadArgumentsAreErrors) {
  SubprocessSet set;
  StatusOr<Subprocess*> sub = set.Add(SubprocessOptions());
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status().code(), Status::Code::kInvalidArgument);

  SubprocessOptions options = Misbehave({"ok"});
  options.working_dir = "/nonexistent/tm-workdir";
  sub = set.Add(options);
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status().code(), Status::Code::kNotFound);
  EXPECT_NE(sub.status().message().find("/nonexistent/tm-workdir"), std::string::npos) << sub.status().ToString();

  options = Misbehave({"ok"});
  options.log_path = "/nonexistent/dir/cell.log";
  sub = set.Add(options);
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status().code(), Status::Code::kIoError);
  EXPECT_NE(sub.status().message().find("/nonexistent/dir/cell.log"), std::string::npos);
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(SubprocessTest, EnvironmentIsPassedAndOverridden) {
  setenv("TM_SUBPROCESS_TEST_INHERITED", "from parent", 1);
  setenv("TM_SUBPROCESS_TEST_OVERRIDE", "old", 1);
  struct Case {
    std::string name;
    std::string expected;
  };
  const Case cases[] = {{"TM_SUBPROCESS_TEST_ADDED", "hello world\n"},
                        {"TM_SUBPROCESS_TEST_OVERRIDE", "new=value\n"},
                        {"TM_SUBPROCESS_TEST_INHERITED", "from parent\n"},
                        {"TM_SUBPROCESS_TEST_UNSET", "<unset>\n"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SubprocessOptions options = Misbehave({"env", c.name});
    options.env = {{"TM_SUBPROCESS_TEST_ADDED", "hello world"}, {"TM_SUBPROCESS_TEST_OVERRIDE", "new=value"}};
    EXPECT_EQ(RunToEnd(options).output_tail, c.expected);
  }
}

TEST(SubprocessTest, WorkingDirectory) {
  test::ScratchDir scratch("subprocess_test");
  const std::string dir = scratch.path();
  SubprocessOptions options = Misbehave({"pwd"});
  options.working_dir = dir;
  char* real = realpath(dir.c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  const std::string expected = std::string(real) + "\n";
  std::free(real);
  EXPECT_EQ(RunToEnd(options).output_tail, expected);
}

TEST(SubprocessTest, ChildrenRunInParallel) {
  SubprocessSet set;
  const auto start = Clock::now();
  std::set<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    SubprocessOptions options = Misbehave({"hang"});
    options.timeout_s = 0.4;
    StatusOr<Subprocess*> sub = set.Add(options);
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
    pids.insert((*sub)->pid());
  }
  std::multiset<int> codes;
  for (int code : {3, 4, 5}) {
    StatusOr<Subprocess*> sub = set.Add(Misbehave({"exit", std::to_string(code)}));
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  }
  EXPECT_EQ(set.running(), 6u);
  std::set<pid_t> timed_out;
  while (std::unique_ptr<Subprocess> done = WaitFinished(&set)) {
    if (done->result().timed_out) timed_out.insert(done->pid());
    if (done->result().exit_code) codes.insert(*done->result().exit_code);
  }
  EXPECT_EQ(timed_out, pids);
  EXPECT_EQ(codes, (std::multiset<int>{3, 4, 5}));
  EXPECT_LT(SecondsSince(start), 1.0) << "three 0.4 s timeouts should overlap";
  EXPECT_EQ(set.running(), 0u);
}

TEST(SubprocessTest, DoWorkReturnsAtItsTimeout) {
  SubprocessSet set;
  ASSERT_TRUE(set.Add(Misbehave({"hang"})).ok());
  const auto start = Clock::now();
  EXPECT_FALSE(set.DoWork(150));
  const double waited = SecondsSince(start);
  EXPECT_GE(waited, 0.14);
  EXPECT_LT(waited, 1.0);
  EXPECT_EQ(set.NextFinished(), nullptr);
  EXPECT_EQ(set.running(), 1u);
}

TEST(SubprocessTest, DestructorKillsAndReapsEverything) {
  pid_t grandchild = -1;
  {
    SubprocessSet set;
    StatusOr<Subprocess*> hang = set.Add(Misbehave({"hang"}));
    ASSERT_TRUE(hang.ok());
    grandchild = WaitForGrandchild(&set, (*hang)->pid());
    ASSERT_GT(grandchild, 0);
    SubprocessOptions stubborn = Misbehave({"ignore-term"});
    stubborn.kill_grace_s = 0.2;
    ASSERT_TRUE(set.Add(stubborn).ok());
    // One child finishes and stays unclaimed.
    ASSERT_TRUE(set.Add(Misbehave({"exit", "0"})).ok());
    while (set.running() == 3) set.DoWork(50);
  }
  EXPECT_TRUE(NoChildrenLeft());
  EXPECT_TRUE(ProcessGone(grandchild));
}

TEST(SubprocessTest, ClearKillsGroupsAndReaps) {
  SubprocessSet set;
  StatusOr<Subprocess*> sub = set.Add(Misbehave({"hang"}));
  ASSERT_TRUE(sub.ok());
  const pid_t grandchild = WaitForGrandchild(&set, (*sub)->pid());
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(set.Add(Misbehave({"exit", "1"})).ok());
  set.Clear();
  EXPECT_EQ(set.running(), 0u);
  EXPECT_EQ(set.NextFinished(), nullptr);
  EXPECT_TRUE(NoChildrenLeft());
  EXPECT_TRUE(ProcessGone(grandchild));
}

class InterruptTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(SubprocessSet::InstallInterruptHandlers().ok()); }
  void TearDown() override {
    SubprocessSet::UninstallInterruptHandlers();
    SubprocessSet::ResetInterrupt();
  }
};

TEST_F(InterruptTest, SigintKillsChildrenAndMarksThemInterrupted) {
  SubprocessSet set;
  SubprocessOptions hang = Misbehave({"hang"});
  ASSERT_TRUE(set.Add(hang).ok());
  SubprocessOptions stubborn = Misbehave({"ignore-term"});
  stubborn.kill_grace_s = 0.3;
  ASSERT_TRUE(set.Add(stubborn).ok());
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(getpid(), SIGINT);
  });
  const auto start = Clock::now();
  bool interrupted = false;
  while (!interrupted && SecondsSince(start) < 5) interrupted = set.DoWork(-1);
  interrupter.join();
  EXPECT_TRUE(interrupted);
  EXPECT_TRUE(set.interrupted());
  EXPECT_EQ(SubprocessSet::interrupt_signal(), SIGINT);
  EXPECT_LT(SecondsSince(start), 1.5);
  EXPECT_EQ(set.running(), 0u);

  int count = 0;
  while (std::unique_ptr<Subprocess> done = set.NextFinished()) {
    ++count;
    const SubprocessResult& r = done->result();
    EXPECT_TRUE(r.interrupted);
    EXPECT_FALSE(r.timed_out);
    ASSERT_TRUE(r.term_signal.has_value());
    if (r.output_tail == "ignoring SIGTERM\n") {
      EXPECT_EQ(*r.term_signal, SIGKILL);
    } else {
      EXPECT_EQ(*r.term_signal, SIGTERM);
      const pid_t grandchild = GrandchildPid(r.output_tail);
      ASSERT_GT(grandchild, 0) << r.output_tail;
      EXPECT_TRUE(ProcessGone(grandchild));
    }
    EXPECT_NE(r.Describe().find("interrupted"), std::string::npos) << r.Describe();
  }
  EXPECT_EQ(count, 2);

  // An interrupted set starts nothing new.
  StatusOr<Subprocess*> late = set.Add(Misbehave({"ok"}));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_TRUE(NoChildrenLeft());
}

TEST_F(InterruptTest, InterruptWakesAnIdleWait) {
  SubprocessSet set;
  SubprocessOptions options = Misbehave({"hang"});
  ASSERT_TRUE(set.Add(options).ok());
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(getpid(), SIGTERM);
  });
  const auto start = Clock::now();
  EXPECT_TRUE(set.DoWork(5000));
  interrupter.join();
  EXPECT_LT(SecondsSince(start), 1.0);
  std::unique_ptr<Subprocess> done = set.NextFinished();
  ASSERT_NE(done, nullptr);
  EXPECT_TRUE(done->result().interrupted);
}

TEST(SubprocessTest, TerminateAllMarksRunningOnesInterrupted) {
  SubprocessSet set;
  ASSERT_TRUE(set.Add(Misbehave({"hang"})).ok());
  ASSERT_TRUE(set.Add(Misbehave({"exit", "9"})).ok());
  // Let the quick one finish first, unclaimed.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (set.running() == 2 && Clock::now() < deadline) set.DoWork(20);
  set.TerminateAll();
  EXPECT_FALSE(set.interrupted());
  std::unique_ptr<Subprocess> first = set.NextFinished();
  std::unique_ptr<Subprocess> second = set.NextFinished();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->result().exit_code, 9);
  EXPECT_FALSE(first->result().interrupted);
  EXPECT_TRUE(second->result().interrupted);
  EXPECT_EQ(set.NextFinished(), nullptr);
}

// A parent killed outright (SIGKILL: no handler runs, no destructor) takes a die_with_parent child with it;
// without the option the child lives on, orphaned.
TEST(SubprocessTest, DieWithParentEndsTheChildWhenItsParentIsKilled) {
  for (bool die_with_parent : {true, false}) {
    SCOPED_TRACE(die_with_parent ? "die_with_parent" : "default");
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t parent = fork();
    ASSERT_GE(parent, 0);
    if (parent == 0) {
      // The parent to be killed: starts a sleeping child, reports its pid, then waits to be killed.
      close(fds[0]);
      SubprocessSet set;
      SubprocessOptions o;
      o.argv = {kMisbehave, "sleep", "30"};
      o.die_with_parent = die_with_parent;
      StatusOr<Subprocess*> child = set.Add(o);
      const pid_t pid = child.ok() ? (*child)->pid() : -1;
      if (write(fds[1], &pid, sizeof pid) != sizeof pid) _exit(1);
      for (;;) pause();
    }
    close(fds[1]);
    pid_t child = -1;
    ASSERT_EQ(read(fds[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
    close(fds[0]);
    ASSERT_GT(child, 0);
    kill(parent, SIGKILL);
    waitpid(parent, nullptr, 0);
    const auto start = std::chrono::steady_clock::now();
    const auto limit = std::chrono::seconds(die_with_parent ? 5 : 1);  // the orphan's case only shows it lives on
    while (!ProcessEnded(child) && std::chrono::steady_clock::now() - start < limit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(ProcessEnded(child), die_with_parent);
    if (!ProcessEnded(child)) kill(child, SIGKILL);  // the orphan of the default case
  }
}

}  // namespace
}  // namespace tmx
