// The local launcher behind `tune run --nproc_per_node N`: starts N ranks of one run as child processes, as
// torchrun does on one node, and ends the run as soon as one rank fails.
//
// Each rank is the same program with the same arguments (an argv vector, never a shell string) and torchrun's
// environment: RANK and LOCAL_RANK (0..N-1), WORLD_SIZE and LOCAL_WORLD_SIZE (N), MASTER_ADDR (127.0.0.1) and
// MASTER_PORT (a free port). OMP_NUM_THREADS, unless set (to something), is the machine's cores divided among the ranks
// (torchrun sets 1), so N ranks on one host do not oversubscribe it. The ranks stay in the launcher's process
// group: whoever stops the launcher's group (the matrix, a terminal's Ctrl-C) stops every rank.
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
  std::vector<int> stopped_ranks;  // ranks the launcher terminated after the failure
};

// Starts the ranks and waits for all of them. Unavailable when a rank cannot be started (the ranks already
// started are stopped).
StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
StatusOr<int> FreeLocalPort();

}  // namespace tmx
