#include "matrix/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "base/json_io.h"
#include "base/text.h"
#include "harness/column.h"
#include "harness/device_types.h"
#include "matrix/escape.h"

namespace tmx::matrix {

std::vector<const ConfigSupport*> SortedByConfig(const std::vector<ConfigSupport>& configs) {
  std::vector<const ConfigSupport*> sorted;
  for (const ConfigSupport& c : configs) sorted.push_back(&c);
  std::stable_sort(sorted.begin(), sorted.end(), [](const ConfigSupport* a, const ConfigSupport* b) {
    return a->config != b->config ? a->config < b->config : a->recipe < b->recipe;
  });
  return sorted;
}

std::vector<std::string> ReportColumns(const std::vector<ConfigSupport>& configs,
                                       const std::vector<std::string>& device_types) {
  if (!device_types.empty()) return device_types;
  std::vector<std::string> found;
  for (const ConfigSupport& c : configs) {
    for (const auto& entry : c.entries) found.push_back(entry.first);
  }
  return OrderColumns(std::move(found));
}

std::string FormatLatency(double seconds) {
  if (seconds < 1) return FormatNumber(seconds * 1000, 1) + " ms";
  return FormatNumber(seconds, seconds < 10 ? 2 : seconds < 100 ? 1 : 0) + " s";
}

std::string Measurements(const SupportEntry& s) {
  std::vector<std::string> parts;
  auto finite = [](const std::optional<double>& v) { return v && std::isfinite(*v); };
  // A repaired cell: what the config got with its repair; the numbers that follow are that run's.
  const bool repaired = !s.repaired_status.empty();
  if (repaired) parts.push_back(RepairedOutcome(s.repaired_status, SplitList(s.repair, ' ').size()));
  if (!IsRunsStatus(repaired ? s.repaired_status : s.status)) {
    // A cell too large or too slow whose proxies ran: what they verified, and the real depth's extrapolations.
    if (s.ops_verified != "yes") return JoinStrings(parts, " · ");
    parts.push_back("ops verified by proxy");
    if (finite(s.extrapolated_tokens_per_second)) {
      parts.push_back("≈" + FormatNumber(*s.extrapolated_tokens_per_second, *s.extrapolated_tokens_per_second < 10 ? 1 : 0) +
                      " tok/s");
    }
    if (finite(s.extrapolated_peak_share)) parts.push_back("≈" + PeakShareText(*s.extrapolated_peak_share, s.peak_dtype));
    if (finite(s.proxy_peak_share)) parts.push_back(PeakShareText(*s.proxy_peak_share, s.peak_dtype) + " at proxy size");
    if (finite(s.extrapolated_peak_memory_gib)) parts.push_back("≈" + FormatNumber(*s.extrapolated_peak_memory_gib, 2) + " GiB");
    return JoinStrings(parts, " · ");
  }
  const bool generation = s.time_to_first_token_s.has_value();
  if (finite(s.tokens_per_second)) {
    parts.push_back(FormatNumber(*s.tokens_per_second, 0) + (generation ? " decode tok/s" : " tok/s") +
                    (s.speeds_disturbed.empty() ? "" : " (measured beside other work)"));
  }
  if (finite(s.peak_share)) parts.push_back(PeakShareText(*s.peak_share, s.peak_dtype));
  if (finite(s.bandwidth_share)) parts.push_back(BandwidthShareText(*s.bandwidth_share));
  if (!s.scores.empty()) parts.push_back(s.scores);
  if (finite(s.time_to_first_token_s)) parts.push_back(FormatLatency(*s.time_to_first_token_s) + " to first token");
  if (finite(s.prefill_tokens_per_second)) {
    parts.push_back(FormatNumber(*s.prefill_tokens_per_second, 0) + " prefill tok/s");
  }
  if (finite(s.prefill_peak_share)) parts.push_back("prefill " + PeakShareText(*s.prefill_peak_share, s.peak_dtype));
  if (finite(s.peak_memory_gib)) {
    parts.push_back(FormatNumber(*s.peak_memory_gib, 2) + " GiB");
  }
  return JoinStrings(parts, " · ");
}

std::string PeakMemoryMeaning(const std::string& device_type) {
  const std::string type = ColumnDeviceType(device_type);
  const DeviceTypeTraits* traits = FindDeviceType(type.empty() ? device_type : type);
  if (traits == nullptr) return "";
  switch (traits->peak_memory) {
    case DeviceTypeTraits::PeakMemory::kProcessRss:
      return "high-water mark of resident memory summed over the cell's processes";
    case DeviceTypeTraits::PeakMemory::kAllocator:
      return "device allocator's peak of the largest rank";
    case DeviceTypeTraits::PeakMemory::kNone:
      break;
  }
  return "";
}

std::string PeakMemorySentence(const std::vector<std::string>& columns) {
  std::vector<std::pair<std::string, std::vector<std::string>>> meanings;  // in the order columns first have them
  for (const std::string& column : columns) {
    std::string meaning = PeakMemoryMeaning(column);
    if (meaning.empty()) continue;
    const std::string type = ColumnDeviceType(column).empty() ? column : ColumnDeviceType(column);
    auto it = std::find_if(meanings.begin(), meanings.end(), [&](const auto& m) { return m.first == meaning; });
    if (it == meanings.end()) {
      meanings.push_back({meaning, {type}});
    } else if (std::find(it->second.begin(), it->second.end(), type) == it->second.end()) {
      it->second.push_back(type);  // a device type once, whatever its columns
    }
  }
  if (meanings.empty()) return "";
  std::vector<std::string> parts;
  for (const auto& [meaning, types] : meanings) parts.push_back("the " + meaning + " on " + JoinStrings(types, ", "));
  return "Peak memory is " + JoinAlternatives(parts, "and") + ".";
}

namespace {

// Whether an entry of `columns` in `configs` has a share of the memory bandwidth.
bool AnyBandwidthShare(const std::vector<const ConfigSupport*>& configs, const std::vector<std::string>& columns) {
  for (const ConfigSupport* c : configs) {
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it != c->entries.end() && it->second.bandwidth_share) return true;
    }
  }
  return false;
}

}  // namespace

