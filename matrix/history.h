// The history of every measurement, kept beside the reports so that trends survive journal rotation and
// merges: reports/history/<config>/<device type>.jsonl, one journal line (a CellResult) per measurement,
// oldest first.
//
// Why this form:
// - Journal lines: the journal's schema, reader and validation (ReadJournal) serve history too, and a
//   history file is itself a journal (`tune-matrix compare` reads one). Only the output tail is cut, to its
//   last kHistoryTailLines lines and kHistoryTailBytes bytes, so history stays small enough for git.
// - One file per cell (config, device type), growing at its end: a run's diff is lines added at the ends of
//   the files of the cells it measured, so a reader sees per cell what changed; two branches touch the same
//   file only where both measured that cell, and reports/.gitattributes (merge=union) resolves that by
//   keeping both sides' lines.
// - One file holds every column of its device type (harness/column.h: a cpu file holds each CPU class and torch
//   version); readers take the records of one column from it.
// - The reader does not trust the order: it sorts by (verified_at, device, host) and keeps one record per
//   (config, device, verified_at, host, column), the identity of a measurement. A union-merged or concatenated file
//   therefore reads correctly, adding the same records again changes nothing, and the next write puts the
//   file back in order.
// - Nothing replaces a record: `run` adds the journal it moves aside, `run` and `merge` add the records
//   they publish; a file that cannot be read stops the write with nothing written.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "matrix/cell.h"
#include "matrix/journal.h"
#include "matrix/support_entry.h"

namespace tmx::matrix {

// How much of the child's output a history record keeps (the journal keeps the whole tail).
inline constexpr int kHistoryTailLines = 40;
inline constexpr size_t kHistoryTailBytes = 8192;

// The measurements of each cell, by (config, column), oldest first.
using History = std::map<ConfigColumn, std::vector<CellResult>>;

// <reports_dir>/history
std::string HistoryDir(const std::string& reports_dir);

// <history_dir>/<config>/<device type>.jsonl. InvalidArgument when the config is not a relative path of
// plain names ([A-Za-z0-9._-], no "." or "..") or the device type not a plain lowercase word, so that no
// record can name a file outside the folder.
StatusOr<std::string> HistoryFile(const std::string& history_dir, const std::string& config,
                                  const std::string& device_type);

// `record` as history keeps it: the output tail cut to its last kHistoryTailLines lines, and to its last
// kHistoryTailBytes bytes from the first whole UTF-8 character.
CellResult ForHistory(CellResult record);

// Sorted by (verified_at, device, host), one record per (config, device, verified_at, host, column); of two records
// of one measurement that differ, the one whose journal line sorts first, so the result does not depend on
// the order of the input.
std::vector<CellResult> NormalizeHistory(std::vector<CellResult> records);

// How many records AddToHistory added, and into how many files.
struct HistoryUpdate {
  int added = 0;
  int files_written = 0;
};

// Adds ForHistory(record) of each record to its cell's file under `history_dir` (made when missing) unless
// that measurement is there already. Every file is read and rendered before any is written, each written
// atomically and only when its bytes change; a file that cannot be read or a record that names no safe
// file fails with nothing written. `update` may be null.
Status AddToHistory(const std::string& history_dir, const std::vector<CellResult>& records, HistoryUpdate* update);

// The history of the given cells, each (config, column) the records of that column in the file of its config and
// device type (a cell without a file or such records has none). A file that is not a journal, or holds a record of
// another config or device type, fails with "<file>:<line>: ...".
StatusOr<History> ReadHistory(const std::string& history_dir, const std::vector<ConfigColumn>& cells);

// ReadHistory of every (config, column) that has a support entry.
StatusOr<History> ReadHistoryOf(const std::string& history_dir, const std::vector<ConfigSupport>& configs);

// Whether `history` holds the measurement `record` is of.
bool InHistory(const History& history, const CellResult& record);

}  // namespace tmx::matrix
