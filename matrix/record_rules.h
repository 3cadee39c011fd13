// The rules a cell record keeps beyond its fields' ranges (JournalFields' bounds): what one field says must agree
// with what another says, and every record stays small enough for the files it is written into. One table of
// named rules (RecordRules), applied wherever records enter: every journal line read (ParseJournalText, so `run
// --resume`, `merge`, `check`, `compare` and history) is checked against them after its fields
// (CellResultFromJson). A rejected record names the rule, the fields and the contradiction, and the reader
// returns nothing, so nothing of a journal holding one is merged, appended to history, written into a config or
// published.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "matrix/cell.h"
#include "matrix/support_entry.h"

namespace tmx::matrix {

// One journal line (one record): 4 MiB. A run writes tens of KiB (its output tail is 16 KiB, a step time ~20
// bytes); a 100 MB line used to be read, merged into history and only then refused by a later reader.
inline constexpr size_t kMaxJournalLineBytes = size_t{4} << 20;
// One text field of a record (reason, output tail, notes, provenance) and each item of a list of texts: 64 KiB,
// four times the child output a cell keeps. A 5 MiB reason was written into a config, past the 4 MiB its
// readers take.
inline constexpr size_t kMaxRecordTextBytes = size_t{64} << 10;
// Items of a list of texts (problems, repair): 1024.
inline constexpr size_t kMaxRecordListItems = 1024;
// The share of the device's measured matmul peak a step's model FLOP rate may reach: the peak is measured
// (harness/matmul_peak.h), so a busy moment may read it low, but a step a quarter faster than the device's own
// matmuls contradicts it (the committed records reach at most 0.49).
inline constexpr double kMaxPeakShare = 1.25;
// Steps are timed inside the child, the wall time around it: a step time adds up to at most the wall time, give
// or take the two clocks (5% and 1 s).
inline constexpr double kClockMarginShare = 0.05;
inline constexpr double kClockMarginSeconds = 1.0;

struct RecordRule {
  const char* name;  // "status_vs_exit", as messages name it
  const char* says;  // the rule in one line, for a reader
  // What contradicts what in `r`, naming the fields ("status \"runs\" with term_signal 11"); "" when kept.
  std::string (*broken)(const CellResult& r);
};
// Sizes first (a record too large is not looked into further), then status, speed, time, peak and proxies.
const std::vector<RecordRule>& RecordRules();

// The first rule `r` breaks, as InvalidArgument "<where>: cell record breaks rule <name> (<says>): <what>; fix:
// rerun the cell, or delete that line".
Status CheckRecordRules(const CellResult& r, const std::string& where);

// InvalidArgument "<where>: a journal line of N bytes, over the 4 MiB ..." when `bytes` passes
// kMaxJournalLineBytes: checked before the line is parsed.
Status CheckJournalLineSize(size_t bytes, const std::string& where);

// InvalidArgument when a config's text of `bytes` would pass what its readers take (ConfigInput(): validate, run,
// plan and check refuse a larger config): the write-back checks every config before it writes any.
Status CheckConfigFitsReaders(const std::string& path, size_t bytes);

// A support entry (a config's generated block) that contradicts itself, by the rules an entry can break (its
// texts' sizes, its shares of the peak): "reason: 5242880 bytes, over ..."; "" when it keeps them.
std::string SupportEntryContradiction(const SupportEntry& e);

}  // namespace tmx::matrix
