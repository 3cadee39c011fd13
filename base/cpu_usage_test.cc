#include "base/cpu_usage.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tmx {
namespace {

TEST(CpuUsageTest, ParsesTheCpuLineOfProcStat) {
  // user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s.
  MachineCpuTimes t = ParseProcStat("cpu  1000 50 250 8000 100 20 30 40 0 0\ncpu0 1 2 3 4\n", 100);
  ASSERT_TRUE(t.known);
  EXPECT_DOUBLE_EQ(t.busy_s, 13.5);  // (1000 + 50 + 250 + 20 + 30) / 100
  EXPECT_DOUBLE_EQ(t.steal_s, 0.4);
  EXPECT_DOUBLE_EQ(t.total_s, 94.9);
  // An old kernel's four fields are enough; anything else is unknown, never a guess.
  EXPECT_TRUE(ParseProcStat("cpu 1 2 3 4\n", 100).known);
  EXPECT_FALSE(ParseProcStat("cpu 1 2 3\n", 100).known);
  EXPECT_FALSE(ParseProcStat("intr 1 2 3 4\n", 100).known);
  EXPECT_FALSE(ParseProcStat("", 100).known);
  EXPECT_FALSE(ParseProcStat("cpu 1 2 3 4\n", 0).known);
  EXPECT_TRUE(ReadMachineCpuTimes().known);  // Linux: /proc/stat is there
}

// A lane's share of the machine: the "cpuN" lines of its CPUs summed; a CPU without a line is unknown.
TEST(CpuUsageTest, SumsTheLinesOfTheCpusAsked) {
  const std::string stat =
      "cpu  300 0 30 600 0 0 0 6 0 0\n"
      "cpu0 100 0 10 200 0 0 0 2 0 0\n"
      "cpu1 100 0 10 200 0 0 0 2 0 0\n"
      "cpu2 100 0 10 200 0 0 0 2 0 0\n"
      "intr 5 6 7\n";
  MachineCpuTimes two = ParseProcStat(stat, 100, {2, 0});
  ASSERT_TRUE(two.known);
  EXPECT_DOUBLE_EQ(two.busy_s, 2.2);
  EXPECT_DOUBLE_EQ(two.steal_s, 0.04);
  EXPECT_DOUBLE_EQ(two.total_s, 6.24);
  EXPECT_DOUBLE_EQ(ParseProcStat(stat, 100, {1, 1}).total_s, 3.12);  // a CPU named twice counts once
  EXPECT_FALSE(ParseProcStat(stat, 100, {0, 3}).known);
  const std::vector<int> mine = ReadAffinityCpus();
  ASSERT_FALSE(mine.empty());
  EXPECT_TRUE(ReadMachineCpuTimes(mine).known);
  EXPECT_EQ(static_cast<int>(mine.size()), ReadUsableCores().affinity);
}

MachineCpuTimes At(double busy, double steal, double total) { return {true, busy, steal, total}; }

TEST(CpuUsageTest, AMeasurementBesideOtherWorkIsDisturbed) {
  // 10 s on 2 cores = 20 s of capacity. The cell used 9 s; the machine was busy 19 s: others took 10 s, 50%.
  Disturbance busy = JudgeDisturbance(At(100, 0, 1000), At(119, 0, 1020), 9);
  ASSERT_TRUE(busy.known);
  EXPECT_DOUBLE_EQ(busy.others_share, 0.5);
  EXPECT_EQ(busy.reason, "other processes used 50% of the machine's CPU while it ran (more than 25%)");
  // Alone: the machine's busy time is the cell's own (and a little of the system's).
  Disturbance alone = JudgeDisturbance(At(100, 0, 1000), At(109.4, 0, 1020), 9);
  EXPECT_NEAR(alone.others_share, 0.02, 1e-9);
  EXPECT_EQ(alone.reason, "");
  // Own time above the machine's busy time (coarser ticks) is no one else's work.
  EXPECT_DOUBLE_EQ(JudgeDisturbance(At(100, 0, 1000), At(108, 0, 1020), 9).others_share, 0);
  // Steal from a noisy neighbour of the virtual machine.
  Disturbance stolen = JudgeDisturbance(At(100, 10, 1000), At(109, 13, 1020), 9);
  EXPECT_EQ(stolen.reason,
            "the hypervisor took 15% of the machine's CPU (steal) while it ran (more than 10%)");
  // Unknown readings or no time: no judgement.
  EXPECT_FALSE(JudgeDisturbance(MachineCpuTimes(), At(1, 0, 2), 0).known);
  EXPECT_FALSE(JudgeDisturbance(At(1, 0, 2), At(1, 0, 2), 0).known);
}

TEST(CpuUsageTest, ASharePrintsAsAWholePercentage) {
  EXPECT_EQ(WholePercent(0.634), "63%");
  EXPECT_EQ(WholePercent(0.636), "64%");
  EXPECT_EQ(WholePercent(0), "0%");
  EXPECT_EQ(WholePercent(1), "100%");
}

TEST(CpuUsageTest, UsableCoresAreTheAffinityLoweredToTheCgroupQuota) {
  EXPECT_EQ(ParseCgroupCpuMax("150000 100000\n"), 1.5);
  EXPECT_FALSE(ParseCgroupCpuMax("max 100000\n").has_value());
  EXPECT_FALSE(ParseCgroupCpuMax("").has_value());
  EXPECT_FALSE(ParseCgroupCpuMax("x 100000").has_value());
  EXPECT_EQ(UsableCoresFrom(16, 1.5).count, 2);  // a container's quota of 1.5 cores on a 16-CPU host
  EXPECT_EQ(UsableCoresFrom(16, 1.5).Describe(), "2 cores (affinity 16 CPUs, cgroup quota 1.5 cores)");
  EXPECT_EQ(UsableCoresFrom(4, std::nullopt).count, 4);
  EXPECT_EQ(UsableCoresFrom(4, std::nullopt).Describe(), "4 cores (affinity 4 CPUs)");
  EXPECT_EQ(UsableCoresFrom(2, 8).count, 2);       // a quota above the affinity changes nothing
  EXPECT_EQ(UsableCoresFrom(0, 0.1).count, 1);     // never below one
  const UsableCores here = ReadUsableCores();
  EXPECT_GE(here.count, 1);
  EXPECT_LE(here.count, std::max(1, here.affinity));
}

TEST(CpuUsageTest, ABusyMachineIsSaidBeforeMeasuring) {
  // Over 0.3 s on 2 cores (0.6 s of capacity): others busy for 0.38 s is 63%, over the 25% that marks a cell.
  const MachineCpuTimes before{true, 100, 0, 1000};
  EXPECT_EQ(BusyMachineWarning(JudgeDisturbance(before, {true, 100.38, 0, 1000.6}, 0), 0.3),
            "the machine is busy: other processes used 63% of the machine's CPU over the last 0.3 s (more than 25%); "
            "cells measured now may be marked disturbed, and their speeds are then not published");
  EXPECT_EQ(BusyMachineWarning(JudgeDisturbance(before, {true, 100.06, 0.12, 1000.6}, 0), 0.3),
            "the machine is busy: the hypervisor took 20% of the machine's CPU (steal) over the last 0.3 s (more "
            "than 10%); cells measured now may be marked disturbed, and their speeds are then not published");
  // A quiet machine, and one whose counters could not be read, say nothing.
  EXPECT_EQ(BusyMachineWarning(JudgeDisturbance(before, {true, 100.06, 0, 1000.6}, 0), 0.3), "");
  EXPECT_EQ(BusyMachineWarning(JudgeDisturbance(before, MachineCpuTimes{}, 0), 0.3), "");
  // The probe reads this machine's counters (whatever its load, the judgement is known).
  EXPECT_TRUE(ProbeMachineLoad(0.05).known);
}

// Beside other work a run takes the cores it leaves free, says so once, and never drops below one thread; a
// quiet machine or an unknown load keeps every usable core and says nothing.
TEST(CpuUsageTest, ThreadsAreTheCoresOtherWorkLeavesFree) {
  const UsableCores two = UsableCoresFrom(2, std::nullopt);
  Disturbance load;
  load.known = true;
  load.others_share = 0.5;  // one of two cores spinning
  ThreadChoice busy = ThreadsBesideLoad(two, load, 0.2);
  EXPECT_TRUE(busy.busy);
  EXPECT_EQ(busy.threads, 1);
  EXPECT_EQ(busy.warning,
            "the machine is busy: other processes used 50% of the machine's CPU over the last 0.2 s (more than 25%); "
            "running with 1 thread of 2 (the cores other work leaves free; OMP_NUM_THREADS=N chooses)");
  load.others_share = 1.0;  // every core taken: still one thread
  EXPECT_EQ(ThreadsBesideLoad(two, load, 0.2).threads, 1);
  const UsableCores sixteen = UsableCoresFrom(16, std::nullopt);
  load.others_share = 0.3;  // about 5 of 16 cores
  ThreadChoice some = ThreadsBesideLoad(sixteen, load, 0.2);
  EXPECT_EQ(some.threads, 11);
  EXPECT_NE(some.warning.find("running with 11 threads of 16"), std::string::npos) << some.warning;
  const UsableCores quota = UsableCoresFrom(8, 2.0);  // 8 CPUs, a quota of 2 cores, 4 of the 8 busy
  load.others_share = 0.5;
  EXPECT_EQ(ThreadsBesideLoad(quota, load, 0.2).threads, 1);
  load.others_share = 0.1;  // quiet
  ThreadChoice quiet = ThreadsBesideLoad(two, load, 0.2);
  EXPECT_FALSE(quiet.busy);
  EXPECT_EQ(quiet.threads, 2);
  EXPECT_EQ(quiet.warning, "");
  EXPECT_EQ(ThreadsBesideLoad(two, Disturbance{}, 0.2).threads, 2);  // unknown load
}

}  // namespace
}  // namespace tmx
