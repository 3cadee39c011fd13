// `tune-matrix compare A B`: what changed between two sets of observations, each a journal file or the
// journal committed at a git commit of this checkout. Per (config, column), as the configs keep them, the newest
// record of each side (LatestByColumn) is compared; records of different columns (another CPU class or torch
// version, harness/column.h) are different cells, never compared for speed:
//
//   newly broken    ran before, does not run after
//   newly fixed     did not run before, runs after
//   status changed  any other status difference (fails -> timeout)
//   slower, faster  tokens/s moved beyond the noise model `tune-matrix check` uses (speed.h)
//   appeared        measured only after
//   disappeared     measured only before
//
// A regression is a cell newly broken or slower; the command exits 1 when there is one.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "matrix/cell.h"
#include "matrix/speed.h"

namespace tmx::matrix {

// One side of a comparison: what it is called in the output and its records.
struct CompareSide {
  std::string label;  // "a.jsonl", or "HEAD~1 (0123456789ab):reports/journal.jsonl"
  std::vector<CellResult> records;
};

// `spec` as one side: the journal file at that path when there is a file there, else the journal at
// `journal_path` (relative to the repository's root) in commit `spec` of the git repository at `repo_dir`.
// Either way the journal is read as every journal is (ReadJournal), so a file that is not a journal, or a
// spec that names neither a file nor a commit (nor a commit with that journal), is one InvalidArgument or
// NotFound error naming it.
StatusOr<CompareSide> LoadCompareSide(const std::string& spec, const std::string& repo_dir,
                                      const std::string& journal_path);

enum class ChangeKind { kNewlyBroken, kNewlyFixed, kStatusChanged, kSlower, kFaster, kAppeared, kDisappeared };
const char* ChangeKindTitle(ChangeKind kind);  // "newly broken", ...

struct CellChange {
  ChangeKind kind;
  std::string config;
  std::string column;                // harness/column.h: records of different columns are never compared
  std::optional<CellResult> before;  // absent for kAppeared
  std::optional<CellResult> after;   // absent for kDisappeared
  SpeedChange speed;                 // for kSlower and kFaster
};

struct Comparison {
  std::vector<CellChange> changes;  // by kind in the order above, then config and column
  int before_cells = 0;             // (config, column) pairs on each side
  int after_cells = 0;
  int unchanged = 0;        // on both sides, same status, no speed change beyond the noise
  int speed_compared = 0;   // running on both sides with tokens/s compared
  int speed_too_short = 0;  // running on both sides, but a step shorter than min_step_time_s
  int speed_disturbed = 0;  // running on both sides, but one side was measured beside other work
  int Count(ChangeKind kind) const;
  int Regressions() const;  // newly broken + slower
};

Comparison CompareRecords(const std::vector<CellResult>& before, const std::vector<CellResult>& after,
                          const SpeedNoise& noise);

// The comparison for people:
//
//   tune-matrix compare: <before label> (8 cells) -> <after label> (9 cells)
//   newly broken (1):
//     llama3_2/1B_lora_single_device  cpu  runs -> fails: <reason>  (0123456789ab, 2026-11-29T10:00:00Z)
//   slower (1):
//     tiny/lora_single_device  cpu  812.0 -> 640.2 tok/s (-21.2%; allowed 10.0% = max(...))
//   ...
//   tune-matrix compare: 2 regressions (1 newly broken, 1 slower); 5 unchanged; ...
//
// Groups with no change are left out; a comparison with none says "no changes".
void PrintComparison(const CompareSide& before, const CompareSide& after, const Comparison& comparison,
                     const SpeedNoise& noise, std::ostream& out);

}  // namespace tmx::matrix
