#include "matrix/support_entry.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/text.h"
#include "harness/column.h"

namespace tmx::matrix {
namespace {

// `v` with `decimals` digits after the point, trailing zeros dropped down to one ("0.42", "812.0").
std::string FormatFixed(double v, int decimals) {
  char buf[512];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  if (ec != std::errc()) {
    end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, 6).ptr;
    return std::string(buf, end);
  }
  std::string s(buf, end);
  if (s.find('.') == std::string::npos) s += ".0";
  while (s.size() >= 2 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  if (s == "-0.0") s = "0.0";
  return s;
}

std::string FormatSignificant(double v, int digits) {
  if (v == 0) return "0.0";
  int exponent = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  return FormatFixed(v, std::max(0, digits - 1 - exponent));
}

std::string TenthsOf(double v) { return FormatFixed(v, 1); }
std::string FourDigits(double v) { return FormatSignificant(v, 4); }
std::string ThreeDigits(double v) { return FormatSignificant(v, 3); }
std::string Thousandths(double v) { return FormatFixed(v, 3); }
std::string Whole(double v) { return std::to_string(std::llround(v)); }

SupportField Text(const char* name, std::string SupportEntry::*member) { return {name, member, nullptr, nullptr}; }
SupportField Number(const char* name, std::optional<double> SupportEntry::*member, std::string (*format)(double)) {
  return {name, nullptr, member, format};
}
// A number added after support.json was first published: left out of it where absent.
SupportField AddedNumber(const char* name, std::optional<double> SupportEntry::*member, std::string (*format)(double)) {
  return {name, nullptr, member, format, true};
}
// A text added after support.json was first published: left out of it where empty.
SupportField AddedText(const char* name, std::string SupportEntry::*member) {
  return {name, member, nullptr, nullptr, true};
}

}  // namespace

const std::vector<SupportField>& SupportFields() {
  static const std::vector<SupportField> fields = {
      Text("status", &SupportEntry::status),
      Text("reason", &SupportEntry::reason),
      Number("tokens_per_second", &SupportEntry::tokens_per_second, TenthsOf),
      AddedNumber("time_to_first_token_s", &SupportEntry::time_to_first_token_s, FourDigits),
      AddedNumber("prefill_tokens_per_second", &SupportEntry::prefill_tokens_per_second, TenthsOf),
      AddedText("scores", &SupportEntry::scores),
      Number("step_time_s", &SupportEntry::step_time_s, FourDigits),
      Number("step_time_spread_s", &SupportEntry::step_time_spread_s, FourDigits),
      Number("peak_memory_gib", &SupportEntry::peak_memory_gib, Thousandths),
      Number("wall_time_s", &SupportEntry::wall_time_s, TenthsOf),
      Number("startup_time_s", &SupportEntry::startup_time_s, TenthsOf),
      Number("ranks", &SupportEntry::ranks, Whole),
      AddedNumber("threads", &SupportEntry::threads, Whole),
      AddedText("ops_verified", &SupportEntry::ops_verified),
      AddedText("proxy", &SupportEntry::proxy),
      AddedNumber("extrapolated_tokens_per_second", &SupportEntry::extrapolated_tokens_per_second, TenthsOf),
      AddedNumber("extrapolated_step_time_s", &SupportEntry::extrapolated_step_time_s, FourDigits),
      AddedNumber("extrapolated_peak_memory_gib", &SupportEntry::extrapolated_peak_memory_gib, Thousandths),
      AddedNumber("gflops_per_second", &SupportEntry::gflops_per_second, TenthsOf),
      AddedNumber("peak_share", &SupportEntry::peak_share, ThreeDigits),
      AddedNumber("extrapolated_peak_share", &SupportEntry::extrapolated_peak_share, ThreeDigits),
      AddedNumber("proxy_peak_share", &SupportEntry::proxy_peak_share, ThreeDigits),
      AddedText("peak_dtype", &SupportEntry::peak_dtype),
      AddedNumber("bandwidth_share", &SupportEntry::bandwidth_share, ThreeDigits),
      AddedNumber("prefill_peak_share", &SupportEntry::prefill_peak_share, ThreeDigits),
      AddedText("numeric", &SupportEntry::numeric),
      AddedNumber("loss_delta", &SupportEntry::loss_delta, ThreeDigits),
      AddedNumber("grad_norm_delta", &SupportEntry::grad_norm_delta, ThreeDigits),
      AddedText("tensor_worst", &SupportEntry::tensor_worst),
      AddedNumber("tensor_error", &SupportEntry::tensor_error, ThreeDigits),
      AddedNumber("reference_time_s", &SupportEntry::reference_time_s, TenthsOf),
      AddedText("repair", &SupportEntry::repair),
      AddedText("repaired_status", &SupportEntry::repaired_status),
      AddedText("speeds_disturbed", &SupportEntry::speeds_disturbed),
      Text("device_name", &SupportEntry::device_name),
      AddedText("cpu_class", &SupportEntry::cpu_class),
      Text("torch_version", &SupportEntry::torch_version),
      AddedText("torch_versions", &SupportEntry::torch_versions),
      AddedText("min_torch", &SupportEntry::min_torch),
      Text("verified_at", &SupportEntry::verified_at),
      Text("config_hash", &SupportEntry::config_hash),
      Text("host", &SupportEntry::host),
      Text("job", &SupportEntry::job),
      Text("commit", &SupportEntry::commit),
      Text("stand_in", &SupportEntry::stand_in),
  };
  return fields;
}

bool SupportEntry::operator==(const SupportEntry& o) const {
  return std::all_of(SupportFields().begin(), SupportFields().end(), [&](const SupportField& f) {
    return f.text ? this->*f.text == o.*f.text : this->*f.number == o.*f.number;
  });
}

nlohmann::ordered_json SupportEntryToJson(const SupportEntry& entry) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const SupportField& f : SupportFields()) {
    if (f.text) {
      if (f.omitted_when_absent && (entry.*f.text).empty()) continue;
      j[f.name] = entry.*f.text;
    } else {
      const std::optional<double>& v = entry.*f.number;
      bool measured = v && std::isfinite(*v);
      if (!measured && f.omitted_when_absent) continue;
      j[f.name] = measured ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    }
  }
  return j;
}

