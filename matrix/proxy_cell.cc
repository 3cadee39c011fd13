#include "matrix/proxy_cell.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"

namespace tmx::matrix {

double ExtrapolateToDepth(const std::vector<double>& layers, const std::vector<double>& values, double real) {
  const double l0 = layers.front(), l1 = layers.back(), v0 = values.front(), v1 = values.back();
  const double per_layer = std::max(0.0, (v1 - v0) / (l1 - l0));
  return v1 + per_layer * (real - l1);
}

double ExtrapolateToSize(const std::vector<double>& layers, const std::vector<double>& vocab,
                         const std::vector<double>& values, double real_layers, double real_vocab) {
  const double per_id = std::max(0.0, (values[0] - values[2]) / (vocab[0] - vocab[2]));
  return ExtrapolateToDepth({layers[0], layers[1]}, {values[0], values[1]}, real_layers) +
         per_id * (real_vocab - vocab[0]);
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
  if (i < cell.proxies.size() || r->proxy_layers.size() < 2 || (vocab_cut && r->proxy_layers.size() < 3)) return i;
  const double real = r->real_layers;
  auto extrapolate = [&](const std::vector<double>& values) {
    return vocab_cut ? ExtrapolateToSize(r->proxy_layers, r->proxy_vocab, values, real, r->real_vocab)
                     : ExtrapolateToDepth(r->proxy_layers, values, real);
  };
  // A deeper proxy that read less than a shallower one says the cost per layer is below the readings' noise:
  // any line through them would extrapolate that noise, so nothing is extrapolated and the note says why. The
  // same for a proxy with fewer ids reading more than one with more.
  std::vector<std::string> noisy;
  auto rising = [&](const std::vector<double>& v, const char* what) {
    if (vocab_cut ? v[1] >= v[0] && v[0] >= v[2] : v.back() >= v.front()) return true;
    noisy.push_back(what);
    return false;
  };
  // Time is extrapolated per token where the proxies counted tokens: they train the same batches, but a step's
  // tokens vary with its data, and the median step of one depth can be another batch than the next depth's
  // (gemma2/2B_full: 1 layer 24.1 s for a median step of 1114 tokens, 4 layers 23.5 s for one of 982). So each
  // proxy's time is taken for the same step: one of the deepest proxy's typical tokens (its median rate times
  // its median step) at the proxy's own rate (the median of its steps' rates).
  const std::vector<double>& step_s = r->proxy_step_times_s;
  const std::vector<double>& tokens_per_s = r->proxy_tokens_per_second;
  const bool per_token = tokens_per_s.size() == r->proxy_layers.size();
  const double tokens_per_step = per_token ? tokens_per_s.back() * step_s.back() : 0;
  std::vector<double> seconds = step_s;  // each proxy's time for that step
  if (per_token) {
    for (size_t p = 0; p < seconds.size(); ++p) seconds[p] = tokens_per_s[p] > 0 ? tokens_per_step / tokens_per_s[p] : 0;
  }
  const bool timed = std::all_of(seconds.begin(), seconds.end(), [](double t) { return t > 0; }) &&
                     rising(seconds, per_token ? "time per token" : "step time");
  if (timed) {
    const double real_s = extrapolate(seconds);
    r->extrapolated_step_time_s = real_s;
    if (per_token) r->extrapolated_tokens_per_second = tokens_per_step / real_s;
    // FLOPs grow exactly linearly with the layers and the ids (recipes/flops.h), so the line through the
    // proxies' FLOPs for that step (rate x time) is the real size's count.
    if (r->proxy_flops_per_second.size() == r->proxy_layers.size()) {
      std::vector<double> flops;
      for (size_t p = 0; p < r->proxy_layers.size(); ++p) flops.push_back(r->proxy_flops_per_second[p] * seconds[p]);
      r->extrapolated_flops_per_second = extrapolate(flops) / real_s;
    }
  }
  const bool measured = std::all_of(r->proxy_peak_memory_bytes.begin(), r->proxy_peak_memory_bytes.end(),
                                    [](double b) { return b > 0; }) &&
                        rising(r->proxy_peak_memory_bytes, "peak memory");
  if (measured) {
    r->extrapolated_peak_memory_bytes =
        static_cast<int64_t>(extrapolate(r->proxy_peak_memory_bytes));
  }
  if (!noisy.empty()) {
    r->proxy_note = vocab_cut ? "not extrapolated: a deeper proxy, or one with more ids, read less " +
                                    JoinStrings(noisy, " and ") +
                                    " than the other (a cost per layer or per id below the readings' noise)"
                              : "not extrapolated: the deeper proxy read less " + JoinStrings(noisy, " and ") +
                                    " than the shallower (a cost per layer below the readings' noise)";
  }
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
