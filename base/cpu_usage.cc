#include "base/cpu_usage.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace tmx {

namespace {

// One "cpu" or "cpuN" line's numbers after its label into `t`: user nice system idle iowait irq softirq steal
// (guest and guest_nice follow; guest time is also counted in user). False unless at least four are numbers.
bool AddCpuLine(std::istringstream& in, double ticks_per_second, MachineCpuTimes* t) {
  double v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int read = 0;
  while (read < 8 && in >> v[read]) ++read;
  if (read < 4) return false;
  for (double x : v) {
    if (!std::isfinite(x) || x < 0) return false;
  }
  t->busy_s += (v[0] + v[1] + v[2] + v[5] + v[6]) / ticks_per_second;
  t->steal_s += v[7] / ticks_per_second;
  t->total_s += (v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]) / ticks_per_second;
  return true;
}

}  // namespace

MachineCpuTimes ParseProcStat(const std::string& text, double ticks_per_second, const std::vector<int>& cpus) {
  MachineCpuTimes t;
  if (ticks_per_second <= 0) return t;
  std::istringstream lines(text);
  std::string line;
  if (!std::getline(lines, line)) return t;
  {
    std::istringstream in(line);
    std::string label;
    if (!(in >> label) || label != "cpu") return t;
    if (cpus.empty()) {
      t.known = AddCpuLine(in, ticks_per_second, &t);
      return t;
    }
  }
  std::vector<int> wanted = cpus;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  size_t found = 0;
  while (std::getline(lines, line) && line.rfind("cpu", 0) == 0) {
    std::istringstream in(line);
    std::string label;
    in >> label;
    char* end = nullptr;
    const long cpu = std::strtol(label.c_str() + 3, &end, 10);
    if (end == label.c_str() + 3 || *end != '\0') continue;
    if (!std::binary_search(wanted.begin(), wanted.end(), static_cast<int>(cpu))) continue;
    if (!AddCpuLine(in, ticks_per_second, &t)) return MachineCpuTimes{};
    ++found;
  }
  if (found != wanted.size()) return MachineCpuTimes{};
  t.known = true;
  return t;
}

MachineCpuTimes ReadMachineCpuTimes(const std::vector<int>& cpus) {
  std::ifstream in("/proc/stat");
  std::ostringstream text;
  if (cpus.empty()) {
    std::string first;
    if (!std::getline(in, first)) return {};
    text << first;
  } else {
    text << in.rdbuf();
  }
  return ParseProcStat(text.str(), static_cast<double>(::sysconf(_SC_CLK_TCK)), cpus);
}

std::vector<int> ReadAffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::string WholePercent(double share) { return std::to_string(static_cast<int>(std::lround(100 * share))) + "%"; }

namespace {

// Why `d` is disturbed, the interval named by `during` ("while it ran"); "" when it is not.
std::string DisturbanceReason(const Disturbance& d, const DisturbanceOptions& options, const std::string& during) {
  if (d.others_share > options.max_others_share) {
    return "other processes used " + WholePercent(d.others_share) + " of the machine's CPU " + during + " (more than " +
           WholePercent(options.max_others_share) + ")";
  }
  if (d.steal_share > options.max_steal_share) {
    return "the hypervisor took " + WholePercent(d.steal_share) + " of the machine's CPU (steal) " + during +
           " (more than " + WholePercent(options.max_steal_share) + ")";
  }
  return "";
}

}  // namespace

Disturbance JudgeDisturbance(const MachineCpuTimes& before, const MachineCpuTimes& after, double own_cpu_s,
                             const DisturbanceOptions& options) {
  Disturbance d;
  const double capacity = after.total_s - before.total_s;
  if (!before.known || !after.known || capacity <= 0) return d;
  d.known = true;
  // The counters tick in 1/100 s per core while wait4 counts finer: a short quiet cell can show its own time a
  // little above the machine's busy time, which is no one else's work.
  const double others = after.busy_s - before.busy_s - std::max(0.0, own_cpu_s);
  d.others_share = std::clamp(others / capacity, 0.0, 1.0);
  d.steal_share = std::clamp((after.steal_s - before.steal_s) / capacity, 0.0, 1.0);
  d.reason = DisturbanceReason(d, options, "while it ran");
  return d;
}

