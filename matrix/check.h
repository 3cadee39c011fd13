// `tune-matrix check`: does what the configs claim about their devices still match what was observed?
//
// The claims are each built-in config's generated block (`metadata.supported_devices` and
// `metadata.support.<column>`, harness/column.h); the observations are journals (the committed
// reports/journal.jsonl, or what CI jobs just wrote). Like PyTorch's OpInfo `test_dtypes`, which compares the dtypes an
// operator claims with the ones that work when tried, every disagreement is one problem with a paste-ready fix:
//
//   newly broken   recorded `runs`, the latest observation does not run
//   newly fixed    recorded anything else (or nothing), the latest observation runs
//   disagrees      any other status difference, or a `supported_devices` list that its entries contradict
//   stale          the config changed (outside the generated block) since the entry or observation was made
//   no coverage    a device the job was meant to cover has no cell that started on it
//   slower         tokens/s fell by more than the noise allows
//   reports        reports/SUPPORT.md, support.json or index.html is not what the configs' metadata and
//                  history render to, or a record of reports/journal.jsonl is missing from the history
//
// Claims and observations are compared column by column: a record of one CPU class or torch version is never
// checked against the entry of another. An observation older than the config's entry for its column is superseded
// by the entry and ignored.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/registry.h"
#include "matrix/merge.h"
#include "matrix/publish.h"
#include "matrix/speed.h"
#include "matrix/support_block.h"

namespace tmx::matrix {

struct CheckOptions {
  // Device types or ids ("cpu", "cuda", "cuda:1") that must each have at least one cell that started
  // (runs, fails or timeout) in the journals. A job meant to cover a device that ran nothing on it is a
  // failure, never green.
  std::vector<std::string> expect_devices;
  // When a fall in tokens/s is a regression (SpeedNoise: --max-slowdown, --noise-factor, --min-step-time).
  SpeedNoise noise;
  // The command that records every observation into the configs, quoted in fixes (e.g. "tune-matrix merge
  // a.jsonl b.jsonl").
  std::string accept_command = "tune-matrix merge reports/journal.jsonl";
};

enum class ProblemKind { kNewlyBroken, kNewlyFixed, kDisagrees, kStale, kNoCoverage, kSlower, kReports };
const char* ProblemKindTitle(ProblemKind kind);  // "newly broken", ...

struct CheckProblem {
  ProblemKind kind;
  std::string location;  // "<config file>:<line>", or the journals for coverage
  std::string message;   // one line: the device, what is claimed, what was observed
  std::string fix;       // one line, paste-ready: a YAML line to write or a command to run
};

// What a check compared, for its summary line.
struct CheckCounts {
  int observations = 0;     // (config, column) pairs with a fresh observation compared to the claims
  int speed_compared = 0;   // of those, running on both sides with tokens/s compared
  int speed_too_short = 0;  // running on both sides, but a step shorter than min_step_time_s
  int speed_disturbed = 0;  // running on both sides, but the observation was measured beside other work
};

// Every problem, grouped by kind in the order above, then by config and column. `counts` may be null.
std::vector<CheckProblem> CheckSupport(const std::vector<ConfigSupport>& configs, const JournalSet& observed,
                                       const CheckOptions& options, CheckCounts* counts = nullptr);

// Compares the reports in `reports_dir` with what the configs' metadata and the history there render to (a
// missing report, or a history file that cannot be read, is a problem too), and checks that every record of
// <reports_dir>/journal.jsonl, when there is one, is in the history.
// `loaded`, the journals the command read (LoadJournals): where it holds reports_dir's journal, its records are
// taken from there instead of reading the file again.
std::vector<CheckProblem> CheckReports(const std::vector<ConfigSupport>& configs, const std::string& reports_dir,
                                       const JournalSet* loaded = nullptr);

// The problems grouped under one heading per kind, each as "<location>: <message>" and an indented
// "fix: ..." line.
void PrintProblems(const std::vector<CheckProblem>& problems, std::ostream& out);

}  // namespace tmx::matrix
