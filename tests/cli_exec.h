// Running the `tune` and `tune-matrix` binaries from end-to-end tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tmx::test {

struct Result {
  int code = -1;       // the exit code; -1 when a signal ended the program
  std::string output;  // its merged stdout and stderr (the last MiB)
};

// Runs `argv` with OMP_NUM_THREADS=1 and `env` added, and waits (at most `timeout_s`) for it to end.
Result Exec(std::vector<std::string> argv, std::vector<std::pair<std::string, std::string>> env = {},
            double timeout_s = 300);

// The binaries of this build.
inline const std::string kTune = std::string(TM_BINARY_DIR) + "/bin/tune";
inline const std::string kMatrix = std::string(TM_BINARY_DIR) + "/bin/tune-matrix";

}  // namespace tmx::test
