#include "matrix/proxy_cell.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"

namespace tmx::matrix {
namespace {

std::string Layers(double layers) { return std::to_string(static_cast<int64_t>(layers)); }

// "1 and 2 of its 16 layers"
std::string DepthsText(const std::vector<double>& layers, int real) {
  std::vector<std::string> parts;
  for (double l : layers) parts.push_back(Layers(l));
  std::string joined = parts.size() <= 1 ? JoinStrings(parts, "")
                                         : JoinStrings({parts.begin(), parts.end() - 1}, ", ") + " and " + parts.back();
  return joined + " of its " + std::to_string(real) + " layers";
}

std::string Tenths(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

double ExtrapolateToDepth(const std::vector<double>& layers, const std::vector<double>& values, double real) {
  const double l0 = layers.front(), l1 = layers.back(), v0 = values.front(), v1 = values.back();
  const double per_layer = std::max(0.0, (v1 - v0) / (l1 - l0));
  return v1 + per_layer * (real - l1);
}

PlannedCell ProxyView(const PlannedCell& cell, size_t index) {
  PlannedCell view = cell;
  const ProxyRun& proxy = cell.proxies.at(index);
  view.argv = proxy.argv;
  view.output_dir = proxy.output_dir;
  view.predicted_memory_bytes = proxy.predicted_memory_bytes;
  view.expected_duration_s = proxy.expected_duration_s;
  view.proxies.clear();
  return view;
}

CellResult ResultFromProxies(const PlannedCell& cell, const std::vector<CellResult>& runs) {
  CellResult r = cell.preset;
  r.real_layers = 0;
  for (size_t i = 0; i < runs.size() && i < cell.proxies.size(); ++i) {
    const CellResult& run = runs[i];
    r.wall_time_s += run.wall_time_s;
    if (run.cpu_time_s) r.cpu_time_s = r.cpu_time_s.value_or(0) + *run.cpu_time_s;
    if (r.disturbed.empty() && !run.disturbed.empty()) {
      r.disturbed = run.disturbed;
      r.others_cpu_share = run.others_cpu_share;
      r.steal_share = run.steal_share;
    }
    if (r.provenance.torch_version.empty()) r.provenance.torch_version = run.provenance.torch_version;
    if (r.provenance.device_name.empty()) r.provenance.device_name = run.provenance.device_name;
    if (r.stand_in.empty()) r.stand_in = run.stand_in;
    r.world_size = run.world_size;
    if (run.threads) r.threads = run.threads;
    if (run.status != CellStatus::kRuns) break;
    r.proxy_layers.push_back(static_cast<double>(cell.proxies[i].layers));
    r.proxy_cut = cell.proxies[i].cut;
    r.proxy_step_times_s.push_back(run.step_time_median_s.value_or(0));
    r.proxy_peak_memory_bytes.push_back(static_cast<double>(run.peak_memory_bytes.value_or(0)));
    if (run.tokens_per_second) r.proxy_tokens_per_second.push_back(*run.tokens_per_second);
  }
  const int real = cell.preset.real_layers;
  r.real_layers = real;
  // The first proxy that did not run says what the cell records.
  for (size_t i = 0; i < runs.size(); ++i) {
    const CellResult& run = runs[i];
    if (run.status == CellStatus::kRuns) continue;
    const std::string which = "the proxy of " + Layers(static_cast<double>(cell.proxies[i].layers)) + " of its " +
                              std::to_string(real) + " layers (" + cell.proxies[i].cut + ")";
    if (run.status == CellStatus::kFails) {
      r.status = CellStatus::kFails;
      r.reason = which + " failed, so the config cannot run here with any memory or time: " + run.reason;
      r.ops_verified = false;
      r.exit_code = run.exit_code;
      r.term_signal = run.term_signal;
      r.output_tail = run.output_tail;
    } else {
      r.proxy_note = which + " stopped (" + CellStatusName(run.status) + "): " + run.reason;
      r.reason += "; " + r.proxy_note;
    }
    return r;
  }
  if (runs.size() < cell.proxies.size()) {
    r.proxy_note = "only " + std::to_string(runs.size()) + " of the " + std::to_string(cell.proxies.size()) +
                   " proxies finished";
    r.reason += "; " + r.proxy_note;
    return r;
  }
  r.ops_verified = true;
  std::string shown;
  const bool timed = std::all_of(r.proxy_step_times_s.begin(), r.proxy_step_times_s.end(), [](double t) { return t > 0; });
  if (r.proxy_layers.size() >= 2 && timed) {
    const double step = ExtrapolateToDepth(r.proxy_layers, r.proxy_step_times_s, real);
    r.extrapolated_step_time_s = step;
    // Tokens per step are the config's (its batch and sequences), the same at every depth.
    if (r.proxy_tokens_per_second.size() == r.proxy_layers.size()) {
      r.extrapolated_tokens_per_second = r.proxy_tokens_per_second.back() * r.proxy_step_times_s.back() / step;
    }
  }
  const bool measured =
      std::all_of(r.proxy_peak_memory_bytes.begin(), r.proxy_peak_memory_bytes.end(), [](double b) { return b > 0; });
  if (r.proxy_layers.size() >= 2 && measured) {
    r.extrapolated_peak_memory_bytes =
        static_cast<int64_t>(ExtrapolateToDepth(r.proxy_layers, r.proxy_peak_memory_bytes, real));
  }
  std::vector<std::string> numbers;
  if (r.extrapolated_peak_memory_bytes) numbers.push_back(FormatBytes(*r.extrapolated_peak_memory_bytes) + " peak");
  if (r.extrapolated_tokens_per_second) numbers.push_back(Tenths(*r.extrapolated_tokens_per_second) + " tok/s");
  if (r.extrapolated_step_time_s) numbers.push_back(FormatDuration(*r.extrapolated_step_time_s) + " a step");
  r.reason += "; proxies of " + DepthsText(r.proxy_layers, real) + " ran every operation" +
              (numbers.empty() ? "" : ", extrapolated " + JoinStrings(numbers, ", "));
  return r;
}

}  // namespace tmx::matrix
