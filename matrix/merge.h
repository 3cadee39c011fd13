// Assembling the support matrix from several machines: CI jobs per device (and shards of one device's job)
// each leave a journal; `tune-matrix merge` reads them all, keeps the newest record per cell with its
// provenance, writes the results into the configs and reports, and keeps the combined journal as the
// evidence for what was written.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "harness/registry.h"
#include "matrix/cell.h"

namespace tmx::matrix {

// Records read from one or more journals.
struct JournalSet {
  std::vector<std::string> paths;     // the journals, as given
  std::vector<CellResult> records;    // every record, journals in the order given, lines in file order
  std::vector<std::string> origins;   // "<path>:<line>" of each record
  std::vector<std::string> warnings;  // e.g. an unfinished last line skipped
};

// Reads every journal (ReadJournal: every record checked for types, ranges, device type and a date not
// ahead of `now`) and checks that each record belongs to this checkout: its config is a built-in config of
// `registry` and its recipe is the one that lists that config. A path that is not a regular file (a folder,
// /dev/null, a FIFO, never opened) or a journal with no complete record is InvalidArgument: it would stand
// for zero cells. The first malformed line or foreign record fails the whole set with "<path>:<line>: ..."
// (and a fix), so a caller writes nothing. A journal with no built-in config at all is foreign; in one with
// some, records of configs no longer built in (renamed, removed) are dropped with a warning. A missing
// journal is NotFound.
StatusOr<JournalSet> LoadJournals(const std::vector<std::string>& paths, const Registry& registry,
                                  int64_t now = UnixNow());

// The combined journal: the newest record of each (config, device) in each column (LatestByCell: another CPU
// class or torch version is another column, kept beside it), one JSON line each, sorted by config, device and
// column, so merging the same journals in any order gives the same bytes.
std::string CombinedJournalText(const std::vector<CellResult>& records);

struct MergeOptions {
  // Where the combined journal is written (atomically); "" writes none.
  std::string journal_out = "reports/journal.jsonl";
  // Folder of the regenerated SUPPORT.md and support.json.
  std::string reports_dir = "reports";
};

// Writes the newest record of each (config, column) into the configs' metadata, then the reports and
// the combined journal. Every config is rendered before any file is written.
Status MergeJournals(const JournalSet& journals, const Registry& registry, const MergeOptions& options,
                     std::ostream& log);

}  // namespace tmx::matrix
