#include "base/subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

extern char** environ;

namespace tmx {
namespace {

using Clock = std::chrono::steady_clock;

// How often resident memory is sampled, and how often a child whose pipe gives no news is checked for exit.
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// How soon to look again for the exit of a child that closed its output (usually: it is exiting).
constexpr auto kExitCheckInterval = std::chrono::milliseconds(5);
// How long to keep reading after the child was reaped and its group killed. Only a process that left the
// group (setsid) can still hold the pipe then; its output after this is dropped.
constexpr auto kDrainLimit = std::chrono::milliseconds(500);

// The interrupt state has to be global: a signal handler can reach nothing else. It is written only by
// the handler and by the static functions of SubprocessSet.
volatile sig_atomic_t g_interrupt_signal = 0;
int g_interrupt_pipe[2] = {-1, -1};
bool g_handlers_installed = false;
constexpr int kInterruptSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old_actions[sizeof(kInterruptSignals) / sizeof(kInterruptSignals[0])];

void OnInterruptSignal(int sig) {
  const int saved_errno = errno;
  g_interrupt_signal = sig;
  if (g_interrupt_pipe[1] >= 0) {
    const char byte = 0;
    ssize_t ignored = write(g_interrupt_pipe[1], &byte, 1);  // a full pipe already wakes every poll
    (void)ignored;
  }
  errno = saved_errno;
}

std::string ErrnoText(int err) { return std::strerror(err); }

// Moves `fd` above the standard descriptors (0-2) so that the child's dup2() calls cannot clobber it when
// the parent runs with some of them closed. Keeps O_CLOEXEC.
int MoveAboveStdio(int fd) {
  if (fd > 2) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

// What the child reports through the status pipe when it cannot exec.
struct ChildFailure {
  enum Stage : int { kStdio = 1, kChdir = 2, kExec = 3, kDeathSignal = 4, kAffinity = 5 };
  int stage;
  int err;
};

// Everything the child needs, prepared before fork(): after it the child may only call async-signal-safe
// functions, so it must not allocate.
struct ChildPlan {
  std::vector<char*> argv;
  std::vector<std::string> env_storage;
  std::vector<char*> envp;
  std::vector<std::string> candidates;  // paths to try with execve(), in PATH order
  const char* working_dir = nullptr;
  int stdin_fd = -1;
  int out_fd = -1;
  int status_fd = -1;
  bool own_process_group = true;
  pid_t die_with = 0;  // die_with_parent: the parent's pid, to catch a parent that died before prctl
  bool pin = false;    // options.cpus set: the child runs on `cpus` only
  cpu_set_t cpus;
};

void BuildEnvironment(const SubprocessOptions& options, ChildPlan* plan) {
  auto overridden = [&](const char* entry) {
    const char* eq = std::strchr(entry, '=');
    const size_t name_len = eq ? static_cast<size_t>(eq - entry) : std::strlen(entry);
    for (const auto& [name, value] : options.env) {
      if (name.size() == name_len && std::strncmp(entry, name.c_str(), name_len) == 0) return true;
    }
    return false;
  };
  for (char** e = environ; e && *e; ++e) {
    if (!overridden(*e)) plan->env_storage.emplace_back(*e);
  }
  for (const auto& [name, value] : options.env) plan->env_storage.push_back(name + "=" + value);
  for (auto& entry : plan->env_storage) plan->envp.push_back(entry.data());
  plan->envp.push_back(nullptr);
}

// execvp()'s search, done in the parent so that the child's PATH (from options.env) is the one searched.
void BuildCandidates(const SubprocessOptions& options, ChildPlan* plan) {
  const std::string& program = options.argv[0];
  if (program.find('/') != std::string::npos) {
    plan->candidates.push_back(program);
    return;
  }
  std::string path;
  bool have_path = false;
  for (const auto& [name, value] : options.env) {
    if (name == "PATH") {
      path = value;
      have_path = true;
    }
  }
  if (!have_path) {
    const char* p = std::getenv("PATH");
    path = p ? p : "/usr/local/bin:/usr/bin:/bin";
  }
  size_t begin = 0;
  for (;;) {
    const size_t end = path.find(':', begin);
    std::string dir = path.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (dir.empty()) dir = ".";
    plan->candidates.push_back(dir + "/" + program);
    if (end == std::string::npos) break;
    begin = end + 1;
  }
}

[[noreturn]] void ReportAndExit(int status_fd, ChildFailure::Stage stage, int err) {
  const ChildFailure failure{stage, err};
  ssize_t ignored = write(status_fd, &failure, sizeof failure);
  (void)ignored;
  _exit(127);
}

// Runs in the child between fork() and exec; async-signal-safe calls only.
[[noreturn]] void RunChild(const ChildPlan& plan) {
  // Our own process group: the terminal's Ctrl-C does not reach us, and the parent can kill us as a whole.
  if (plan.own_process_group) setpgid(0, 0);
  if (plan.die_with > 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ReportAndExit(plan.status_fd, ChildFailure::kDeathSignal, errno);
    if (getppid() != plan.die_with) _exit(127);  // the parent is gone already: its death signal was missed
  }

  if (plan.pin && sched_setaffinity(0, sizeof plan.cpus, &plan.cpus) != 0) {
    ReportAndExit(plan.status_fd, ChildFailure::kAffinity, errno);
  }

  // Handlers do not survive exec, but ignored signals and the signal mask do; start the program clean.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // Without an output pipe (inherit_output) stdout and stderr stay the parent's.
  if (dup2(plan.stdin_fd, 0) < 0 ||
      (plan.out_fd >= 0 && (dup2(plan.out_fd, 1) < 0 || dup2(plan.out_fd, 2) < 0))) {
    ReportAndExit(plan.status_fd, ChildFailure::kStdio, errno);
  }
  if (plan.working_dir && chdir(plan.working_dir) != 0) {
    ReportAndExit(plan.status_fd, ChildFailure::kChdir, errno);
  }
  // Like execvp(): a directory where the file is missing is skipped, EACCES is remembered if nothing runs.
  int err = ENOENT;
  bool saw_eacces = false;
  for (const auto& candidate : plan.candidates) {
    execve(candidate.c_str(), plan.argv.data(), plan.envp.data());
    err = errno;
    if (err == EACCES) {
      saw_eacces = true;
    } else if (err != ENOENT && err != ENOTDIR) {
      break;
    }
  }
  if (saw_eacces && (err == ENOENT || err == ENOTDIR)) err = EACCES;
  ReportAndExit(plan.status_fd, ChildFailure::kExec, err);
}

Status FailureStatus(const SubprocessOptions& options, const ChildFailure& failure) {
  const std::string subject = "cannot start '" + options.argv[0] + "'";
  const int err = failure.err;
  switch (failure.stage) {
    case ChildFailure::kDeathSignal:
      return Status::Internal(subject + ": cannot ask for a signal when this process dies (prctl: " + ErrnoText(err) +
                              ")");
    case ChildFailure::kAffinity: {
      std::string cpus;
      for (int cpu : options.cpus) cpus += (cpus.empty() ? "" : ",") + std::to_string(cpu);
      return Status::InvalidArgument(subject + ": cannot run it on CPUs " + cpus + " (sched_setaffinity: " +
                                     ErrnoText(err) + "); fix: name CPUs this process may use");
    }
    case ChildFailure::kChdir:
      if (err == ENOENT || err == ENOTDIR) {
        return Status::NotFound(subject + ": working directory '" + options.working_dir + "' does not exist");
      }
      return Status::IoError(subject + ": cannot enter working directory '" + options.working_dir + "' (" +
                             ErrnoText(err) + ")");
    case ChildFailure::kExec:
      if (err == ENOENT || err == ENOTDIR) {
        if (options.argv[0].find('/') == std::string::npos) {
          return Status::NotFound(subject + ": no such program in PATH (install it, or give its full path)");
        }
        return Status::NotFound(subject + ": no such file");
      }
      if (err == EACCES) {
        return Status::FailedPrecondition(subject + ": permission denied (is it an executable file?)");
      }
      if (err == ENOEXEC) {
        return Status::FailedPrecondition(subject + ": not an executable format (a script needs a #! line)");
      }
      return Status::Internal(subject + ": exec failed (" + ErrnoText(err) + ")");
    default:
      return Status::Internal(subject + ": cannot set up its stdin and output (" + ErrnoText(err) + ")");
  }
}

void CloseIfOpen(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

int64_t PageSize() {
  static const int64_t page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
  return page;
}

// Reads the process group and resident pages from /proc/<pid>/stat. False if the process is gone.
// Whether process `pid` runs this very executable (as a child does between fork and exec).
bool IsImageOfThisProgram(const char* pid) {
  static const std::string self = [] {
    char buf[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }();
  char path[64], buf[PATH_MAX];
  std::snprintf(path, sizeof path, "/proc/%s/exe", pid);
  const ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 && !self.empty() && self.compare(0, std::string::npos, buf, static_cast<size_t>(n)) == 0;
}

bool ReadProcStat(const char* pid, pid_t* pgrp, int64_t* rss_pages) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[2048];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // The command name (field 2) is in parentheses and may itself hold spaces and ')'; fields after the
  // last ')' are plain numbers: state(3) ppid(4) pgrp(5) ... rss(24).
  const char* p = std::strrchr(buf, ')');
  if (!p) return false;
  ++p;
  int field = 2;
  long long pgrp_value = -1;
  long long rss_value = -1;
  while (*p && field < 24) {
    while (*p == ' ') ++p;
    ++field;
    if (field == 5) pgrp_value = std::strtoll(p, nullptr, 10);
    if (field == 24) rss_value = std::strtoll(p, nullptr, 10);
    while (*p && *p != ' ') ++p;
  }
  if (pgrp_value < 0 || rss_value < 0) return false;
  *pgrp = static_cast<pid_t>(pgrp_value);
  *rss_pages = rss_value;
  return true;
}

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

}  // namespace

bool SubprocessResult::Succeeded() const {
  return exit_code == 0 && !timed_out && !memory_exceeded && !interrupted;
}

std::string SubprocessResult::Describe() const {
  std::string how;
  if (exit_code) {
    how = "exited with code " + std::to_string(*exit_code);
  } else if (term_signal) {
    const char* name = strsignal(*term_signal);
    how = "killed by signal " + std::to_string(*term_signal) + (name ? std::string(" (") + name + ")" : "");
  } else {
    how = "ended with an unknown status (it was reaped elsewhere)";
  }
  if (interrupted) return "interrupted after " + FormatSeconds(wall_time_s) + " (" + how + ")";
  if (timed_out) return "timed out after " + FormatSeconds(wall_time_s) + " (" + how + ")";
  if (memory_exceeded) {
    return "exceeded its memory limit at " + std::to_string(peak_rss_bytes >> 20) + " MiB resident (" + how + ")";
  }
  return how;
}

// ---- Subprocess ----

Subprocess::Subprocess(SubprocessOptions options) : options_(std::move(options)) {}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !reaped_) {
    SignalGroup(SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  CloseIfOpen(&out_fd_);
  CloseIfOpen(&log_fd_);
}

void Subprocess::ReadOutput() {
  char buf[65536];
  // A few reads per wake-up keep a chatty child moving without starving the others.
  for (int i = 0; i < 16 && out_fd_ >= 0; ++i) {
    const ssize_t n = read(out_fd_, buf, sizeof buf);
    if (n > 0) {
      Append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof buf) return;
    } else if (n == 0) {
      CloseIfOpen(&out_fd_);
    } else if (errno == EINTR) {
      continue;
    } else {
      if (errno != EAGAIN && errno != EWOULDBLOCK) CloseIfOpen(&out_fd_);
      return;
    }
  }
}

void Subprocess::Append(const char* data, size_t size) {
  if (log_fd_ >= 0) {
    size_t written = 0;
    while (written < size) {
      const ssize_t n = write(log_fd_, data + written, size - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        result_.log_error = options_.log_path + ": writing the log failed (" +
                            ErrnoText(n < 0 ? errno : EIO) + "); later output is missing from it";
        CloseIfOpen(&log_fd_);
        break;
      }
      written += static_cast<size_t>(n);
    }
  }
  const size_t keep = options_.tail_bytes;
  if (keep == 0) return;
  if (size >= keep) {
    tail_.assign(data + (size - keep), keep);
    return;
  }
  tail_.append(data, size);
  // Trim lazily, so a stream of small writes costs amortised O(1) per byte.
  if (tail_.size() > 2 * keep) tail_.erase(0, tail_.size() - keep);
}

void Subprocess::SignalGroup(int sig) {
  if (pid_ <= 0 || reaped_) return;
  if (!options_.own_process_group) {
    kill(pid_, sig);
    return;
  }
  // The child may have moved itself to another group; then at least the child itself gets the signal.
  if (kill(-pid_, sig) != 0 && errno == ESRCH) kill(pid_, sig);
}

void Subprocess::Terminate(Clock::time_point now) {
  if (reaped_ || term_sent_at_) return;
  term_sent_at_ = now;
  if (options_.kill_grace_s <= 0) {
    SignalGroup(SIGKILL);
    kill_sent_ = true;
  } else {
    SignalGroup(SIGTERM);
  }
}

bool Subprocess::TryReap(Clock::time_point now) {
  if (reaped_) return true;
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  // WNOWAIT leaves the child a zombie, which keeps its pid, and so its group id, from being reused while
  // we kill what it left in its group.
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno == EINTR) return false;
    // ECHILD: someone else reaped it (SIGCHLD ignored, or a waitpid(-1) elsewhere); its status is lost.
    reaped_ = true;
    reaped_at_ = now;
    wait_status_ = -1;
    return true;
  }
  if (info.si_pid == 0) return false;
  if (options_.own_process_group) kill(-pid_, SIGKILL);
  int status = 0;
  struct rusage usage;
  std::memset(&usage, 0, sizeof usage);
  pid_t r;
  while ((r = wait4(pid_, &status, 0, &usage)) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  reaped_at_ = now;
  wait_status_ = r == pid_ ? status : -1;
  // ru_maxrss counts the image the child was forked as (this process) too; only a child that ended before
  // the first poll is left with it.
  if (result_.peak_rss_bytes == 0) result_.peak_rss_bytes = int64_t{usage.ru_maxrss} * 1024;
  if (r == pid_) {
    result_.cpu_time_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  }
  return true;
}

void Subprocess::Finish() {
  if (wait_status_ != -1) {
    if (WIFEXITED(wait_status_)) result_.exit_code = WEXITSTATUS(wait_status_);
    if (WIFSIGNALED(wait_status_)) result_.term_signal = WTERMSIG(wait_status_);
  }
  result_.wall_time_s = std::chrono::duration<double>(reaped_at_ - start_).count();
  if (tail_.size() > options_.tail_bytes) tail_.erase(0, tail_.size() - options_.tail_bytes);
  result_.output_tail = std::move(tail_);
  tail_.clear();
  CloseIfOpen(&out_fd_);
  CloseIfOpen(&log_fd_);
  done_ = true;
}

// ---- SubprocessSet ----

SubprocessSet::SubprocessSet() : next_memory_poll_(Clock::now()) {}

SubprocessSet::~SubprocessSet() { Clear(); }

namespace {

// Options no child can start with: no program, a memory limit without its group, a log without the pipe.
Status CheckStartable(const SubprocessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return Status::InvalidArgument("cannot start a subprocess: argv is empty (name the program to run)");
  }
  if (!options.own_process_group && options.memory_limit_bytes > 0) {
    return Status::InvalidArgument("cannot start '" + options.argv[0] +
                                   "': memory_limit_bytes needs own_process_group (the limit sums a group)");
  }
  if (options.inherit_output && !options.log_path.empty()) {
    return Status::InvalidArgument("cannot start '" + options.argv[0] +
                                   "': log_path needs the output pipe (inherit_output is set)");
  }
  return Status::OK();
}

// What the child does between fork and exec, all of it prepared before the fork: argv, environment, the
// candidates for execve, its folder and CPUs. The plan points into `options`, which must outlive it.
Status PlanChild(const SubprocessOptions& options, ChildPlan* plan) {
  for (const auto& arg : options.argv) plan->argv.push_back(const_cast<char*>(arg.c_str()));
  plan->argv.push_back(nullptr);
  BuildEnvironment(options, plan);
  BuildCandidates(options, plan);
  if (!options.working_dir.empty()) plan->working_dir = options.working_dir.c_str();
  CPU_ZERO(&plan->cpus);
  for (int cpu : options.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return Status::InvalidArgument("cannot start '" + options.argv[0] + "': CPU " + std::to_string(cpu) +
                                     " is outside 0 to " + std::to_string(CPU_SETSIZE - 1));
    }
    CPU_SET(cpu, &plan->cpus);
    plan->pin = true;
  }
  plan->own_process_group = options.own_process_group;
  plan->die_with = options.die_with_parent ? getpid() : 0;
  return Status::OK();
}

