#include "harness/recorded_support.h"

#include <vector>

#include "base/text.h"

namespace tmx {

RecordedSupport ReadRecordedSupport(const YAML::Node& entry) {
  RecordedSupport r;
  if (!entry.IsMap()) return r;
  for (const auto& kv : entry) {
    if (!kv.first.IsScalar() || !kv.second.IsScalar()) continue;
    const std::string& key = kv.first.Scalar();
    std::string* field = key == "status"                      ? &r.status
                         : key == "reason"                    ? &r.reason
                         : key == "verified_at"               ? &r.verified_at
                         : key == "host"                      ? &r.host
                         : key == "commit"                    ? &r.commit
                         : key == "tokens_per_second"         ? &r.tokens_per_second
                         : key == "time_to_first_token_s"     ? &r.time_to_first_token_s
                         : key == "prefill_tokens_per_second" ? &r.prefill_tokens_per_second
                         : key == "peak_memory_gib"           ? &r.peak_memory_gib
                         : key == "device_name"               ? &r.device_name
                         : key == "cpu_class"                 ? &r.cpu_class
                         : key == "torch_version"             ? &r.torch_version
                         : key == "torch_versions"            ? &r.torch_versions
                         : key == "min_torch"                 ? &r.min_torch
                         : key == "repair"                    ? &r.repair
                         : key == "repaired_status"           ? &r.repaired_status
                                                              : nullptr;
    if (field != nullptr) *field = kv.second.Scalar();
  }
  return r;
}

namespace {

// A key of before columns: a bare device type, which every YAML reader takes as a string.
bool IsBareType(const std::string& key) {
  return !key.empty() && key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
}

}  // namespace

std::map<std::string, RecordedSupport> RecordedColumns(const YAML::Node& support) {
  std::map<std::string, RecordedSupport> columns;
  if (!support.IsMap()) return columns;
  for (const auto& kv : support) {
    if (!kv.first.IsScalar()) continue;
    const std::string& key = kv.first.Scalar();
    RecordedSupport r = ReadRecordedSupport(kv.second);
    if (!r.recorded()) continue;
    if (IsBareType(key)) {
      columns[ColumnOfRecord(key, r.cpu_class, r.host, r.device_name, r.torch_version)] = r;
    } else if (ParseColumnKey(key)) {
      columns[key] = r;
    }
  }
  return columns;
}

RecordedSupport FindRecordedSupport(const YAML::Node& support, const std::string& column) {
  std::map<std::string, RecordedSupport> columns = RecordedColumns(support);
  auto it = columns.find(column);
  return it == columns.end() ? RecordedSupport() : it->second;
}

std::string TorchAxisWarning(const YAML::Node& support, const Column& running, const std::string& config) {
  std::map<std::string, RecordedSupport> columns = RecordedColumns(support);
  if (columns.empty()) return "";
  const std::string device = DeviceColumnKey(running);
  const RecordedSupport* here = nullptr;  // any entry of the running device column: they share its torch axis
  std::vector<std::string> elsewhere;
  for (const auto& [key, entry] : columns) {
    std::optional<Column> c = ParseColumnKey(key);
    if (c && DeviceColumnKey(*c) == device) {
      here = &entry;
    } else {
      elsewhere.push_back(key + " (" + entry.status + ")");
    }
  }
  if (here == nullptr) {
    return "tune-matrix never measured " + config + " on " + device + ": its records are of " +
           JoinStrings(elsewhere, ", ") + ", another CPU class or device, and say nothing of this one";
  }
  const std::string measured = here->torch_versions.empty() ? "" : "measured there: " + here->torch_versions;
  if (!here->min_torch.empty() && CompareTorchVersions(running.torch_version, here->min_torch) < 0) {
    return config + " runs on " + device + " from torch " + here->min_torch + " (its min_torch" +
           (measured.empty() ? "" : "; " + measured) + "), and this is torch " + running.torch_version;
  }
  if (!columns.count(ColumnKey(running))) {
    return "tune-matrix never measured " + config + " on " + device + " with torch " + running.torch_version +
           (measured.empty() ? "" : " (" + measured + ")");
  }
  return "";
}

RecordedSupport RecordedRepair(const RecordedSupport& entry, const std::vector<std::string>& repair) {
  if (entry.repaired_status.empty() || repair.empty() || entry.repair != JoinStrings(repair, " ")) return {};
  RecordedSupport r = entry;
  r.status = entry.repaired_status;
  if (r.status == "runs") r.reason.clear();  // the reason says why the config as written is invalid
  r.repair.clear();
  r.repaired_status.clear();
  return r;
}

std::string DescribeRecordedSupport(const RecordedSupport& entry) {
  std::string line = entry.status;
  bool generation = !entry.time_to_first_token_s.empty();
  if (!entry.tokens_per_second.empty()) {
    line += " · " + entry.tokens_per_second + (generation ? " decode tok/s" : " tok/s");
  }
  if (generation) line += " · " + entry.time_to_first_token_s + " s to first token";
  if (!entry.prefill_tokens_per_second.empty()) line += " · " + entry.prefill_tokens_per_second + " prefill tok/s";
  if (!entry.peak_memory_gib.empty()) line += " · " + entry.peak_memory_gib + " GiB peak";
  if (!entry.reason.empty()) line += ": " + entry.reason;
  std::vector<std::string> where;
  for (const std::string& part : {entry.verified_at, entry.host, entry.commit.substr(0, 12)}) {
    if (!part.empty()) where.push_back(part);
  }
  if (!where.empty()) line += " (" + JoinStrings(where, ", ") + ")";
  return line;
}

}  // namespace tmx
