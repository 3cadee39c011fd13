// Child processes for matrix cells, after ninja's subprocess-posix: a Subprocess is a passive record of
// one child, created and driven only by a SubprocessSet that polls all of them in one loop. Each child runs
// in its own process group with /dev/null as stdin and one pipe for its merged stdout and stderr, so a cell
// can be killed as a whole (grandchildren included) and never reads the terminal or sees the user's Ctrl-C;
// the set forwards an interrupt by terminating every group itself. The launcher's ranks (harness/launcher.h)
// instead stay in the parent's group and write to its stdout and stderr (own_process_group, inherit_output).
//
// Not thread-safe: use a set, and the subprocesses it hands out, from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tmx {

struct SubprocessOptions {
  // The program and its arguments. argv[0] is looked up in PATH (the PATH of `env` if it sets one) unless
  // it contains a '/'; a relative path with a '/' is relative to `working_dir`. Never passed to a shell.
  std::vector<std::string> argv;

  // Directory the child starts in; "" keeps the parent's current directory.
  std::string working_dir;

  // Variables added to, or overriding, the parent's environment in the child.
  std::vector<std::pair<std::string, std::string>> env;

  // The CPUs the child (and what it starts) may run on, by number; empty keeps this process's affinity. A CPU
  // outside this process's own mask makes the start fail with the CPUs named. (The matrix's cpu lanes pin
  // each cell to its lane's cores this way, so its threads and /proc/stat's per-CPU counts are its lane's.)
  std::vector<int> cpus;

  // Wall-clock limit in seconds, counted from the start; 0 means none. At the limit the child's process
  // group is terminated and the result has timed_out set.
  double timeout_s = 0;

  // Limit on the resident memory (the sum of VmRSS) of every process in the child's process group, polled
  // from /proc about every 100 ms, so a fast burst between two polls can exceed it; 0 means none. Above it
  // the group is terminated and the result has memory_exceeded set.
  int64_t memory_limit_bytes = 0;

  // How many bytes at the end of the merged output the result keeps in output_tail. The bytes are kept as
  // the child wrote them: they need not be UTF-8 and the first may be inside a multi-byte character.
  size_t tail_bytes = 16384;

  // When set, the full merged output is also written to this file (created or truncated by Add()).
  std::string log_path;

  // Seconds between SIGTERM and SIGKILL when the set terminates the group (timeout, memory limit,
  // interrupt, Clear()); 0 sends SIGKILL at once.
  double kill_grace_s = 2.0;

  // False keeps the child in this process's group instead of its own, so that whoever signals that group (a
  // terminal's Ctrl-C, a parent stopping this process's group) reaches the child too. The set then signals
  // only the child itself, not what the child started, and memory_limit_bytes (which sums a group) must be 0.
  bool own_process_group = true;

  // True lets the child write straight to this process's stdout and stderr instead of the merged pipe;
  // output_tail then stays empty and log_path must be "". stdin is /dev/null either way.
  bool inherit_output = false;

  // True makes the child receive SIGKILL when this process dies, however it dies (SIGKILL included; Linux's
  // parent-death signal), so children that only make sense beside it (a run's ranks) are never orphaned. The
  // signal follows the thread that started the child: start such children from a thread that outlives them.
  bool die_with_parent = false;
};

// How a subprocess ended. Exactly one of exit_code and term_signal is set, unless something else in this
// process reaped the child first (SIGCHLD ignored, a stray waitpid(-1)) and its status was lost.
struct SubprocessResult {
  std::optional<int> exit_code;    // set when the child exited
  std::optional<int> term_signal;  // set when a signal killed the child (ours or its own, e.g. SIGSEGV)
  bool timed_out = false;          // the set terminated it at timeout_s
  bool memory_exceeded = false;    // the set terminated it above memory_limit_bytes
  bool interrupted = false;        // the set terminated it because of an interrupt or TerminateAll()
  // Largest resident memory seen: the polled sum over the process group (a child not yet past exec, still a
  // copy of this process, left out). A child that ended before the first poll gets the kernel's ru_maxrss at
  // exit, which also counts the image it was forked as.
  int64_t peak_rss_bytes = 0;
  double wall_time_s = 0;          // from start to exit
  // CPU time (user + system) of the child and of the descendants it waited for, from wait4 at exit: what the
  // process tree got of the machine (base/cpu_usage.h compares it with what the machine gave everyone).
  double cpu_time_s = 0;
  std::string output_tail;         // the last tail_bytes bytes of the merged output, raw
  std::string log_error;           // why writing log_path stopped, "" if it did not

  // True when the child exited with code 0 on its own.
  bool Succeeded() const;
  // One line for messages, e.g. "exited with code 3", "killed by signal 11 (Segmentation fault)",
  // "timed out after 5 s (killed by signal 15 (Terminated))".
  std::string Describe() const;
};

