// The local launcher behind `tune run --nproc_per_node N`: starts N ranks of one run as child processes, as
// torchrun does on one node, and ends the run as soon as one rank fails.
//
// Each rank is the same program with the same arguments (an argv vector, never a shell string) and torchrun's
// environment: RANK and LOCAL_RANK (0..N-1), WORLD_SIZE and LOCAL_WORLD_SIZE (N), MASTER_ADDR (127.0.0.1) and
// MASTER_PORT (a free port). OMP_NUM_THREADS, unless set (to something), is the machine's cores divided among the ranks
// (torchrun sets 1), so N ranks on one host do not oversubscribe it. The ranks stay in the launcher's process
// group: whoever stops the launcher's group (the matrix, a terminal's Ctrl-C) stops every rank. A SIGINT,
// SIGTERM or SIGHUP sent to the launcher alone stops them too, instead of leaving them orphaned.
//
// The ranks are children of base/subprocess.h's SubprocessSet (own_process_group and inherit_output off and
// on): each rank's whole environment is built before fork(), so a multi-threaded launcher calls nothing
// unsafe in the child. Their stdin is /dev/null; their stdout and stderr are the launcher's.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tmx {

struct LaunchOptions {
  int nproc = 1;                    // ranks to start; at least 1
  std::vector<std::string> argv;    // each rank's program and arguments
  // Seconds between SIGTERM and SIGKILL for the ranks still running after one failed.
  double kill_grace_s = 5;
  // Variables set for every rank besides torchrun's (tests).
  std::vector<std::pair<std::string, std::string>> env;
};

// How the ranks ended: the first rank that failed (by the time its exit was seen), or none.
struct LaunchResult {
  std::optional<int> failed_rank;
  std::string failure;  // "exited with code 3", "was killed by signal 9 (Killed)"
  int exit_code = 0;    // the failed rank's code (128 + signal when killed); 0 when every rank succeeded
  std::vector<int> stopped_ranks;  // ranks the launcher terminated after the failure or the interrupt
  // The SIGINT, SIGTERM or SIGHUP that reached the launcher while the ranks ran, 0 if none. The launcher then
  // stopped every rank still running; failed_rank stays empty.
  int interrupt_signal = 0;
};

// Starts the ranks and waits for all of them. Unavailable when a rank cannot be started (the ranks already
// started are stopped). Unless the caller installed them already, installs SubprocessSet's interrupt handlers
// for SIGINT, SIGTERM and SIGHUP while it runs, and restores the previous ones (and forgets the signal,
// which the result reports) before it returns.
StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options);

// The variables rank `rank` gets on top of the launcher's environment: torchrun's, OMP_NUM_THREADS unless
// the launcher's is set and non-empty, then options.env (which wins).
std::vector<std::pair<std::string, std::string>> RankEnvironment(const LaunchOptions& options, int rank, int port);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
StatusOr<int> FreeLocalPort();

// Whether this process may launch `nproc` ranks: InvalidArgument naming the variables and the fix when torchrun's
// RANK, WORLD_SIZE or LOCAL_RANK is already set (left in the shell by an earlier run, or torchrun around
// `tune run --nproc_per_node`). They used to make the launcher run itself as one silent rank of them. The ranks
// this launcher starts get them set and no --nproc_per_node, so they never ask.
Status CheckLauncherEnvironment(int nproc);

}  // namespace tmx