// The descriptors a child starts with: /dev/null for its input, the output pipe (unless it inherits ours) and
// the status pipe that carries a failed exec back. Each closed by its owner's destructor unless taken.
struct ChildPipes {
  int devnull = -1;
  int out[2] = {-1, -1};
  int status[2] = {-1, -1};
  ~ChildPipes() {
    for (int* fd : {&devnull, &out[0], &out[1], &status[0], &status[1]}) CloseIfOpen(fd);
  }
  // The read end of the output pipe, no longer closed here.
  int TakeOutput() { return std::exchange(out[0], -1); }
};

// Opens the child's descriptors, the child's ends above stdio so its dup2 onto 0-2 cannot clobber them, into
// `plan`.
Status OpenPipes(const SubprocessOptions& options, ChildPipes* pipes, ChildPlan* plan) {
  pipes->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (pipes->devnull < 0 || (!options.inherit_output && pipe2(pipes->out, O_CLOEXEC) != 0) ||
      pipe2(pipes->status, O_CLOEXEC) != 0) {
    const int err = errno;
    return Status::Internal("cannot start '" + options.argv[0] + "': cannot create its pipes (" + ErrnoText(err) +
                            ")");
  }
  pipes->devnull = MoveAboveStdio(pipes->devnull);
  if (!options.inherit_output) pipes->out[1] = MoveAboveStdio(pipes->out[1]);
  pipes->status[1] = MoveAboveStdio(pipes->status[1]);
  if (pipes->devnull < 0 || (!options.inherit_output && pipes->out[1] < 0) || pipes->status[1] < 0) {
    const int err = errno;
    return Status::Internal("cannot start '" + options.argv[0] + "': out of file descriptors (" + ErrnoText(err) +
                            ")");
  }
  plan->stdin_fd = pipes->devnull;
  plan->out_fd = pipes->out[1];
  plan->status_fd = pipes->status[1];
  return Status::OK();
}

