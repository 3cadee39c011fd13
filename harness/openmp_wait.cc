#include "harness/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace tmx {
namespace {

// How long `tune run` looks at its cores as it starts: a few of /proc/stat's 1/100 s ticks per core, enough to
// tell a core kept busy from an idle one (matmul_peak.h's kThreadProbeS, which this look replaces).
constexpr double kStartupProbeS = 0.2;

bool Set(const char* value) { return value != nullptr && *value != '\0'; }

StartupLoad& Slot() {
  static StartupLoad startup;
  return startup;
}

}  // namespace

int ThreadsNamed(const char* num_threads) {
  if (!Set(num_threads)) return 0;
  char* end = nullptr;
  const long n = std::strtol(num_threads, &end, 10);
  return end == num_threads || n < 1 || n > 1 << 20 ? 0 : static_cast<int>(n);
}

WaitPolicyStep FirstWaitPolicyStep(const std::vector<std::string>& args, const char* wait_policy,
                                   const char* num_threads, int usable_cores) {
  // The subcommand: the first word that is not a --device-plugin option (which may stand anywhere).
  std::string command;
  for (size_t i = 0; i < args.size() && command.empty(); ++i) {
    if (args[i] == "--device-plugin") ++i;
    else if (args[i].rfind("--device-plugin=", 0) != 0) command = args[i];
  }
  if (command != "run" || Set(wait_policy)) return WaitPolicyStep::kNothing;
  for (const std::string& a : args) {
    // The launcher of ranks trains nothing itself; each rank is a `tune run` of its own and looks for itself.
    if (a == "--nproc_per_node" || a.rfind("--nproc_per_node=", 0) == 0 || a == "--help" || a == "-h") {
      return WaitPolicyStep::kNothing;
    }
  }
  const int threads = Set(num_threads) ? ThreadsNamed(num_threads) : usable_cores;
  return threads >= 2 ? WaitPolicyStep::kLookAtLoad : WaitPolicyStep::kNothing;
}

bool PassiveWaitWanted(const UsableCores& cores, const Disturbance& load, double window_s, const char* num_threads) {
  const ThreadChoice choice = ThreadsBesideLoad(cores, load, window_s);
  if (!choice.busy) return false;
  return (Set(num_threads) ? ThreadsNamed(num_threads) : choice.threads) >= 2;
}

std::string FormatStartupLoad(const StartupLoad& startup) {
  std::ostringstream out;
  out.precision(17);
  out << "known=" << (startup.load.known ? 1 : 0) << " others=" << startup.load.others_share
      << " steal=" << startup.load.steal_share << " window=" << startup.window_s
      << " passive=" << (startup.passive_chosen ? 1 : 0);
  return out.str();
}

std::optional<StartupLoad> ParseStartupLoad(const std::string& text) {
  std::istringstream in(text);
  StartupLoad s;
  int known = -1, passive = -1;
  std::string key;
  while (std::getline(in, key, '=')) {
    double value = 0;
    if (!(in >> value)) return std::nullopt;
    in >> std::ws;
    if (key == "known") known = value == 1 ? 1 : value == 0 ? 0 : -2;
    else if (key == "others") s.load.others_share = value;
    else if (key == "steal") s.load.steal_share = value;
    else if (key == "window") s.window_s = value;
    else if (key == "passive") passive = value == 1 ? 1 : value == 0 ? 0 : -2;
    else return std::nullopt;
  }
  const auto share = [](double v) { return v >= 0 && v <= 1; };
  if (known < 0 || passive < 0 || !share(s.load.others_share) || !share(s.load.steal_share) ||
      !(s.window_s > 0 && s.window_s < 60)) {
    return std::nullopt;
  }
  s.load.known = known == 1;
  s.passive_chosen = passive == 1;
  return s;
}

void ChooseOpenMpWaitPolicy(int argc, char** argv) {
  if (const char* passed = std::getenv(kStartupLoadVariable)) {
    if (std::optional<StartupLoad> startup = ParseStartupLoad(passed)) Slot() = *startup;
    ::unsetenv(kStartupLoadVariable);
    return;
  }
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* threads = std::getenv("OMP_NUM_THREADS");
  const UsableCores cores = ReadUsableCores();
  if (FirstWaitPolicyStep(args, policy, threads, cores.count) != WaitPolicyStep::kLookAtLoad) return;
  StartupLoad& startup = Slot();
  startup.load = ProbeMachineLoad(kStartupProbeS, ReadAffinityCpus());
  startup.window_s = kStartupProbeS;
  if (!PassiveWaitWanted(cores, startup.load, kStartupProbeS, threads)) return;
  startup.passive_chosen = true;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::setenv(kStartupLoadVariable, FormatStartupLoad(startup).c_str(), 1);
  ::execv("/proc/self/exe", argv);
  // Not started again (no /proc): go on with libgomp's policy, and say nothing of a choice that did not happen.
  startup.passive_chosen = false;
  ::unsetenv("OMP_WAIT_POLICY");
  ::unsetenv(kStartupLoadVariable);
}

const StartupLoad& LoadAtStartup() { return Slot(); }

std::string WaitPolicyNote() {
  if (!Slot().passive_chosen) return "";
  return "; waiting threads sleep (OMP_WAIT_POLICY=PASSIVE: spinning ones would take the cores other work uses)";
}

}  // namespace tmx
