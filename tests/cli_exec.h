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

// The matrix column a cpu run of `tune` here is in (harness/column.h): this machine's CPU class, and the LibTorch
// `tune devices` names.
struct CpuColumn {
  std::string cpu_class, torch;
  std::string Key() const { return "cpu (" + cpu_class + ", torch " + torch + ")"; }
  std::string Device() const { return "cpu (" + cpu_class + ")"; }
  // A class that is not this machine's.
  std::string Other() const { return cpu_class == "amx" ? "avx2" : "amx"; }
  // A block entry of that column, as tune-matrix writes one, with `fields` (indented lines) after its status.
  std::string Entry(const std::string& status, const std::string& fields = "") const;
};
CpuColumn RunningCpuColumn();

// The binaries of this build.
inline const std::string kTune = std::string(TM_BINARY_DIR) + "/bin/tune";
inline const std::string kMatrix = std::string(TM_BINARY_DIR) + "/bin/tune-matrix";

}  // namespace tmx::test
