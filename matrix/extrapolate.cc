#include "matrix/extrapolate.h"

#include <algorithm>
#include <string>

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

namespace {

// Whether the proxies draw a line to the real size: deeper proxies deeper (and the real model deepest), with a
// vocabulary cut the cut proxy at fewer ids than the real model's. Degenerate records (two proxies at one
// depth, a real size of 0) divided by zero.
bool ProxiesSpanALine(const CellResult& r) {
  const std::vector<double>& l = r.proxy_layers;
  if (r.proxy_vocab.empty()) return l.back() > l.front() && r.real_layers >= l.back();
  const std::vector<double>& v = r.proxy_vocab;
  return l[1] > l[0] && v[0] > v[2] && r.real_layers >= l[1] && r.real_vocab >= v[0];
}

}  // namespace

void ExtrapolateFromProxies(CellResult* r) {
  r->extrapolated_step_time_s.reset();
  r->extrapolated_tokens_per_second.reset();
  r->extrapolated_flops_per_second.reset();
  r->extrapolated_peak_memory_bytes.reset();
  const size_t n = r->proxy_layers.size();
  if (n < 2 || (!r->proxy_vocab.empty() && (n < 3 || r->proxy_vocab.size() != n)) ||
      r->proxy_step_times_s.size() != n || r->proxy_peak_memory_bytes.size() != n || !ProxiesSpanALine(*r)) {
    return;
  }
  const bool vocab_cut = !r->proxy_vocab.empty();
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
}

}  // namespace tmx::matrix