// After the fork: the status pipe closes on a successful exec (O_CLOEXEC) and carries a ChildFailure otherwise,
// in which case the child is reaped and the failure returned.
Status AwaitExec(const SubprocessOptions& options, pid_t pid, ChildPipes* pipes) {
  CloseIfOpen(&pipes->devnull);
  CloseIfOpen(&pipes->out[1]);
  CloseIfOpen(&pipes->status[1]);
  ChildFailure failure{0, 0};
  size_t got = 0;
  while (got < sizeof failure) {
    const ssize_t n = read(pipes->status[0], reinterpret_cast<char*>(&failure) + got, sizeof failure - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < sizeof failure) return Status::OK();
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  return FailureStatus(options, failure);
}

}  // namespace

StatusOr<Subprocess*> SubprocessSet::Add(const SubprocessOptions& options) {
  TM_RETURN_IF_ERROR(CheckStartable(options));
  if (interrupted_ || g_interrupt_signal != 0) {
    return Status::FailedPrecondition("not starting '" + options.argv[0] +
                                      "': an interrupt was received (the run is stopping)");
  }
  std::unique_ptr<Subprocess> sub(new Subprocess(options));
  if (!options.log_path.empty()) {
    sub->log_fd_ = open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (sub->log_fd_ < 0) {
      const int err = errno;
      return Status::IoError(options.log_path + ": cannot open the log of '" + options.argv[0] +
                             "' for writing (" + ErrnoText(err) + ")");
    }
  }
  ChildPlan plan;
  TM_RETURN_IF_ERROR(PlanChild(options, &plan));
  ChildPipes pipes;
  TM_RETURN_IF_ERROR(OpenPipes(options, &pipes, &plan));

  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    return Status::Internal("cannot start '" + options.argv[0] + "': fork failed (" + ErrnoText(err) + ")");
  }
  if (pid == 0) RunChild(plan);

  sub->start_ = Clock::now();
  // Also set the group from this side, so it exists before we could signal it; EACCES after the child's
  // exec is expected (the child did it first).
  if (options.own_process_group) setpgid(pid, pid);
  TM_RETURN_IF_ERROR(AwaitExec(options, pid, &pipes));

  const int out_fd = pipes.TakeOutput();
  if (out_fd >= 0) fcntl(out_fd, F_SETFL, fcntl(out_fd, F_GETFL) | O_NONBLOCK);
  sub->pid_ = pid;
  sub->out_fd_ = out_fd;
  if (options.timeout_s > 0) {
    sub->deadline_ = sub->start_ + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(options.timeout_s));
  }
  Subprocess* raw = sub.get();
  running_.push_back(std::move(sub));
  return raw;
}