std::string ColumnOfEntry(const std::string& device_type, const SupportEntry& entry) {
  return ColumnOfRecord(device_type, entry.cpu_class, entry.host, entry.device_name, entry.torch_version);
}

void AddTorchSummaries(std::map<std::string, SupportEntry>* support) {
  // Per device column, its entries' (torch version, status), oldest torch first.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> measured;
  for (const auto& [key, entry] : *support) {
    std::optional<Column> column = ParseColumnKey(key);
    if (column && !column->torch_version.empty())
      measured[DeviceColumnKey(*column)].emplace_back(column->torch_version, entry.status);
  }
  for (auto& [device, versions] : measured) {
    std::sort(versions.begin(), versions.end(),
              [](const auto& a, const auto& b) { return CompareTorchVersions(a.first, b.first) < 0; });
  }
  for (auto& [key, entry] : *support) {
    std::optional<Column> column = ParseColumnKey(key);
    auto it = column ? measured.find(DeviceColumnKey(*column)) : measured.end();
    entry.torch_versions.clear();
    entry.min_torch.clear();
    if (it == measured.end()) continue;
    std::vector<std::string> parts;
    for (const auto& [torch, status] : it->second) {
      parts.push_back(torch + " " + status);
      if (entry.min_torch.empty() && IsRunsStatus(status)) entry.min_torch = torch;
    }
    entry.torch_versions = JoinStrings(parts, ", ");
  }
}

std::string RepairedOutcome(const std::string& repaired_status, size_t overrides) {
  return repaired_status + " with " + std::to_string(overrides) + (overrides == 1 ? " override" : " overrides");
}

void KeepPreviousSpeeds(const SupportEntry* previous, SupportEntry* entry) {
  for (std::optional<double> SupportEntry::*speed :
       {&SupportEntry::tokens_per_second, &SupportEntry::step_time_s, &SupportEntry::step_time_spread_s,
        &SupportEntry::wall_time_s, &SupportEntry::startup_time_s, &SupportEntry::time_to_first_token_s,
        &SupportEntry::prefill_tokens_per_second, &SupportEntry::extrapolated_tokens_per_second,
        &SupportEntry::extrapolated_step_time_s, &SupportEntry::gflops_per_second, &SupportEntry::peak_share,
        &SupportEntry::extrapolated_peak_share, &SupportEntry::proxy_peak_share, &SupportEntry::threads,
        &SupportEntry::reference_time_s, &SupportEntry::bandwidth_share, &SupportEntry::prefill_peak_share}) {
    entry->*speed = previous != nullptr ? previous->*speed : std::nullopt;
  }
  entry->speeds_disturbed = previous != nullptr ? previous->speeds_disturbed : "";
}

