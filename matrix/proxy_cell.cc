#include "matrix/proxy_cell.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"

namespace tmx::matrix {

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

namespace {

// The proxies' numbers that ran (shallowest first, up to the first that did not), and the real depth's
// extrapolations when every proxy ran. Returns the index of the first proxy that did not run, or runs.size().
size_t AddProxyMeasurements(const PlannedCell& cell, const std::vector<CellResult>& runs, CellResult* r) {
  r->real_layers = cell.preset.real_layers;
  r->real_vocab = cell.preset.real_vocab;
  const bool vocab_cut = std::any_of(cell.proxies.begin(), cell.proxies.end(), [](const ProxyRun& p) { return p.vocab > 0; });
  size_t i = 0;
  for (; i < runs.size() && i < cell.proxies.size(); ++i) {
    const CellResult& run = runs[i];
    if (run.status != CellStatus::kRuns) break;
    if (r->proxy_layers.empty() || cell.proxies[i].layers > r->proxy_layers.back()) r->proxy_cut = cell.proxies[i].cut;
    r->proxy_layers.push_back(static_cast<double>(cell.proxies[i].layers));
    if (vocab_cut) r->proxy_vocab.push_back(static_cast<double>(cell.proxies[i].vocab));
    r->proxy_step_times_s.push_back(run.step_time_median_s.value_or(0));
    r->proxy_peak_memory_bytes.push_back(static_cast<double>(run.peak_memory_bytes.value_or(0)));
    if (run.tokens_per_second) r->proxy_tokens_per_second.push_back(*run.tokens_per_second);
    if (run.flops_per_second) r->proxy_flops_per_second.push_back(*run.flops_per_second);
    if (run.peak_flops && !r->peak_flops) {  // every proxy computes in the config's dtype on the same device
      r->peak_flops = run.peak_flops;
      r->flops_dtype = run.flops_dtype;
    }
  }
  // Extrapolated only when every proxy ran (ExtrapolateFromProxies needs two depths, three proxies with a cut).
  if (i == cell.proxies.size()) ExtrapolateFromProxies(r);
  return i;
}

std::string WhichProxy(const PlannedCell& cell, size_t i) {
  return "the proxy of " + std::to_string(cell.proxies[i].layers) + " of its " + ProxiedSize(cell.preset) + " (" +
         cell.proxies[i].cut + ")";
}

}  // namespace

CellResult ResultFromProxies(const PlannedCell& cell, const std::vector<CellResult>& runs) {
  CellResult r = cell.preset;
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
    // What the deepest proxy that printed anything printed: the page shows it as the cell's output.
    if (!run.output_tail.empty()) r.output_tail = run.output_tail;
    r.world_size = run.world_size;
    if (run.threads) r.threads = run.threads;
  }
  const size_t stopped = AddProxyMeasurements(cell, runs, &r);
  // The first proxy that did not run says what the cell records.
  if (stopped < runs.size()) {
    const CellResult& run = runs[stopped];
    if (run.status == CellStatus::kFails) {
      r.status = CellStatus::kFails;
      r.reason = WhichProxy(cell, stopped) + " failed, so the config cannot run here with any memory or time: " +
                 run.reason;
      r.ops_verified = false;
      r.exit_code = run.exit_code;
      r.term_signal = run.term_signal;
      r.output_tail = run.output_tail;
    } else {
      r.proxy_note = WhichProxy(cell, stopped) + " stopped (" + CellStatusName(run.status) + "): " + run.reason;
      if (stopped > 0) {
        r.ops_verified = true;
        r.proxy_note += ", so nothing was extrapolated; " + WhichProxy(cell, 0) + " ran every operation";
      }
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
  // A cell too large by its last proxies' extrapolation leads with this run's, the one its record carries.
  if (cell.memory.basis == MemoryJudgement::Basis::kExtrapolated && r.status == CellStatus::kTooLarge &&
      r.extrapolated_peak_memory_bytes) {
    r.reason = TooLargeReason(cell.memory, *r.extrapolated_peak_memory_bytes);
  }
  std::vector<std::string> numbers;
  if (r.extrapolated_peak_memory_bytes) numbers.push_back(FormatBytes(*r.extrapolated_peak_memory_bytes) + " peak");
  if (r.extrapolated_tokens_per_second) numbers.push_back(FormatNumber(*r.extrapolated_tokens_per_second, 1) + " tok/s");
  if (r.extrapolated_step_time_s) numbers.push_back(FormatDuration(*r.extrapolated_step_time_s) + " a step");
  r.reason += "; proxies of " + ProxyDepths(r) + " of its " + ProxiedSize(r) + " ran every operation" +
              (numbers.empty() ? "" : ", extrapolated " + JoinStrings(numbers, ", "));
  // The plan's note where it could plan one depth alone (matrix/plan.cc PlanProxies).
  if (!cell.preset.proxy_note.empty() && cell.proxies.size() == 1) r.reason += "; " + cell.preset.proxy_note;
  return r;
}

CellResult CalibratedResult(const PlannedCell& cell, const std::vector<CellResult>& proxies, CellResult full) {
  const size_t stopped = AddProxyMeasurements(cell, proxies, &full);
  if (stopped < proxies.size()) {
    full.proxy_note = WhichProxy(cell, stopped) + " did not run (" + CellStatusName(proxies[stopped].status) +
                      "): " + proxies[stopped].reason;
  } else if (proxies.size() == cell.proxies.size()) {
    full.ops_verified = true;
  }
  // A proxy measured beside other work makes the extrapolation's speed the machine's load too.
  for (const CellResult& run : proxies) {
    if (full.disturbed.empty() && !run.disturbed.empty()) full.disturbed = "a proxy: " + run.disturbed;
  }
  return full;
}

}  // namespace tmx::matrix