std::string GenerationSentence(const std::vector<const ConfigSupport*>& configs,
                               const std::vector<std::string>& columns) {
  for (const ConfigSupport* c : configs) {
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it == c->entries.end() || !it->second.time_to_first_token_s) continue;
      const std::string bandwidth =
          AnyBandwidthShare(configs, columns)
              ? " \"% of the memory bandwidth\" is the bytes a decode step reads (the weights as stored, less an "
                "untied embedding table, and the KV cache; recipes/flops.h) per second over the best of STREAM's "
                "copy and triad measured on that device by the same matrix run (a quantize cell's: the weights it "
                "read per second); over 100% where the caches hold the weights. The prefill's share is of the "
                "matmul peak."
              : "";
      return "A generation cell's tok/s is its decode speed (one new token per sequence per step); its time to "
             "first token runs from the start of the prompt's forward to the first new token, and its prefill tok/s "
             "counts the prompt tokens of every sequence over that time." + bandwidth;
    }
  }
  return "";
}

std::string ProxySentence(const std::vector<const ConfigSupport*>& configs, const std::vector<std::string>& columns) {
  for (const ConfigSupport* c : configs) {
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it == c->entries.end() || it->second.proxy.empty()) continue;
      return "A cell too large or too slow for its device ran proxies instead: the config with its models cut to 1 "
             "and 4 layers, everything else as written. \"ops verified by proxy\" says every operation, dtype and "
             "shape of the config ran there forward and backward; the ≈ numbers are the real depth's tok/s and peak "
             "memory extrapolated along the line through the two proxies, predictions rather than measurements.";
    }
  }
  return "";
}