class SubprocessSet;

// One child process. Created only by SubprocessSet::Add(); owned by the set until NextFinished() hands it
// out, finished. Destroying one that still runs (only the set can) kills its group and reaps it.
class Subprocess {
 public:
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  const SubprocessOptions& options() const { return options_; }
  // True once the child has been reaped and its output read to the end.
  bool Done() const { return done_; }
  // REQUIRES: Done()
  const SubprocessResult& result() const { return result_; }

 private:
  friend class SubprocessSet;
  using Clock = std::chrono::steady_clock;

  explicit Subprocess(SubprocessOptions options);
  // Reads what is available on the output pipe; closes it at end of file.
  void ReadOutput();
  void Append(const char* data, size_t size);
  // Signals the whole process group (the child's pid is its group id); safe until the child is reaped.
  void SignalGroup(int sig);
  // Starts termination: SIGTERM now (SIGKILL if kill_grace_s is 0), SIGKILL after the grace.
  void Terminate(Clock::time_point now);
  // Reaps the child if it has exited, after killing whatever it left in its group. True if reaped.
  bool TryReap(Clock::time_point now);
  void Finish();

  SubprocessOptions options_;
  pid_t pid_ = -1;
  int out_fd_ = -1;  // read end of the merged output pipe; -1 at end of file
  int log_fd_ = -1;
  bool reaped_ = false;
  bool done_ = false;
  Clock::time_point start_;
  Clock::time_point reaped_at_;
  std::optional<Clock::time_point> deadline_;
  std::optional<Clock::time_point> term_sent_at_;
  bool kill_sent_ = false;
  int wait_status_ = 0;
  std::string tail_;
  SubprocessResult result_;
};

// Starts subprocesses and drives all of them: output, limits, interrupts and reaping.
class SubprocessSet {
 public:
  SubprocessSet();
  // Clear()s.
  ~SubprocessSet();
  SubprocessSet(const SubprocessSet&) = delete;
  SubprocessSet& operator=(const SubprocessSet&) = delete;

  // Starts options.argv as a child in its own process group. Returns after the exec succeeded, or an
  // error naming the program when it did not (not found, not executable, bad working_dir, unwritable
  // log_path). The returned pointer stays owned by the set until NextFinished() returns it.
  StatusOr<Subprocess*> Add(const SubprocessOptions& options);

  // Waits until a subprocess has finished, an interrupt arrived, or timeout_ms passed (-1: no limit), doing
  // the work meanwhile: reading output, enforcing timeouts and memory limits, reaping. Returns at once when
  // a finished subprocess is waiting or none runs. On an interrupt every running subprocess is terminated,
  // waited for and queued as finished with interrupted set, and DoWork returns true; otherwise false.
  bool DoWork(int timeout_ms = -1);

  // The next finished subprocess, in the order they finished; null if none.
  std::unique_ptr<Subprocess> NextFinished();

  // Subprocesses started and not yet finished.
  size_t running() const { return running_.size(); }

  // True once this set has seen an interrupt (see InstallInterruptHandlers()).
  bool interrupted() const { return interrupted_; }

  // Terminates every running subprocess (SIGTERM, SIGKILL after its kill_grace_s), waits for all of them
  // and queues them as finished with interrupted set. Finished ones not yet collected keep their results.
  void TerminateAll();

  // Terminates and reaps every running subprocess and discards every unclaimed one, finished or not.
  void Clear();

  // Installs handlers for SIGINT, SIGTERM and SIGHUP that record the signal and wake every DoWork() at
  // once (through a self-pipe). Call once from main(), before starting threads. Idempotent.
  static Status InstallInterruptHandlers();
  // Restores the handlers that were in place before InstallInterruptHandlers().
  static void UninstallInterruptHandlers();
  // True between InstallInterruptHandlers() and UninstallInterruptHandlers().
  static bool interrupt_handlers_installed();
  // The signal that was caught, 0 if none.
  static int interrupt_signal();
  // Forgets a caught signal, so new sets (and this process) can run subprocesses again. For tests.
  static void ResetInterrupt();

 private:
  using Clock = std::chrono::steady_clock;

  // One round: waits for output or the next due event (at most until `until`), then reads, reaps and
  // enforces limits, moving finished subprocesses to finished_.
  void Step(Clock::time_point until);
  // Sums resident memory per process group of the running subprocesses and enforces their limits.
  void PollMemory(Clock::time_point now);
  // Checks the caught-signal flag and drains the self-pipe; true if an interrupt is pending.
  bool CheckInterrupt();
  void WaitForAll();

  std::vector<std::unique_ptr<Subprocess>> running_;
  std::deque<std::unique_ptr<Subprocess>> finished_;
  Clock::time_point next_memory_poll_;
  bool interrupted_ = false;
};

}  // namespace tmx
