#include "fuzz/fuzzer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "fuzz/mutator.h"

namespace tmx::fuzz {
namespace {

// What the signal handlers report; set before each input. A fuzz driver runs one loop at a time.
struct Current {
  char message[512] = {0};  // "fuzz: target config, seed 1, input #123"
  int input_fd = -1;        // the crash folder's copy of the input, or -1
};
Current g_current;
struct sigaction g_previous[NSIG];

void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Async-signal-safe: names the input, then lets the previous handler (the default, or a sanitizer's) run.
void OnFatalSignal(int sig) {
  const char* what = sig == SIGALRM ? " ran past its time limit (a hang)\n" : " crashed (signal)\n";
  WriteAll(2, g_current.message, std::strlen(g_current.message));
  WriteAll(2, what, std::strlen(what));
  if (sig == SIGALRM) {
    ::signal(SIGABRT, SIG_DFL);
    ::abort();
  }
  ::sigaction(sig, &g_previous[sig], nullptr);
  if (sig == SIGABRT) ::raise(sig);  // a synchronous fault re-runs the faulting instruction instead
}

void InstallHandlers() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM}) {
    struct sigaction action {};
    action.sa_handler = OnFatalSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND | SA_NODEFER;
    ::sigaction(sig, &action, &g_previous[sig]);
  }
}

void Describe(const FuzzTarget& target, const FuzzOptions& options, int64_t n) {
  std::snprintf(g_current.message, sizeof(g_current.message),
                "fuzz: target %s, seed %llu, input #%lld (reproduce: tm_fuzz --target %s --seed %llu --max-inputs "
                "%lld)",
                target.name.c_str(), static_cast<unsigned long long>(options.seed), static_cast<long long>(n),
                target.name.c_str(), static_cast<unsigned long long>(options.seed), static_cast<long long>(n + 1));
}

void SaveInput(const std::string& input) {
  if (g_current.input_fd < 0) return;
  if (::ftruncate(g_current.input_fd, 0) == 0) {
    ssize_t ignored = ::pwrite(g_current.input_fd, input.data(), input.size(), 0);
    (void)ignored;
  }
}

}  // namespace

FuzzStats Fuzz(const FuzzTarget& target, const std::vector<std::string>& seeds, const FuzzOptions& options) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  InstallHandlers();
  if (!options.crash_dir.empty()) {
    std::string path = options.crash_dir + "/" + target.name + "-current";
    g_current.input_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  Mutator mutator(options.seed, target.dictionary);
  std::vector<std::string> pool = seeds;  // seeds, then accepted mutants (a bounded ring after the seeds)
  const size_t kMaxPool = seeds.size() + 512;
  size_t next_slot = seeds.size();
  FuzzStats stats;
  auto run = [&](const std::string& input) {
    Describe(target, options, stats.inputs);
    SaveInput(input);
    ::alarm(options.per_input_timeout_s);
    bool accepted = target.run(input);
    ::alarm(0);
    ++stats.inputs;
    stats.accepted += accepted;
    return accepted;
  };
  auto done = [&] {
    return (options.max_inputs >= 0 && stats.inputs >= options.max_inputs) || elapsed() >= options.seconds;
  };
  for (const std::string& seed : seeds) {
    if (done()) break;
    run(seed.substr(0, target.max_size));
  }
  while (!done()) {
    std::string input = mutator.Mutate(pool[mutator.Below(pool.size())], pool, target.max_size);
    if (!run(input)) continue;
    if (pool.size() < kMaxPool) {
      pool.push_back(std::move(input));
    } else {
      pool[next_slot] = std::move(input);
      next_slot = next_slot + 1 < kMaxPool ? next_slot + 1 : seeds.size();
    }
  }
  if (g_current.input_fd >= 0) {
    ::close(g_current.input_fd);
    g_current.input_fd = -1;
  }
  stats.seconds = elapsed();
  return stats;
}

}  // namespace tmx::fuzz