std::string PeakShareSentence(const std::vector<const ConfigSupport*>& configs,
                              const std::vector<std::string>& columns) {
  for (const ConfigSupport* c : configs) {
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it == c->entries.end() ||
          !(it->second.peak_share || it->second.extrapolated_peak_share || it->second.proxy_peak_share)) {
        continue;
      }
      return "\"% of the peak\" is the share of the device's matrix-multiply peak a cell's steps reached: the step's "
             "model FLOPs (6 per trained and 4 per frozen weight of every linear layer and position, attention's two "
             "products per attended pair of positions, a reference's or teacher's forward; recipes/flops.h) over its "
             "time, against the best rate of square products in the cell's dtype measured on that device, at the "
             "same threads, by the same matrix run.";
    }
  }
  return "";
}

std::string RepairSentence(const std::vector<const ConfigSupport*>& configs, const std::vector<std::string>& columns) {
  for (const ConfigSupport* c : configs) {
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it == c->entries.end() || it->second.repair.empty()) continue;
      return "A cell invalid as written whose every problem has a known override (a paged optimizer where there is "
             "no unified memory, activation offloading where activations are in host memory already, ...) ran with "
             "those overrides: \"runs with 2 overrides\" says the repaired config ran, and its numbers are the "
             "repaired config's. The overrides are in the config's support entry; `tune validate` prints them and "
             "`tune run --repair` applies them.";
    }
  }
  return "";
}

std::set<std::string> VerificationDays(const std::vector<const ConfigSupport*>& configs,
                                       const std::vector<std::string>& columns) {
  std::set<std::string> days;
  for (const ConfigSupport* c : configs) {
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it != c->entries.end() && !it->second.verified_at.empty()) days.insert(it->second.verified_at.substr(0, 10));
    }
  }
  return days;
}

namespace {

std::string StatusLabel(const std::string& status) {
  const CellStatusInfo* info = FindCellStatus(status);
  return info ? std::string(info->symbol) + " " + status : MarkdownCell(status);
}

// The measurements quote two text fields of the entry, the peak's dtype and the repaired status: escaped as any
// cell's text (a status of CellStatuses() is shown as its name, as StatusLabel shows it).
std::string CellText(const SupportEntry& s) {
  SupportEntry shown = s;
  shown.peak_dtype = MarkdownCell(s.peak_dtype);
  shown.scores = MarkdownCell(s.scores);
  if (FindCellStatus(s.repaired_status) == nullptr) shown.repaired_status = MarkdownCell(s.repaired_status);
  std::string measured = Measurements(shown);
  return StatusLabel(s.status) + (s.repaired_status.empty() ? "" : " as written") +
         (measured.empty() ? "" : " · " + measured);
}

std::string TableRule(size_t columns) {
  std::string rule = "|";
  for (size_t i = 0; i < columns; ++i) rule += "---|";
  return rule;
}

}  // namespace

