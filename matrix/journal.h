// The journal: an append-only JSON-lines file with one CellResult per line, written as each cell finishes so
// that an interrupted `tune-matrix run` keeps every finished cell and can resume. Exactly one process writes
// a given journal at a time: every writer holds the journal's lock (JournalLockPath).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "matrix/cell.h"

namespace tmx::matrix {

// The lock file every writer of the journal at `journal_path` holds while it appends, compacts or replaces
// it (base/lock.h): ".<name>.lock" in the journal's folder. A run that only appends (--no-write-back) and a
// run or merge that rewrites the same journal can then never interleave and lose a record.
std::string JournalLockPath(const std::string& journal_path);

// `cell` as one journal line (no line break): compact JSON, invalid UTF-8 replaced by U+FFFD.
std::string JournalLine(const CellResult& cell);

// Appends `cell` as one line and fsyncs it. If the file ends in an unfinished line (the previous writer was
// killed mid-append), that fragment is first removed, or finished with a line break if it already is a
// complete record, so the new line never fuses with it.
Status AppendToJournal(const std::string& path, const CellResult& cell);

// Reads every record in file order, each through CellResultFromJson (types, ranges, device and date checks
// against `now`). An unfinished last line (no line break at the end of the file) that is not a complete
// record is skipped and reported in `warnings` (which may be null); blank lines are skipped. Any other
// malformed line (a number out of range included), or a record of another schema version, fails with
// "<path>:<line>: ..." and nothing is returned. NotFound if the file does not exist; InvalidArgument if it is
// not a regular file (a folder, a FIFO: never waited on). An empty file holds no records. `origins` (may be
// null) receives "<path>:<line>" of each record returned, in the same order.
StatusOr<std::vector<CellResult>> ReadJournal(const std::string& path, std::vector<std::string>* warnings,
                                              std::vector<std::string>* origins = nullptr, int64_t now = UnixNow());
// ReadJournal's reading of `text`, the contents of the journal at `path` (named in messages).
StatusOr<std::vector<CellResult>> ParseJournalText(const std::string& text, const std::string& path,
                                                   std::vector<std::string>* warnings,
                                                   std::vector<std::string>* origins, int64_t now);

// A journal as a command reads it, once: its records and warnings, or why it cannot be read (ReadJournal). A
// file that does not exist holds no records (`exists` false, `status` OK).
struct LoadedJournal {
  std::string path;
  bool exists = false;
  Status status;
  std::vector<CellResult> records;
  std::vector<std::string> warnings;
};
LoadedJournal LoadJournal(const std::string& path);

// `appended`, records a run appended to the journal at `path`, as a reader of the file takes them (each
// JournalLine parsed as ReadJournal parses it): what the run publishes without reading the file again.
StatusOr<std::vector<CellResult>> AsJournaled(const std::vector<CellResult>& appended, const std::string& path);

// Whether record `a` replaces `b` of the same cell and column (ColumnOf; records of different columns never
// replace each other): verified later (provenance.verified_at compared as text, which orders the fixed UTC form
// "YYYY-MM-DDTHH:MM:SSZ" by time); within the same second the greater device id (cuda:1 over cuda:0), so the
// choice does not depend on the order journals are read in; for the very same device and second, the record
// read later.
bool Supersedes(const CellResult& a, const CellResult& b);

// A cell (config, device) in one column (ColumnOf): what one record replaces another of.
using CellColumn = std::pair<CellKey, std::string>;
// The newest record per cell and column, by Supersedes.
std::map<CellColumn, CellResult> LatestByCell(const std::vector<CellResult>& cells);

// The newest record per (config, column), as config metadata keeps them: several devices of one type (cuda:0,
// cuda:1) share one column, and the one that Supersedes the others wins; a column is a device type, its CPU
// class and torch version (harness/column.h), so a record never stands for another class or torch.
using ConfigColumn = std::pair<std::string, std::string>;
std::map<ConfigColumn, CellResult> LatestByColumn(const std::vector<CellResult>& cells);
// The same choice as positions in `cells`, for callers that keep something beside each record.
std::map<ConfigColumn, size_t> LatestIndexByColumn(const std::vector<CellResult>& cells);

}  // namespace tmx::matrix
