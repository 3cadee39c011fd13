// Reports derived from the support metadata written back into the configs: reports/SUPPORT.md for people and
// reports/support.json for tools. Each format is one SupportReporter writing to a caller's stream, so tests
// compare strings and the CLI writes files (through WriteFileAtomically).
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "matrix/support_entry.h"

namespace tmx::matrix {

class SupportReporter {
 public:
  virtual ~SupportReporter() = default;
  // Writes the whole report for `configs` (listed sorted by config name) with one column or entry per matrix
  // column (harness/column.h: "cpu (amx, torch 2.11.0)") in `device_types`, in that order; an empty
  // `device_types` means every column present, in OrderColumns order. Deterministic: the same input gives the
  // same bytes (no clock is read).
  virtual void Report(const std::vector<ConfigSupport>& configs, const std::vector<std::string>& device_types,
                      std::ostream& out) = 0;
};

// reports/SUPPORT.md: a title, a note on how it was generated with the range of verification dates, a table
// configs x columns ("✅ runs · 812 tok/s · 0.42 GiB", "❌ fails", "⛔ too_large", "⏱ timeout",
// "🚫 invalid", "—" where not measured), then every cell that does not run with its reason.
class MarkdownReporter final : public SupportReporter {
 public:
  void Report(const std::vector<ConfigSupport>& configs, const std::vector<std::string>& device_types,
              std::ostream& out) override;
};

// reports/support.json: {"schema_version": 2, "configs": [{"config", "recipe", "support": {<column>: {every
// SupportFields() field, null for a number not measured}}}]}, keys in that fixed order, indented by 2. Version 2:
// entries are keyed by column ("cpu (amx, torch 2.11.0)"), where version 1 keyed them by device type ("cpu").
class JsonReporter final : public SupportReporter {
 public:
  static constexpr int kSchemaVersion = 2;
  void Report(const std::vector<ConfigSupport>& configs, const std::vector<std::string>& device_types,
              std::ostream& out) override;
};

// reports/index.html is HtmlReporter (html_report.h). What the reporters share:

// `configs` sorted by config name (then recipe).
std::vector<const ConfigSupport*> SortedByConfig(const std::vector<ConfigSupport>& configs);
// The report's columns: `device_types`, or when empty every column with an entry, in OrderColumns order.
std::vector<std::string> ReportColumns(const std::vector<ConfigSupport>& configs,
                                       const std::vector<std::string>& device_types);
// What a cell that runs measured, e.g. "812 tok/s · 40% of the bf16 peak · 0.42 GiB"; "" for a cell that does
// not run. A generation
// cell (one with a time to first token) names its speed decode and adds its prefill: "812 decode tok/s · 52.3 ms
// to first token · 4100 prefill tok/s · 0.42 GiB".
std::string Measurements(const SupportEntry& entry);

// A short time as the page's details show one: "52.3 ms" under a second, then "2.51 s", "12.3 s", "123 s".
std::string FormatLatency(double seconds);

// What a peak memory reading is on `device_type` (or a column of it), from the device table
// (DeviceTypeTraits::peak_memory): "high-water mark of resident memory summed over the cell's processes" where the
// device's memory is the host's, "device allocator's peak of the largest rank" on accelerators, "" where nothing is
// read or the type is unknown. SUPPORT.md and the page both say it in these words.
std::string PeakMemoryMeaning(const std::string& device_type);

// "Peak memory is the high-water mark of resident memory summed over the cell's processes on cpu and the
// device allocator's peak of the largest rank on cuda." for `columns` (types sharing a meaning are listed together), "" when none has one.
std::string PeakMemorySentence(const std::vector<std::string>& columns);
// What a generation cell's speeds mean, one sentence for SUPPORT.md and the page; "" when no entry of `columns`
// has a time to first token, so reports without generation cells say nothing of it.
std::string GenerationSentence(const std::vector<const ConfigSupport*>& configs,
                               const std::vector<std::string>& columns);
// What a proxied cell's numbers mean, one sentence for SUPPORT.md and the page; "" when no entry of `columns`
// has a proxy.
std::string ProxySentence(const std::vector<const ConfigSupport*>& configs, const std::vector<std::string>& columns);
// What a repaired cell's text means, one sentence for SUPPORT.md and the page; "" when no entry of `columns`
// has a repair.
std::string RepairSentence(const std::vector<const ConfigSupport*>& configs, const std::vector<std::string>& columns);
// What "% of the peak" means, one sentence for SUPPORT.md and the page; "" when no entry of `columns` has a share.
std::string PeakShareSentence(const std::vector<const ConfigSupport*>& configs,
                              const std::vector<std::string>& columns);
// The days ("2026-12-02") the entries in `columns` were verified on.
std::set<std::string> VerificationDays(const std::vector<const ConfigSupport*>& configs,
                                       const std::vector<std::string>& columns);

// One line of run progress, e.g. "[3/12] cpu  llama3_2/1B_lora_single_device  elapsed 1m05s  eta 4m10s";
// the eta part is left out when `eta_s` is empty. Durations are rounded to whole seconds: "42s", "1m05s",
// "2h03m04s".
std::string FormatProgressLine(size_t i, size_t n, const std::string& device, const std::string& config,
                               double elapsed_s, std::optional<double> eta_s);

// Seconds the cells still to run will take: `remaining_expected_s` (their planned durations) scaled by how the
// run has gone so far, elapsed over the planned durations of the cells done, shrunk toward 1 by
// kEtaPriorSeconds on both sides, so the first few (short, often under-predicted) cells cannot scale a long
// remainder a thousandfold. Empty until a cell is done.
inline constexpr double kEtaPriorSeconds = 60;
std::optional<double> EstimateRemaining(double elapsed_s, double done_expected_s, double remaining_expected_s,
                                        bool any_done);

}  // namespace tmx::matrix