bool KeepOrMarkSpeeds(const SupportEntry* previous, const CellResult& cell, SupportEntry* entry) {
  const bool previous_measured_undisturbed =
      previous != nullptr && previous->speeds_disturbed.empty() &&
      (previous->tokens_per_second || previous->step_time_s || previous->extrapolated_tokens_per_second);
  if (cell.disturbed_accepted.value_or(false) && !previous_measured_undisturbed) {
    entry->speeds_disturbed = cell.disturbed;
    return true;
  }
  KeepPreviousSpeeds(previous, entry);
  return false;
}

SupportEntry SupportFromCell(const CellResult& cell) {
  SupportEntry s;
  s.status = CellStatusName(cell.status);
  s.reason = cell.reason;
  s.tokens_per_second = cell.tokens_per_second;
  s.time_to_first_token_s = cell.time_to_first_token_s;
  s.prefill_tokens_per_second = cell.prefill_tokens_per_second;
  s.scores = cell.scores;
  s.step_time_s = cell.step_time_median_s;
  s.step_time_spread_s = cell.step_time_spread_s;
  if (cell.wall_time_s > 0) s.wall_time_s = cell.wall_time_s;
  s.startup_time_s = cell.startup_time_s;
  s.reference_time_s = cell.reference_time_s;
  if (cell.peak_memory_bytes) s.peak_memory_gib = static_cast<double>(*cell.peak_memory_bytes) / (1 << 30);
  s.device_name = cell.provenance.device_name;
  s.cpu_class = cell.provenance.cpu_class;
  s.torch_version = cell.provenance.torch_version;
  s.verified_at = cell.provenance.verified_at;
  s.config_hash = cell.config_hash;
  s.host = cell.provenance.host;
  s.job = cell.provenance.job;
  s.commit = cell.provenance.commit;
  s.stand_in = cell.stand_in;
  if (cell.world_size > 1) s.ranks = cell.world_size;
  if (cell.threads) s.threads = *cell.threads;
  if (cell.ops_verified) s.ops_verified = *cell.ops_verified ? "yes" : "no";
  if (!cell.proxy_layers.empty()) {
    s.proxy = ProxyDepths(cell) + " of " + ProxiedSize(cell) + " (" + cell.proxy_cut + ")";
  }
  s.extrapolated_tokens_per_second = cell.extrapolated_tokens_per_second;
  s.extrapolated_step_time_s = cell.extrapolated_step_time_s;
  if (cell.extrapolated_peak_memory_bytes) {
    s.extrapolated_peak_memory_gib = static_cast<double>(*cell.extrapolated_peak_memory_bytes) / (1 << 30);
  }
  if (cell.flops_per_second) s.gflops_per_second = *cell.flops_per_second / 1e9;
  s.peak_share = PeakShare(cell);
  s.extrapolated_peak_share = PeakShare(cell, true);
  if (!s.extrapolated_peak_share) s.proxy_peak_share = ProxyPeakShare(cell);
  s.bandwidth_share = BandwidthShare(cell);
  s.prefill_peak_share = PrefillPeakShare(cell);
  if (s.peak_share || s.extrapolated_peak_share || s.proxy_peak_share || s.prefill_peak_share) {
    s.peak_dtype = cell.flops_dtype;
  }
  s.numeric = cell.numeric_note;
  s.loss_delta = cell.loss_delta;
  s.grad_norm_delta = cell.grad_norm_delta;
  s.tensor_worst = cell.tensor_worst;
  s.tensor_error = cell.tensor_error;
  s.repair = JoinStrings(cell.repair, " ");
  if (cell.repaired_status) s.repaired_status = CellStatusName(*cell.repaired_status);
  return s;
}

}  // namespace tmx::matrix