Disturbance ProbeMachineLoad(double window_s, const std::vector<int>& cpus) {
  const MachineCpuTimes before = ReadMachineCpuTimes(cpus);
  std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, window_s)));
  // This process only sleeps meanwhile: every busy tick is someone else's.
  return JudgeDisturbance(before, ReadMachineCpuTimes(cpus), 0);
}

namespace {

// "the machine is busy: other processes used 63% of the machine's CPU over the last 0.3 s (more than 25%)", or
// "" when `probe` is quiet or unknown.
std::string BusyMachine(const Disturbance& probe, double window_s, const DisturbanceOptions& options) {
  if (!probe.known) return "";
  std::ostringstream window;
  window << window_s;
  const std::string why = DisturbanceReason(probe, options, "over the last " + window.str() + " s");
  return why.empty() ? "" : "the machine is busy: " + why;
}

}  // namespace

std::string BusyMachineWarning(const Disturbance& probe, double window_s, const DisturbanceOptions& options) {
  const std::string busy = BusyMachine(probe, window_s, options);
  if (busy.empty()) return "";
  return busy + "; cells measured now may be marked disturbed, and their speeds are then not published";
}

ThreadChoice ThreadsBesideLoad(const UsableCores& cores, const Disturbance& probe, double window_s,
                           const DisturbanceOptions& options) {
  ThreadChoice choice;
  choice.threads = std::max(1, cores.count);
  const std::string busy = BusyMachine(probe, window_s, options);
  if (busy.empty()) return choice;
  // The probe's shares are of the probed CPUs (the affinity); the cores other work keeps busy, rounded.
  const int probed = cores.affinity > 0 ? cores.affinity : cores.count;
  const int taken = static_cast<int>(std::lround(std::clamp(probe.others_share + probe.steal_share, 0.0, 1.0) * probed));
  choice.threads = std::clamp(cores.count - taken, 1, cores.count);
  choice.busy = true;
  choice.warning = busy + "; running with " +
                   std::to_string(choice.threads) + (choice.threads == 1 ? " thread" : " threads") + " of " +
                   std::to_string(cores.count) + " (the cores other work leaves free; OMP_NUM_THREADS=N chooses)";
  return choice;
}

std::optional<double> ParseCgroupCpuMax(const std::string& text) {
  std::istringstream in(text);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || !(period > 0)) return std::nullopt;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || *end != '\0' || !(q > 0) || !std::isfinite(q)) return std::nullopt;
  return q / period;
}

UsableCores UsableCoresFrom(int affinity, std::optional<double> quota) {
  UsableCores c;
  c.affinity = affinity;
  c.quota = quota;
  double count = affinity > 0 ? affinity : 1;
  if (quota) count = std::min(count, std::ceil(*quota));
  c.count = std::max(1, static_cast<int>(count));
  return c;
}

UsableCores ReadUsableCores() {
  int affinity = static_cast<int>(ReadAffinityCpus().size());
  if (affinity <= 0) affinity = static_cast<int>(std::thread::hardware_concurrency());
  std::ifstream in("/sys/fs/cgroup/cpu.max");
  std::string line;
  std::optional<double> quota;
  if (std::getline(in, line)) quota = ParseCgroupCpuMax(line);
  return UsableCoresFrom(affinity, quota);
}

std::string UsableCores::Describe() const {
  std::string text = std::to_string(count) + (count == 1 ? " core" : " cores") + " (affinity " +
                     (affinity > 0 ? std::to_string(affinity) + " CPUs" : std::string("unknown"));
  if (quota) {
    std::ostringstream q;
    q << *quota;
    text += ", cgroup quota " + q.str() + " cores";
  }
  return text + ")";
}

}  // namespace tmx
