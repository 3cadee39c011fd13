// What tune-matrix recorded for a config in one column (a device type, its CPU class and torch version,
// harness/column.h), as `tune` reads it back from the config's `metadata.support.<column>` entry (tune-matrix writes
// the block: matrix/support_block.h). `tune validate` and `tune run` read an entry only through here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "harness/column.h"

namespace tmx {

struct RecordedSupport {
  // The entry's scalar fields; "" where the entry has none (or it is not a scalar).
  std::string status;  // runs, fails, invalid, too_large, too_slow...; "" when nothing is recorded
  std::string reason;
  std::string verified_at;
  std::string host;
  std::string commit;
  std::string tokens_per_second;  // a generation's: decode tokens/s
  // A generation's prefill: "" for training.
  std::string time_to_first_token_s;
  std::string prefill_tokens_per_second;
  std::string peak_memory_gib;
  std::string device_name;
  // Its column's parts as recorded (harness/column.h), and the torch axis of its device column.
  std::string cpu_class;
  std::string torch_version;
  std::string torch_versions;  // "2.11.0 runs, 2.15.0 fails"
  std::string min_torch;
  // A repaired cell (invalid as written): the overrides it ran with, space-separated, and what they got.
  std::string repair;
  std::string repaired_status;

  bool recorded() const { return !status.empty(); }
  // Recorded as anything but `runs`: the config as written does not run there.
  bool blocks() const { return recorded() && status != "runs"; }
};

// The entry's fields; an empty RecordedSupport for a node that is not a map.
RecordedSupport ReadRecordedSupport(const YAML::Node& entry);

// The entries of `support` (a config's `metadata.support`) by their column (harness/column.h): keys as tune-matrix
// writes them, and the entries of a block written before columns (keyed by device type) by the column their fields
// name. Empty for a node that is not a map.
std::map<std::string, RecordedSupport> RecordedColumns(const YAML::Node& support);

// The entry recorded in `column` (ColumnKey); an empty RecordedSupport where there is none. A record of another CPU
// class or torch version says nothing of this column.
RecordedSupport FindRecordedSupport(const YAML::Node& support, const std::string& column);

// What `tune validate` and `tune run` warn of the torch axis before running a config in `running` (its device type,
// this machine's CPU class, this torch), one line, or "" when there is nothing to say: the config has no entry at all
// (nothing was measured), or it was measured in the running column and its torch is not older than min_torch there.
//   "<config> runs on cpu (amx) from torch 2.15.0 (its min_torch; measured there: 2.11.0 fails, 2.15.0 runs), and
//    this is torch 2.11.0"
//   "tune-matrix never measured <config> on cpu (amx) with torch 2.16.0 (measured there: 2.11.0 runs, ...)"
//   "tune-matrix never measured <config> on cpu (avx512_bf16): its records are of cpu (amx, torch 2.11.0) (runs),
//    another CPU class or device, and say nothing of this one"
std::string TorchAxisWarning(const YAML::Node& support, const Column& running, const std::string& config);

// What the entry recorded for the config run with `repair` (overrides, as a device check named them): the
// entry as the repaired config's (status its repaired_status, the reason only when that is not "runs"), or an
// empty RecordedSupport when the entry is of no repair or of another one.
RecordedSupport RecordedRepair(const RecordedSupport& entry, const std::vector<std::string>& repair);

// The entry in a line: "runs · 38087 tok/s · 0.54 GiB peak (2026-12-03T13:08:45Z, vm, 0123456789ab)", a
// reason after the status where there is one, the commit cut to 12 hex digits. A generation's entry (one with
// a time to first token) names its speed decode and adds its prefill: "runs · 812.5 decode tok/s · 0.0523 s to
// first token · 4100.0 prefill tok/s · 0.54 GiB peak (...)".
std::string DescribeRecordedSupport(const RecordedSupport& entry);

}  // namespace tmx
