// What tune-matrix recorded for a config on one device type, as `tune` reads it back from the config's
// `metadata.support.<type>` entry (tune-matrix writes the block: matrix/support_block.h). `tune validate`
// and `tune run` read an entry only through here.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

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
  // A repaired cell (invalid as written): the overrides it ran with, space-separated, and what they got.
  std::string repair;
  std::string repaired_status;

  bool recorded() const { return !status.empty(); }
  // Recorded as anything but `runs`: the config as written does not run there.
  bool blocks() const { return recorded() && status != "runs"; }
};

// The entry's fields; an empty RecordedSupport for a node that is not a map.
RecordedSupport ReadRecordedSupport(const YAML::Node& entry);

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
