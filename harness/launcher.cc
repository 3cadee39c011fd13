#include "harness/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/cpu_usage.h"
#include "base/subprocess.h"
#include "base/text.h"

namespace tmx {
namespace {

// How a rank ended, in the words of LaunchResult::failure; false when it succeeded, or when its status was
// lost (reaped elsewhere), which the launcher has never counted as a failure.
bool DescribeFailure(const SubprocessResult& r, std::string* failure, int* exit_code) {
  if (r.exit_code) {
    if (*r.exit_code == 0) return false;
    *exit_code = *r.exit_code;
    *failure = "exited with code " + std::to_string(*r.exit_code);
    return true;
  }
  if (!r.term_signal) return false;
  const int sig = *r.term_signal;
  *exit_code = 128 + sig;
  const char* name = ::strsignal(sig);
  *failure = "was killed by signal " + std::to_string(sig) + (name != nullptr ? " (" + std::string(name) + ")" : "");
  return true;
}

// Installs the interrupt handlers unless someone already did, and undoes exactly that on destruction.
class InterruptScope {
 public:
  InterruptScope() : owned_(!SubprocessSet::interrupt_handlers_installed()) {}
  Status Install() { return owned_ ? SubprocessSet::InstallInterruptHandlers() : Status::OK(); }
  ~InterruptScope() {
    if (!owned_) return;
    SubprocessSet::UninstallInterruptHandlers();
    SubprocessSet::ResetInterrupt();
  }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  bool owned_;
};

}  // namespace

StatusOr<int> FreeLocalPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::Unavailable(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Status::Unavailable("finding a free port on 127.0.0.1: " + why);
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

std::vector<std::pair<std::string, std::string>> RankEnvironment(const LaunchOptions& options, int rank, int port) {
  const std::string n = std::to_string(options.nproc);
  std::vector<std::pair<std::string, std::string>> env = {
      {"RANK", std::to_string(rank)}, {"LOCAL_RANK", std::to_string(rank)}, {"WORLD_SIZE", n},
      {"LOCAL_WORLD_SIZE", n},        {"MASTER_ADDR", "127.0.0.1"},        {"MASTER_PORT", std::to_string(port)}};
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (omp == nullptr || *omp == '\0') {
    // The cores this process may use (affinity, cgroup quota), shared out between the ranks.
    const int cores = ReadUsableCores().count;
    const int ranks = std::max(1, options.nproc);
    env.emplace_back("OMP_NUM_THREADS", std::to_string(std::max(1, cores / ranks)));
  }
  // Later entries win in SubprocessOptions::env, so options.env overrides torchrun's variables.
  for (const auto& kv : options.env) env.push_back(kv);
  return env;
}

Status CheckLauncherEnvironment(int nproc) {
  std::vector<std::string> set;
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name); v != nullptr) set.push_back(std::string(name) + "=" + v);
  }
  if (set.empty()) return Status::OK();
  return Status::InvalidArgument(
      JoinStrings(set, " and ") + " " + (set.size() == 1 ? "is" : "are") +
      " already set in the environment (left from an earlier run, or torchrun's), so --nproc_per_node " +
      std::to_string(nproc) + " would run this process as one of their ranks instead of starting " +
      std::to_string(nproc) + "; fix: unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT, or "
      "drop --nproc_per_node where torchrun starts the ranks");
}

StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options) {
  if (options.nproc < 1 || options.argv.empty()) {
    return Status::InvalidArgument("--nproc_per_node must be at least 1");
  }
  StatusOr<int> port = FreeLocalPort();
  TM_RETURN_IF_ERROR(port.status());
  InterruptScope interrupts;
  TM_RETURN_IF_ERROR(interrupts.Install());

  // Declared after the scope: the set (which stops whatever still runs) goes first.
  SubprocessSet set;
  std::vector<Subprocess*> ranks;
  for (int rank = 0; rank < options.nproc; ++rank) {
    SubprocessOptions o;
    o.argv = options.argv;
    o.env = RankEnvironment(options, rank, *port);
    o.kill_grace_s = options.kill_grace_s;
    o.own_process_group = false;
    o.inherit_output = true;
    // A launcher killed outright (SIGKILL, which no handler sees) still takes its ranks with it.
    o.die_with_parent = true;
    StatusOr<Subprocess*> started = set.Add(o);
    if (!started.ok()) {
      // The set's destructor stops the ranks already started.
      return Status::Unavailable("starting rank " + std::to_string(rank) + ": " + started.status().message());
    }
    ranks.push_back(*started);
  }
  auto rank_of = [&](const Subprocess* sub) {
    return static_cast<int>(std::find(ranks.begin(), ranks.end(), sub) - ranks.begin());
  };

  LaunchResult result;
  std::vector<std::unique_ptr<Subprocess>> finished;  // keeps the pointers in `ranks` valid
  auto stop_others = [&] {
    for (const Subprocess* sub : ranks) {
      if (!sub->Done()) result.stopped_ranks.push_back(rank_of(sub));
    }
    set.TerminateAll();
  };
  while (set.running() > 0 || finished.size() < ranks.size()) {
    if (set.DoWork() && result.interrupt_signal == 0 && !result.failed_rank) {
      // DoWork already terminated every rank; the ones it stopped are those that were running.
      result.interrupt_signal = SubprocessSet::interrupt_signal();
      for (const Subprocess* sub : ranks) {
        if (sub->result().interrupted) result.stopped_ranks.push_back(rank_of(sub));
      }
    }
    while (std::unique_ptr<Subprocess> done = set.NextFinished()) {
      const int rank = rank_of(done.get());
      std::string failure;
      int exit_code = 0;
      const bool stopped_by_us = done->result().interrupted;
      if (!stopped_by_us && !result.failed_rank && result.interrupt_signal == 0 &&
          DescribeFailure(done->result(), &failure, &exit_code)) {
        result.failed_rank = rank;
        result.failure = failure;
        result.exit_code = exit_code;
        finished.push_back(std::move(done));
        stop_others();
        continue;
      }
      finished.push_back(std::move(done));
    }
  }
  return result;
}

}  // namespace tmx
