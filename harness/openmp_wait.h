// How ATen's OpenMP threads wait for work, chosen by `tune run` as it starts. GNU OpenMP (the libgomp the torch
// wheel ships) lets a thread that waits at the end of a parallel region spin on its core first. Beside other work
// those spinning threads take cores from it and from each other (benchmarks/README.md, "OpenMP's wait policy
// beside other work"). OMP_WAIT_POLICY=PASSIVE makes them sleep instead, but libgomp reads the
// variable once, as the program loads, before main and before anything can set it. So `tune run` looks at the
// load first (the look ChooseThreads would take anyway) and, when the machine is busy and more than one thread
// would run, starts itself again with the policy set and the load it saw passed on, so it does not look twice.
// Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/cpu_usage.h"

namespace tmx {

// What `tune run` saw as it started: the load on its cores, looked at once per run.
struct StartupLoad {
  Disturbance load;             // known false when it did not look
  double window_s = 0;          // how long it looked
  bool passive_chosen = false;  // whether it started itself again with OMP_WAIT_POLICY=PASSIVE
};

// The environment variable that carries the load to the program started again.
inline constexpr const char* kStartupLoadVariable = "TM_STARTUP_LOAD";

// OMP_NUM_THREADS's value as a thread count: its first number (libgomp reads "4,2" as 4 at the outer level); 0
// when null, empty or not a count.
int ThreadsNamed(const char* num_threads);

// What to do first, from the command line (argv without the program's name) and the environment's
// OMP_WAIT_POLICY and OMP_NUM_THREADS (null or empty: unset).
enum class WaitPolicyStep {
  kNothing,       // not `tune run` in one process, or the user chose the policy, or one thread will run
  kLookAtLoad,    // look at the load, then decide with PassiveWaitWanted
};
WaitPolicyStep FirstWaitPolicyStep(const std::vector<std::string>& args, const char* wait_policy,
                                   const char* num_threads, int usable_cores);

// Whether threads would spin beside other work: `load` is busy (ThreadsBesideLoad's rule) and the threads that
// will run (OMP_NUM_THREADS's, else ThreadsBesideLoad's choice) are more than one.
bool PassiveWaitWanted(const UsableCores& cores, const Disturbance& load, double window_s, const char* num_threads);

// TM_STARTUP_LOAD's text: "known=1 others=0.5 steal=0 window=0.2 passive=1", and back (nullopt when malformed).
std::string FormatStartupLoad(const StartupLoad& startup);
std::optional<StartupLoad> ParseStartupLoad(const std::string& text);

// What `tune`'s main calls before anything else. Returns when the program goes on in this process; where passive
// waiting is wanted and `/proc/self/exe` can be started, it does not return: the process becomes the same
// program, same arguments, with OMP_WAIT_POLICY=PASSIVE and TM_STARTUP_LOAD set. Reads (and unsets, so child
// processes look for themselves) TM_STARTUP_LOAD when it was started so.
void ChooseOpenMpWaitPolicy(int argc, char** argv);

// The load ChooseOpenMpWaitPolicy saw, for ChooseThreads; load.known false when it did not look.
const StartupLoad& LoadAtStartup();

// The words ChooseThreads adds when the policy was chosen here: "; waiting threads sleep (OMP_WAIT_POLICY=
// PASSIVE: spinning ones would take the cores other work uses)", else "".
std::string WaitPolicyNote();

}  // namespace tmx
