#include "harness/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace tmx {
namespace {

std::string DescribeWait(int status, int* exit_code) {
  if (WIFEXITED(status)) {
    *exit_code = WEXITSTATUS(status);
    return "exited with code " + std::to_string(WEXITSTATUS(status));
  }
  int sig = WTERMSIG(status);
  *exit_code = 128 + sig;
  const char* name = ::strsignal(sig);
  return "was killed by signal " + std::to_string(sig) + (name != nullptr ? " (" + std::string(name) + ")" : "");
}

bool Failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

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

StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options) {
  if (options.nproc < 1 || options.argv.empty()) {
    return Status::InvalidArgument("--nproc_per_node must be at least 1");
  }
  StatusOr<int> port = FreeLocalPort();
  TM_RETURN_IF_ERROR(port.status());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max(1u, cores / static_cast<unsigned>(options.nproc)));
  const std::string n = std::to_string(options.nproc);

  std::vector<pid_t> pids;
  auto stop_all = [&](int sig) {
    for (pid_t p : pids) {
      if (p > 0) ::kill(p, sig);
    }
  };
  for (int rank = 0; rank < options.nproc; ++rank) {
    std::vector<std::pair<std::string, std::string>> env = {
        {"RANK", std::to_string(rank)}, {"LOCAL_RANK", std::to_string(rank)}, {"WORLD_SIZE", n},
        {"LOCAL_WORLD_SIZE", n},        {"MASTER_ADDR", "127.0.0.1"},        {"MASTER_PORT", std::to_string(*port)}};
    const char* omp = std::getenv("OMP_NUM_THREADS");
    if (omp == nullptr || *omp == '\0') env.emplace_back("OMP_NUM_THREADS", threads);
    for (const auto& kv : options.env) env.push_back(kv);
    std::vector<char*> argv;
    for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) {
      std::string why = std::strerror(errno);
      stop_all(SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      return Status::Unavailable("starting rank " + std::to_string(rank) + ": fork: " + why);
    }
    if (pid == 0) {
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      ::execv(argv[0], argv.data());
      std::fprintf(stderr, "error: starting rank %d: %s: %s\n", rank, argv[0], std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
  }

  LaunchResult result;
  std::vector<bool> done(pids.size(), false);
  size_t remaining = pids.size();
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  while (remaining > 0) {
    bool reaped = false;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (done[r]) continue;
      int status = 0;
      pid_t got = ::waitpid(pids[r], &status, WNOHANG);
      if (got == 0) continue;
      done[r] = true;
      pids[r] = -1;
      --remaining;
      reaped = true;
      if (got < 0) continue;  // reaped elsewhere: its status is lost
      if (Failed(status) && !result.failed_rank) {
        result.failed_rank = static_cast<int>(r);
        result.failure = DescribeWait(status, &result.exit_code);
        for (size_t o = 0; o < pids.size(); ++o) {
          if (!done[o]) result.stopped_ranks.push_back(static_cast<int>(o));
        }
        stop_all(SIGTERM);
        kill_at = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(options.kill_grace_s * 1000));
      }
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
      stop_all(SIGKILL);
      kill_at.reset();
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}

}  // namespace tmx