void MarkdownReporter::Report(const std::vector<ConfigSupport>& configs,
                              const std::vector<std::string>& device_types, std::ostream& out) {
  std::vector<const ConfigSupport*> sorted = SortedByConfig(configs);
  std::vector<std::string> columns = ReportColumns(configs, device_types);
  std::set<std::string> dates = VerificationDays(sorted, columns);
  out << "# Support matrix\n\n";
  out << "Generated by tune-matrix from the `metadata.support` block of each config; do not edit by hand. ";
  if (dates.empty()) {
    out << "No cell has been verified yet.\n\n";
  } else if (dates.size() == 1) {
    out << "Verified on " << MarkdownCell(*dates.begin()) << " (UTC).\n\n";
  } else {
    out << "Verified between " << MarkdownCell(*dates.begin()) << " and " << MarkdownCell(*dates.rbegin())
        << " (UTC).\n\n";
  }

  out << "| config | recipe |";
  for (const std::string& type : columns) out << " " << MarkdownCell(type) << " |";
  out << "\n" << TableRule(columns.size() + 2) << "\n";
  for (const ConfigSupport* c : sorted) {
    out << "| " << MarkdownCode(c->config) << " | " << MarkdownCode(c->recipe) << " |";
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      out << " " << (it == c->entries.end() ? "—" : CellText(it->second)) << " |";
    }
    out << "\n";
  }
  std::string peak = PeakMemorySentence(columns);
  if (!peak.empty()) out << "\n" << peak << "\n";
  std::string generation = GenerationSentence(sorted, columns);
  if (!generation.empty()) out << "\n" << generation << "\n";
  std::string proxy = ProxySentence(sorted, columns);
  if (!proxy.empty()) out << "\n" << proxy << "\n";
  std::string repair = RepairSentence(sorted, columns);
  if (!repair.empty()) out << "\n" << repair << "\n";
  std::string share = PeakShareSentence(sorted, columns);
  if (!share.empty()) out << "\n" << share << "\n";

  out << "\n## Cells that do not run\n\n";
  std::string rows;
  for (const ConfigSupport* c : sorted) {
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it == c->entries.end() || IsRunsStatus(it->second.status)) continue;
      const std::string& reason = it->second.reason;
      rows += "| " + MarkdownCode(c->config) + " | " + MarkdownCell(type) + " | " + StatusLabel(it->second.status) +
              " | " + (reason.empty() ? "(no reason recorded)" : MarkdownCell(reason)) + " |\n";
    }
  }
  if (rows.empty()) {
    out << "Every measured cell runs.\n";
  } else {
    out << "| config | device | status | reason |\n" << TableRule(4) << "\n" << rows;
  }

  // Provenance: which machines, jobs and commits the entries come from, one row per distinct origin.
  std::map<std::vector<std::string>, int> origins;
  for (const ConfigSupport* c : sorted) {
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it == c->entries.end()) continue;
      const SupportEntry& e = it->second;
      ++origins[{type, e.device_name, e.torch_version, e.host, e.job, e.commit.substr(0, 12)}];
    }
  }
  if (!origins.empty()) {
    out << "\n## Where it was measured\n\n| device | model | torch | host | job | commit | cells |\n"
        << TableRule(7) << "\n";
    for (const auto& [origin, cells] : origins) {
      out << "|";
      for (const std::string& field : origin) out << " " << (field.empty() ? "—" : MarkdownCell(field)) << " |";
      out << " " << cells << " |\n";
    }
  }
}

void JsonReporter::Report(const std::vector<ConfigSupport>& configs, const std::vector<std::string>& device_types,
                          std::ostream& out) {
  using nlohmann::ordered_json;
  std::vector<std::string> columns = ReportColumns(configs, device_types);
  ordered_json list = ordered_json::array();
  for (const ConfigSupport* c : SortedByConfig(configs)) {
    ordered_json support = ordered_json::object();
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it == c->entries.end()) continue;
      support[type] = SupportEntryToJson(it->second);
    }
    list.push_back({{"config", c->config}, {"recipe", c->recipe}, {"support", std::move(support)}});
  }
  ordered_json report = {{"schema_version", kSchemaVersion}, {"configs", std::move(list)}};
  out << DumpJson(report, 2) << "\n";
}

std::optional<double> EstimateRemaining(double elapsed_s, double done_expected_s, double remaining_expected_s,
                                        bool any_done) {
  if (!any_done) return std::nullopt;
  return remaining_expected_s * (elapsed_s + kEtaPriorSeconds) / (done_expected_s + kEtaPriorSeconds);
}

std::string FormatProgressLine(size_t i, size_t n, const std::string& device, const std::string& config,
                               double elapsed_s, std::optional<double> eta_s) {
  std::string line = "[" + std::to_string(i) + "/" + std::to_string(n) + "] " + device + "  " + config +
                     "  elapsed " + FormatDuration(elapsed_s);
  if (eta_s) line += "  eta " + FormatDuration(*eta_s);
  return line;
}

}  // namespace tmx::matrix