bool SubprocessSet::CheckInterrupt() {
  if (g_interrupt_pipe[0] >= 0) {
    char buf[64];
    while (read(g_interrupt_pipe[0], buf, sizeof buf) > 0) {
    }
  }
  return g_interrupt_signal != 0;
}

bool SubprocessSet::DoWork(int timeout_ms) {
  const Clock::time_point until =
      timeout_ms < 0 ? Clock::time_point::max() : Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (CheckInterrupt()) {
      interrupted_ = true;
      TerminateAll();
      return true;
    }
    if (!finished_.empty() || running_.empty()) return false;
    if (Clock::now() >= until) return false;
    Step(until);
  }
}

void SubprocessSet::Step(Clock::time_point until) {
  Clock::time_point now = Clock::now();
  Clock::time_point wake = std::min(until, next_memory_poll_);
  std::vector<pollfd> fds;
  std::vector<Subprocess*> fd_owners;
  if (g_interrupt_pipe[0] >= 0) {
    fds.push_back({g_interrupt_pipe[0], POLLIN, 0});
    fd_owners.push_back(nullptr);
  }
  for (const auto& sub : running_) {
    if (sub->out_fd_ >= 0) {
      fds.push_back({sub->out_fd_, POLLIN, 0});
      fd_owners.push_back(sub.get());
    }
    if (sub->reaped_) {
      wake = std::min(wake, sub->reaped_at_ + kDrainLimit);
      continue;
    }
    // A closed pipe usually means the child is exiting; without a pipe (inherit_output) nothing tells.
    const bool exiting = sub->out_fd_ < 0 && !sub->options_.inherit_output;
    wake = std::min(wake, now + (exiting ? Clock::duration(kExitCheckInterval) : Clock::duration(kPollInterval)));
    if (sub->deadline_ && !sub->term_sent_at_) wake = std::min(wake, *sub->deadline_);
    if (sub->term_sent_at_ && !sub->kill_sent_) {
      wake = std::min(wake, *sub->term_sent_at_ + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(sub->options_.kill_grace_s)));
    }
  }
  int timeout_ms = 0;
  if (wake > now) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    timeout_ms = static_cast<int>(std::min<int64_t>(ms, 1000));
  }
  const int ready = poll(fds.data(), fds.size(), timeout_ms);
  if (ready > 0) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0 && fd_owners[i] != nullptr) fd_owners[i]->ReadOutput();
    }
  }
  // EINTR needs nothing: a caught interrupt is seen by the caller through the flag.

  now = Clock::now();
  if (now >= next_memory_poll_) {
    PollMemory(now);
    next_memory_poll_ = now + kPollInterval;
  }
  for (size_t i = 0; i < running_.size();) {
    Subprocess* sub = running_[i].get();
    if (!sub->reaped_) {
      if (sub->deadline_ && now >= *sub->deadline_ && !sub->term_sent_at_) {
        sub->result_.timed_out = true;
        sub->Terminate(now);
      }
      if (sub->term_sent_at_ && !sub->kill_sent_ &&
          now - *sub->term_sent_at_ >= std::chrono::duration<double>(sub->options_.kill_grace_s)) {
        sub->SignalGroup(SIGKILL);
        sub->kill_sent_ = true;
      }
      sub->TryReap(now);
    }
    if (sub->reaped_ && sub->out_fd_ >= 0) {
      // Pick up output written just before the exit, then give up on the pipe after the drain limit.
      sub->ReadOutput();
      if (sub->out_fd_ >= 0 && now - sub->reaped_at_ >= kDrainLimit) CloseIfOpen(&sub->out_fd_);
    }
    if (sub->reaped_ && sub->out_fd_ < 0) {
      sub->Finish();
      finished_.push_back(std::move(running_[i]));
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void SubprocessSet::PollMemory(Clock::time_point now) {
  std::map<pid_t, int64_t> group_rss;
  for (const auto& sub : running_) {
    if (!sub->reaped_ && sub->options_.own_process_group) group_rss[sub->pid_] = 0;
  }
  if (group_rss.empty()) return;
  DIR* proc = opendir("/proc");
  if (!proc) return;
  while (const dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    pid_t pgrp = 0;
    int64_t rss_pages = 0;
    if (!ReadProcStat(entry->d_name, &pgrp, &rss_pages)) continue;
    auto it = group_rss.find(pgrp);
    // A child between fork and exec is still a copy of this process: its memory is not the child's.
    if (it != group_rss.end() && !IsImageOfThisProgram(entry->d_name)) it->second += rss_pages * PageSize();
  }
  closedir(proc);
  for (const auto& sub : running_) {
    if (sub->reaped_ || !sub->options_.own_process_group) continue;
    const int64_t rss = group_rss[sub->pid_];
    sub->result_.peak_rss_bytes = std::max(sub->result_.peak_rss_bytes, rss);
    const int64_t limit = sub->options_.memory_limit_bytes;
    if (limit > 0 && rss > limit && !sub->term_sent_at_) {
      sub->result_.memory_exceeded = true;
      sub->Terminate(now);
    }
  }
}

std::unique_ptr<Subprocess> SubprocessSet::NextFinished() {
  if (finished_.empty()) return nullptr;
  std::unique_ptr<Subprocess> sub = std::move(finished_.front());
  finished_.pop_front();
  return sub;
}

void SubprocessSet::WaitForAll() {
  while (!running_.empty()) Step(Clock::time_point::max());
}

void SubprocessSet::TerminateAll() {
  const Clock::time_point now = Clock::now();
  for (const auto& sub : running_) {
    if (sub->reaped_) continue;
    sub->result_.interrupted = true;
    sub->Terminate(now);
  }
  WaitForAll();
}

void SubprocessSet::Clear() {
  const Clock::time_point now = Clock::now();
  for (const auto& sub : running_) sub->Terminate(now);
  WaitForAll();
  finished_.clear();
}

Status SubprocessSet::InstallInterruptHandlers() {
  if (g_handlers_installed) return Status::OK();
  if (pipe2(g_interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    return Status::Internal("cannot install interrupt handlers: cannot create the wake-up pipe (" +
                            ErrnoText(err) + ")");
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = OnInterruptSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (size_t i = 0; i < sizeof(kInterruptSignals) / sizeof(kInterruptSignals[0]); ++i) {
    sigaction(kInterruptSignals[i], &action, &g_old_actions[i]);
  }
  g_handlers_installed = true;
  return Status::OK();
}

void SubprocessSet::UninstallInterruptHandlers() {
  if (!g_handlers_installed) return;
  for (size_t i = 0; i < sizeof(kInterruptSignals) / sizeof(kInterruptSignals[0]); ++i) {
    sigaction(kInterruptSignals[i], &g_old_actions[i], nullptr);
  }
  CloseIfOpen(&g_interrupt_pipe[1]);
  CloseIfOpen(&g_interrupt_pipe[0]);
  g_handlers_installed = false;
}

bool SubprocessSet::interrupt_handlers_installed() { return g_handlers_installed; }

int SubprocessSet::interrupt_signal() { return g_interrupt_signal; }

void SubprocessSet::ResetInterrupt() {
  g_interrupt_signal = 0;
  if (g_interrupt_pipe[0] >= 0) {
    char buf[64];
    while (read(g_interrupt_pipe[0], buf, sizeof buf) > 0) {
    }
  }
}

}  // namespace tmx
