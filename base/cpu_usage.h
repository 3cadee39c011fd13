// Whether a measurement had the machine to itself: the machine's CPU time from /proc/stat, read before and after
// a cell, against the CPU time the cell's own processes got. What other processes (or the hypervisor, as steal)
// took meanwhile says whether the cell's speed is the device's or the machine's load. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tmx {

// The machine's CPU time since boot, in seconds summed over its cores (/proc/stat's "cpu" line).
struct MachineCpuTimes {
  bool known = false;   // false when /proc/stat could not be read or parsed
  double busy_s = 0;    // user + nice + system + irq + softirq (guest time is inside user)
  double steal_s = 0;   // taken by the hypervisor for other virtual machines
  double total_s = 0;   // everything, idle and iowait included
};

// Reads /proc/stat now: the whole machine's "cpu" line, or with `cpus` the sum of their "cpuN" lines (a lane's
// share of the machine, matrix/lanes.h); `known` false where there is none.
MachineCpuTimes ReadMachineCpuTimes(const std::vector<int>& cpus = {});

// Parses the text of /proc/stat with `ticks_per_second` (sysconf(_SC_CLK_TCK)); `known` false when its first
// line is not a "cpu" line of at least four numbers, or one of `cpus` has no such "cpuN" line.
MachineCpuTimes ParseProcStat(const std::string& text, double ticks_per_second, const std::vector<int>& cpus = {});

// The CPUs of this process's affinity mask, ascending; empty where it cannot be read.
std::vector<int> ReadAffinityCpus();

struct DisturbanceOptions {
  // A measurement is disturbed when other processes used more than this share of the machine's CPU capacity
  // while it ran (0.25: a quarter of the cores; a busy CI runner is far above it, a quiet one near 0.01),
  double max_others_share = 0.25;
  // or the hypervisor took more than this share (steal).
  double max_steal_share = 0.10;
};

struct Disturbance {
  bool known = false;        // false when either reading was unknown or no time passed
  double others_share = 0;   // CPU time of other processes over the machine's capacity in the interval, 0 to 1
  double steal_share = 0;    // steal over capacity, 0 to 1
  // "" when undisturbed; otherwise why, e.g. "other processes used 63% of the machine's CPU while it ran".
  std::string reason;
};

// Judges the interval between `before` and `after`, in which the measured processes themselves used
// `own_cpu_s` (user + system, from wait4).
Disturbance JudgeDisturbance(const MachineCpuTimes& before, const MachineCpuTimes& after, double own_cpu_s,
                             const DisturbanceOptions& options = {});

// The cores this process may use: the CPUs of its affinity mask, lowered to the cgroup's CPU quota where one
// is set (cgroup v2 cpu.max, rounded up). What thread counts and rank limits are chosen from: a container
// given 2 of a 16-core host's cores has 2, whatever std::thread::hardware_concurrency() says.
struct UsableCores {
  int count = 1;                 // at least 1
  int affinity = 0;              // CPUs in the affinity mask (0: unknown)
  std::optional<double> quota;   // the cgroup's quota in cores, when set
  // "2 cores (affinity 16 CPUs, cgroup quota 1.5 cores)" or "2 cores (affinity 2 CPUs)".
  std::string Describe() const;
};
UsableCores ReadUsableCores();
UsableCores UsableCoresFrom(int affinity, std::optional<double> quota);
// cgroup v2 cpu.max: "150000 100000" -> 1.5 cores; "max 100000" (no quota) or anything else -> unset.
std::optional<double> ParseCgroupCpuMax(const std::string& text);

// What other processes and the hypervisor take of the machine now: its CPU times read `window_s` apart while
// this process sleeps, judged as a measurement's interval is (JudgeDisturbance). Before a run starts, this says
// what its cells can expect; the load average would also carry the last minute's work, a run just finished.
// With `cpus`, only those CPUs are looked at (this process's affinity: what other lanes run on is not its load).
Disturbance ProbeMachineLoad(double window_s, const std::vector<int>& cpus = {});

// A share from 0 to 1 as a whole percentage: 0.634 -> "63%".
std::string WholePercent(double share);

// A warning when `probe` (ProbeMachineLoad over `window_s`) would mark a measurement disturbed; "" otherwise.
//   "the machine is busy: other processes used 63% of the machine's CPU over the last 0.3 s (more than 25%);
//    cells measured now may be marked disturbed, and their speeds are then not published"
std::string BusyMachineWarning(const Disturbance& probe, double window_s, const DisturbanceOptions& options = {});

// ATen's CPU threads for a run beside other work.
struct ThreadChoice {
  int threads = 1;      // at least 1
  bool busy = false;    // whether the load made the choice (else: all of `cores`)
  // "" when quiet or the load is unknown; otherwise why and what was chosen:
  //   "the machine is busy: other processes used 50% of the machine's CPU over the last 0.2 s (more than 25%);
  //    running with 1 thread of 2 (the cores other work leaves free; OMP_NUM_THREADS=N chooses)"
  std::string warning;
};
// One thread per core of `cores` that the load `probe` (ProbeMachineLoad over `window_s`, on the CPUs of
// `cores`' affinity) leaves free, when the probe would mark a measurement disturbed: threads beyond the free
// cores only wait for each other (measured on 2 cores beside one busy process: 60 tiny steps 2.26 s with 1
// thread, 5.17 s with 2). Quiet or unknown: every usable core.
ThreadChoice ThreadsBesideLoad(const UsableCores& cores, const Disturbance& probe, double window_s,
                           const DisturbanceOptions& options = {});

}  // namespace tmx
