#include "harness/openmp_wait.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

Disturbance Load(double others) {
  Disturbance d;
  d.known = true;
  d.others_share = others;
  return d;
}

TEST(OpenMpWaitTest, OnlyARunInOneProcessWithThreadsToSpinLooksAtTheLoad) {
  const std::vector<std::string> run = {"run", "full_finetune_single_device", "--config", "tiny/full_single_device"};
  EXPECT_EQ(FirstWaitPolicyStep(run, nullptr, nullptr, 2), WaitPolicyStep::kLookAtLoad);
  EXPECT_EQ(FirstWaitPolicyStep(run, "", "", 2), WaitPolicyStep::kLookAtLoad);  // empty is unset
  EXPECT_EQ(FirstWaitPolicyStep(run, nullptr, "4", 1), WaitPolicyStep::kLookAtLoad);
  // The user's policy stands; one thread (one core, or OMP_NUM_THREADS=1) waits for no one.
  EXPECT_EQ(FirstWaitPolicyStep(run, "ACTIVE", nullptr, 2), WaitPolicyStep::kNothing);
  EXPECT_EQ(FirstWaitPolicyStep(run, nullptr, nullptr, 1), WaitPolicyStep::kNothing);
  EXPECT_EQ(FirstWaitPolicyStep(run, nullptr, "1", 16), WaitPolicyStep::kNothing);
  EXPECT_EQ(FirstWaitPolicyStep(run, nullptr, "many", 16), WaitPolicyStep::kNothing);
  // Other subcommands, the launcher of ranks and help do not train.
  EXPECT_EQ(FirstWaitPolicyStep({"validate", "tiny/full_single_device"}, nullptr, nullptr, 2), WaitPolicyStep::kNothing);
  EXPECT_EQ(FirstWaitPolicyStep({"run", "--nproc_per_node", "2", "lora_finetune_distributed"}, nullptr, nullptr, 2),
            WaitPolicyStep::kNothing);
  EXPECT_EQ(FirstWaitPolicyStep({"run", "--nproc_per_node=2", "x"}, nullptr, nullptr, 2), WaitPolicyStep::kNothing);
  EXPECT_EQ(FirstWaitPolicyStep({"run", "--help"}, nullptr, nullptr, 2), WaitPolicyStep::kNothing);
  EXPECT_EQ(FirstWaitPolicyStep({}, nullptr, nullptr, 2), WaitPolicyStep::kNothing);
  // A device plugin named before the subcommand is not the subcommand.
  EXPECT_EQ(FirstWaitPolicyStep({"--device-plugin", "sim.so", "run", "x"}, nullptr, nullptr, 2),
            WaitPolicyStep::kLookAtLoad);
  EXPECT_EQ(FirstWaitPolicyStep({"--device-plugin=sim.so", "run", "x"}, nullptr, nullptr, 2),
            WaitPolicyStep::kLookAtLoad);
  EXPECT_EQ(FirstWaitPolicyStep({"--device-plugin", "run", "devices"}, nullptr, nullptr, 2), WaitPolicyStep::kNothing);
}

TEST(OpenMpWaitTest, OmpNumThreadsIsReadAsLibgompReadsItsFirstLevel) {
  EXPECT_EQ(ThreadsNamed("4"), 4);
  EXPECT_EQ(ThreadsNamed("4,2"), 4);
  for (const char* none : {static_cast<const char*>(nullptr), "", "0", "-2", "many"}) {
    EXPECT_EQ(ThreadsNamed(none), 0) << (none == nullptr ? "null" : none);
  }
}

TEST(OpenMpWaitTest, ThreadsWaitPassivelyOnlyWhereMoreThanOneRunsBesideOtherWork) {
  const UsableCores two = UsableCoresFrom(2, std::nullopt), sixteen = UsableCoresFrom(16, std::nullopt);
  // Quiet or unknown: libgomp's own policy.
  EXPECT_FALSE(PassiveWaitWanted(sixteen, Load(0.05), 0.2, nullptr));
  EXPECT_FALSE(PassiveWaitWanted(sixteen, Disturbance{}, 0.2, nullptr));
  // Busy: 4 of 16 cores taken leaves 12 threads, which would spin.
  EXPECT_TRUE(PassiveWaitWanted(sixteen, Load(0.25 + 0.01), 0.2, nullptr));
  // Busy on 2 cores: one thread is chosen, which waits for no one; the user's 2 threads would spin.
  EXPECT_FALSE(PassiveWaitWanted(two, Load(0.5), 0.2, nullptr));
  EXPECT_TRUE(PassiveWaitWanted(two, Load(0.5), 0.2, "2"));
  EXPECT_FALSE(PassiveWaitWanted(two, Load(0.5), 0.2, "1"));
}

TEST(OpenMpWaitTest, TheStartupLoadTravelsThroughItsVariableExactly) {
  StartupLoad s;
  s.load = Load(0.1234567890123);
  s.load.steal_share = 0.01;
  s.window_s = 0.2;
  s.passive_chosen = true;
  const std::string text = FormatStartupLoad(s);
  EXPECT_EQ(text.rfind("known=1 others=0.1234567890123", 0), 0u) << text;
  std::optional<StartupLoad> back = ParseStartupLoad(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_TRUE(back->load.known);
  EXPECT_DOUBLE_EQ(back->load.others_share, s.load.others_share);
  EXPECT_DOUBLE_EQ(back->load.steal_share, 0.01);
  EXPECT_DOUBLE_EQ(back->window_s, 0.2);
  EXPECT_TRUE(back->passive_chosen);
  // Anything else is refused, so a stray value never becomes a load.
  for (const char* bad : {"", "known=1", "known=1 others=2 steal=0 window=0.2 passive=1",
                          "known=1 others=0.5 steal=0 window=0 passive=1", "known=3 others=0.5 steal=0 window=0.2 passive=1",
                          "known=1 others=x steal=0 window=0.2 passive=1", "known=1 others=0.5 steal=0 window=0.2 passive=1 extra=1"}) {
    EXPECT_FALSE(ParseStartupLoad(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace tmx
