#include "matrix/record_rules.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <variant>

#include "base/input_file.h"
#include "base/text.h"

namespace tmx::matrix {
namespace {

std::string Num(double v) { return FormatNumber(v, v != 0 && std::abs(v) < 0.1 ? 6 : 3); }

// A text field or a list of them that passes the size bounds ("" when none does).
std::string TextTooLarge(const std::string& field, const std::string& text) {
  if (text.size() <= kMaxRecordTextBytes) return "";
  return field + " holds " + std::to_string(text.size()) + " bytes, over the " +
         std::to_string(kMaxRecordTextBytes) + " a text field may hold";
}
std::string TextTooLarge(const std::string& field, const std::vector<std::string>& texts) {
  if (texts.size() > kMaxRecordListItems) {
    return field + " holds " + std::to_string(texts.size()) + " items, over the " +
           std::to_string(kMaxRecordListItems) + " a list may hold";
  }
  for (const std::string& t : texts) {
    std::string problem = TextTooLarge(field + " item", t);
    if (!problem.empty()) return problem;
  }
  return "";
}
template <typename T>
std::string TextTooLarge(const std::string&, const T&) {
  return "";
}

std::string Sizes(const CellResult& r) {
  for (const JournalField& field : JournalFields()) {
    std::string problem =
        std::visit([&](const auto& slot) { return TextTooLarge(field.key, slot.get(r)); }, field.value);
    if (!problem.empty()) return problem;
  }
  return "";
}

// What the cell's run got: the repaired run's status for a repaired cell, else its own.
CellStatus Outcome(const CellResult& r) { return r.repaired_status.value_or(r.status); }

std::string StatusVsExit(const CellResult& r) {
  if (r.exit_code && r.term_signal) {
    return "exit_code " + std::to_string(*r.exit_code) + " and term_signal " + std::to_string(*r.term_signal) +
           " together: a process either exits or is killed";
  }
  const CellStatus outcome = Outcome(r);
  if (outcome != CellStatus::kRuns && outcome != CellStatus::kWrong) return "";
  const std::string status = std::string("status \"") + CellStatusName(outcome) + "\"";
  if (r.term_signal) return status + " with term_signal " + std::to_string(*r.term_signal) + ": a killed run ran";
  if (r.exit_code && *r.exit_code != 0) {
    return status + " with exit_code " + std::to_string(*r.exit_code) + ": a failed run ran";
  }
  return "";
}

std::string SpeedNeedsSteps(const CellResult& r) {
  if (r.step_times_s.empty()) {
    const std::pair<const char*, const std::optional<double>*> speeds[] = {
        {"tokens_per_second", &r.tokens_per_second},
        {"step_time_median_s", &r.step_time_median_s},
        {"step_time_spread_s", &r.step_time_spread_s},
        {"flops_per_second", &r.flops_per_second}};
    for (const auto& [name, value] : speeds) {
      if (value->has_value()) return std::string(name) + " " + Num(**value) + " without step_times_s: no step was timed";
    }
  }
  if (r.prefill_tokens_per_second && !r.time_to_first_token_s) {
    return "prefill_tokens_per_second " + Num(*r.prefill_tokens_per_second) +
           " without time_to_first_token_s: no prefill was timed";
  }
  if (!r.step_time_median_s || r.step_times_s.empty()) return "";
  const size_t skip = r.step_times_s.size() > static_cast<size_t>(r.warmup_steps) ? r.warmup_steps : 0;
  const auto [low, high] = std::minmax_element(r.step_times_s.begin() + static_cast<std::ptrdiff_t>(skip),
                                               r.step_times_s.end());
  const double margin = 1e-6 * *high;
  if (*r.step_time_median_s >= *low - margin && *r.step_time_median_s <= *high + margin) return "";
  return "step_time_median_s " + Num(*r.step_time_median_s) + " outside the timed steps' " + Num(*low) + " to " +
         Num(*high) + " s";
}

std::string TimesWithinWall(const CellResult& r) {
  const double allowed = r.wall_time_s * (1 + kClockMarginShare) + kClockMarginSeconds;
  const double steps = std::accumulate(r.step_times_s.begin(), r.step_times_s.end(), 0.0);
  const std::string wall = "the wall_time_s of " + Num(r.wall_time_s) + " s";
  if (steps > allowed) {
    return "step_times_s add up to " + Num(steps) + " s, more than " + wall + " they were timed within";
  }
  const std::pair<const char*, std::optional<double>> parts[] = {{"init_time_s", r.init_time_s},
                                                                  {"startup_time_s", r.startup_time_s},
                                                                  {"time_to_first_token_s", r.time_to_first_token_s}};
  for (const auto& [name, value] : parts) {
    if (value && *value > allowed) return std::string(name) + " " + Num(*value) + " s, more than " + wall;
  }
  for (double proxy : r.proxy_step_times_s) {
    if (proxy > allowed) return "a proxy_step_times_s of " + Num(proxy) + " s, more than " + wall;
  }
  return "";
}

std::string ShareProblem(const char* what, std::optional<double> share) {
  if (!share || (*share >= 0 && *share <= kMaxPeakShare)) return "";
  return std::string(what) + " reaches " + Num(100 * *share) + "% of peak_flops " + "(the share may be 0 to " +
         Num(100 * kMaxPeakShare) + "%): faster than the device's measured matmuls";
}

std::string PeakShareWithinPeak(const CellResult& r) {
  std::string problem = ShareProblem("flops_per_second", PeakShare(r));
  if (problem.empty()) problem = ShareProblem("extrapolated_flops_per_second", PeakShare(r, true));
  for (double rate : r.proxy_flops_per_second) {
    if (problem.empty() && r.peak_flops && *r.peak_flops > 0 && std::isfinite(rate)) {
      problem = ShareProblem("a proxy_flops_per_second", rate / *r.peak_flops);
    }
  }
  return problem;
}

std::string ProxyLists(const CellResult& r) {
  const size_t n = r.proxy_layers.size();
  const std::pair<const char*, const std::vector<double>*> lists[] = {
      {"proxy_step_times_s", &r.proxy_step_times_s},       {"proxy_peak_memory_bytes", &r.proxy_peak_memory_bytes},
      {"proxy_tokens_per_second", &r.proxy_tokens_per_second}, {"proxy_flops_per_second", &r.proxy_flops_per_second},
      {"proxy_vocab", &r.proxy_vocab}};
  for (const auto& [name, list] : lists) {
    if (!list->empty() && list->size() != n) {
      return std::string(name) + " holds " + std::to_string(list->size()) + " values for " + std::to_string(n) +
             " proxy_layers";
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (r.real_layers > 0 && r.proxy_layers[i] > r.real_layers) {
      return "a proxy of " + Num(r.proxy_layers[i]) + " layers, deeper than the real_layers " +
             std::to_string(r.real_layers);
    }
    if (r.real_vocab > 0 && i < r.proxy_vocab.size() && r.proxy_vocab[i] > r.real_vocab) {
      return "a proxy of " + Num(r.proxy_vocab[i]) + " ids, more than the real_vocab " + std::to_string(r.real_vocab);
    }
  }
  const bool extrapolated = r.extrapolated_step_time_s || r.extrapolated_tokens_per_second ||
                            r.extrapolated_flops_per_second || r.extrapolated_peak_memory_bytes;
  if (extrapolated && n < 2) {
    return "extrapolations from " + std::to_string(n) + " proxy_layers: a line needs two proxies";
  }
  return "";
}

}  // namespace

const std::vector<RecordRule>& RecordRules() {
  static const std::vector<RecordRule> rules = {
      {"sizes", "each text at most 64 KiB, each list of texts at most 1024 items", Sizes},
      {"status_vs_exit", "a cell that ran (runs, wrong) exited with no signal and no code but 0; no process did both",
       StatusVsExit},
      {"speed_vs_steps", "a speed or step statistic comes from timed steps, the median from among them",
       SpeedNeedsSteps},
      {"times_within_wall", "the steps, start-up, prefill and each proxy's step fit in the cell's wall time",
       TimesWithinWall},
      {"peak_share", "a FLOP rate is at most 125% of the device's measured matmul peak", PeakShareWithinPeak},
      {"proxy_lists", "one value per proxy, no proxy larger than the model, extrapolations from two proxies or more",
       ProxyLists},
  };
  return rules;
}

Status CheckRecordRules(const CellResult& r, const std::string& where) {
  for (const RecordRule& rule : RecordRules()) {
    const std::string broken = rule.broken(r);
    if (broken.empty()) continue;
    return Status::InvalidArgument(where + ": cell record breaks rule " + rule.name + " (" + rule.says + "): " +
                                   broken + "; fix: rerun the cell, or delete that line");
  }
  return Status::OK();
}

Status CheckJournalLineSize(size_t bytes, const std::string& where) {
  if (bytes <= kMaxJournalLineBytes) return Status::OK();
  return Status::InvalidArgument(where + ": a journal line of " + std::to_string(bytes) + " bytes, over the " +
                                 std::to_string(kMaxJournalLineBytes) +
                                 " one record may hold (a run writes tens of KiB); fix: delete that line");
}

Status CheckConfigFitsReaders(const std::string& path, size_t bytes) {
  const int64_t limit = ConfigInput().max_bytes;
  if (static_cast<int64_t>(bytes) <= limit) return Status::OK();
  return Status::InvalidArgument(path + ": its support block would make it " + FormatBytes(static_cast<int64_t>(bytes)) +
                                 ", over the " + FormatBytes(limit) +
                                 " a config may hold (validate, run and plan would refuse it); nothing was written; "
                                 "fix: merge records with shorter texts");
}

std::string SupportEntryContradiction(const SupportEntry& e) {
  for (const SupportField& f : SupportFields()) {
    if (f.text) {
      std::string problem = TextTooLarge(f.name, e.*f.text);
      if (!problem.empty()) return problem;
    }
  }
  const std::pair<const char*, std::optional<double>> shares[] = {
      {"peak_share", e.peak_share}, {"extrapolated_peak_share", e.extrapolated_peak_share},
      {"proxy_peak_share", e.proxy_peak_share}};
  for (const auto& [name, share] : shares) {
    if (share && !(*share >= 0 && *share <= kMaxPeakShare)) {
      return std::string(name) + " " + Num(*share) + ", outside 0 to " + Num(kMaxPeakShare) +
             " (a share of the device's measured matmul peak)";
    }
  }
  return "";
}

}  // namespace tmx::matrix
