// The fuzzing loop: seeds first, then seeded mutations of the seeds and of the inputs that were accepted,
// for a bounded time or number of inputs. A crash, an abort or an input that runs past its time limit ends
// the process with a message naming the target, the seed and the input's number, so the same command with
// that seed reproduces it; with a crash folder, the input itself is there too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/targets.h"

namespace tmx::fuzz {

struct FuzzOptions {
  uint64_t seed = 1;
  // Stop after this many seconds or this many inputs, whichever comes first (a negative count: no limit).
  double seconds = 10;
  int64_t max_inputs = -1;
  // One input running longer than this is a hang: the process is killed with SIGALRM (0: no limit).
  unsigned per_input_timeout_s = 10;
  // When set, each input is written to <crash_dir>/<target>-current before it runs, so the one that
  // crashed is there afterwards.
  std::string crash_dir;
};

struct FuzzStats {
  int64_t inputs = 0;    // inputs run, seeds included
  int64_t accepted = 0;  // of those, accepted by the target
  double seconds = 0;
};

// REQUIRES: `seeds` is not empty.
FuzzStats Fuzz(const FuzzTarget& target, const std::vector<std::string>& seeds, const FuzzOptions& options);

}  // namespace tmx::fuzz
