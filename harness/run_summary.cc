#include "harness/run_summary.h"

#include <cmath>
#include <cstdio>

#include "base/file_util.h"
#include "base/json_io.h"
#include "base/stats.h"

namespace tmx {
namespace {

using nlohmann::json;


double FromNumber(const json& j) {
  if (std::optional<double> d = NumberFromJson(j)) return *d;
  if (j.is_string()) {
    throw json::type_error::create(302, "expected a number, got \"" + j.get_ref<const std::string&>() + "\"", &j);
  }
  throw json::type_error::create(302, std::string("expected a number, got ") + j.type_name(), &j);
}

std::vector<double> Numbers(const json& j) {
  std::vector<double> out;
  for (const json& e : j) out.push_back(FromNumber(e));
  return out;
}

}  // namespace

void RunSummary::Finish() {
  step_time_median_s.reset();
  step_time_spread_s.reset();
  tokens_per_second.reset();
  flops_per_second.reset();
  if (step_times_s.empty()) return;
  size_t skip = step_times_s.size() > static_cast<size_t>(std::max(warmup_steps, 0)) ? warmup_steps : 0;
  std::vector<double> times(step_times_s.begin() + static_cast<std::ptrdiff_t>(skip), step_times_s.end());
  double median = Median(times);
  std::vector<double> deviations;
  for (double t : times) deviations.push_back(std::fabs(t - median));
  step_time_median_s = median;
  step_time_spread_s = Median(deviations);
  // The median of a per-step count over its step's time, from step `skip` on; unknown without counts.
  auto median_rate = [&](const auto& counts) -> std::optional<double> {
    std::vector<double> rates;
    for (size_t i = skip; i < step_times_s.size() && i < counts.size(); ++i) {
      if (step_times_s[i] > 0) rates.push_back(static_cast<double>(counts[i]) / step_times_s[i]);
    }
    return rates.empty() ? std::nullopt : std::optional<double>(Median(rates));
  };
  tokens_per_second = median_rate(step_tokens);
  flops_per_second = median_rate(step_flops);
  if (!step_bytes.empty()) bytes_per_second = median_rate(step_bytes);
}

json RunSummaryToJson(const RunSummary& s) {
  json steps = json::array(), losses = json::array();
  for (double t : s.step_times_s) steps.push_back(NumberToJson(t));
  for (double l : s.losses) losses.push_back(NumberToJson(l));
  json j = {{"version", kRunSummaryVersion},
            {"recipe", s.recipe},
            {"config", s.config},
            {"device", s.device},
            {"device_name", s.device_name},
            {"torch_version", s.torch_version},
            {"ok", s.ok},
            {"error", s.error},
            {"error_kind", s.error_kind},
            {"seed", s.seed},
            {"init_time_s", NumberToJson(s.init_time_s)},
            {"step_times_s", steps},
            {"losses", losses},
            {"step_tokens", s.step_tokens},
            {"warmup_steps", s.warmup_steps},
            {"peak_memory_source", s.peak_memory_source},
            {"trainable_parameters", s.trainable_parameters},
            {"total_parameters", s.total_parameters},
            {"stand_ins", s.stand_ins},
            {"world_size", s.world_size}};
  if (s.threads > 0) j["threads"] = s.threads;
  if (s.peak_memory_bytes) j["peak_memory_bytes"] = *s.peak_memory_bytes;
  if (s.step_time_median_s) j["step_time_median_s"] = NumberToJson(*s.step_time_median_s);
  if (s.step_time_spread_s) j["step_time_spread_s"] = NumberToJson(*s.step_time_spread_s);
  if (s.tokens_per_second) j["tokens_per_second"] = NumberToJson(*s.tokens_per_second);
  if (s.time_to_first_token_s) j["time_to_first_token_s"] = NumberToJson(*s.time_to_first_token_s);
  if (s.prefill_tokens_per_second) j["prefill_tokens_per_second"] = NumberToJson(*s.prefill_tokens_per_second);
  if (s.first_grad_norm) j["first_grad_norm"] = NumberToJson(*s.first_grad_norm);
  if (!s.step_flops.empty()) {
    json flops = json::array();
    for (double f : s.step_flops) flops.push_back(NumberToJson(f));
    j["step_flops"] = flops;
  }
  for (const QuantizedKind& q : s.quantization) {
    j["quantization"].push_back({{"kind", q.kind}, {"scheme", q.scheme}, {"tensors", q.tensors},
                                 {"max_error", NumberToJson(q.max_error)}, {"max_bound", NumberToJson(q.max_bound)},
                                 {"relative_rms", NumberToJson(q.relative_rms)},
                                 {"relative_rms_bound", NumberToJson(q.relative_rms_bound)}});
  }
  if (!s.step_bytes.empty()) {
    json bytes = json::array();
    for (double b : s.step_bytes) bytes.push_back(NumberToJson(b));
    j["step_bytes"] = bytes;
  }
  if (s.prefill_flops) j["prefill_flops"] = NumberToJson(*s.prefill_flops);
  if (s.bytes_per_second) j["bytes_per_second"] = NumberToJson(*s.bytes_per_second);
  if (!s.dtype.empty()) j["dtype"] = s.dtype;
  if (s.flops_per_second) j["flops_per_second"] = NumberToJson(*s.flops_per_second);
  if (!s.scores.empty()) {
    json scores = json::object();
    for (const auto& [name, value] : s.scores) scores[name] = NumberToJson(value);
    j["scores"] = scores;
  }
  return j;
}

std::string ScoresText(const std::map<std::string, double>& scores) {
  auto four = [](double v) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.4f", v);
    return std::string(text);
  };
  const std::string suffix = "_stderr";
  std::string out;
  for (const auto& [name, score] : scores) {
    const bool is_stderr = name.size() > suffix.size() &&
                           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (is_stderr && scores.count(name.substr(0, name.size() - suffix.size()))) continue;  // beside its metric
    std::string shown = name;
    const size_t slash = shown.rfind('/');
    if (slash != std::string::npos) shown[slash] = ' ';
    out += (out.empty() ? "" : ", ") + shown + " " + four(score);
    const auto error = scores.find(name + suffix);
    if (error != scores.end()) out += " ± " + four(error->second);
  }
  return out;
}

StatusOr<RunSummary> RunSummaryFromJson(const json& j, const std::string& where) {
  if (!j.is_object()) return Status::InvalidArgument(where + ": a run summary must be a JSON object");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kRunSummaryVersion) {
    return Status::InvalidArgument(where + ": run summary version " + (j.contains("version") ? JsonForMessage(j["version"]) : "missing") +
                                   ", but this build reads version " + std::to_string(kRunSummaryVersion) +
                                   " (fix: run the recipe and the reader from the same build)");
  }
  RunSummary s;
  try {
    s.recipe = j.at("recipe").get<std::string>();
    s.config = j.at("config").get<std::string>();
    s.device = j.at("device").get<std::string>();
    s.device_name = j.at("device_name").get<std::string>();
    s.torch_version = j.at("torch_version").get<std::string>();
    s.ok = j.at("ok").get<bool>();
    s.error = j.at("error").get<std::string>();
    s.error_kind = j.at("error_kind").get<std::string>();
    s.seed = j.at("seed").get<uint64_t>();
    s.init_time_s = FromNumber(j.at("init_time_s"));
    s.step_times_s = Numbers(j.at("step_times_s"));
    s.losses = Numbers(j.at("losses"));
    s.step_tokens = j.at("step_tokens").get<std::vector<int64_t>>();
    s.warmup_steps = j.at("warmup_steps").get<int>();
    s.peak_memory_source = j.at("peak_memory_source").get<std::string>();
    s.trainable_parameters = j.at("trainable_parameters").get<int64_t>();
    s.total_parameters = j.at("total_parameters").get<int64_t>();
    s.stand_ins = j.at("stand_ins").get<std::vector<std::string>>();
    if (j.contains("world_size")) s.world_size = j["world_size"].get<int>();
    if (j.contains("threads")) s.threads = j["threads"].get<int>();
    if (j.contains("peak_memory_bytes")) s.peak_memory_bytes = j["peak_memory_bytes"].get<int64_t>();
    if (j.contains("step_time_median_s")) s.step_time_median_s = FromNumber(j["step_time_median_s"]);
    if (j.contains("step_time_spread_s")) s.step_time_spread_s = FromNumber(j["step_time_spread_s"]);
    if (j.contains("tokens_per_second")) s.tokens_per_second = FromNumber(j["tokens_per_second"]);
    if (j.contains("time_to_first_token_s")) s.time_to_first_token_s = FromNumber(j["time_to_first_token_s"]);
    if (j.contains("prefill_tokens_per_second")) {
      s.prefill_tokens_per_second = FromNumber(j["prefill_tokens_per_second"]);
    }
    if (j.contains("first_grad_norm")) s.first_grad_norm = FromNumber(j["first_grad_norm"]);
    if (j.contains("step_flops")) s.step_flops = Numbers(j["step_flops"]);
    if (j.contains("quantization")) {
      for (const json& q : j["quantization"]) {
        s.quantization.push_back({q.at("kind").get<std::string>(), q.at("scheme").get<std::string>(),
                                  q.at("tensors").get<int64_t>(), FromNumber(q.at("max_error")),
                                  FromNumber(q.at("max_bound")), FromNumber(q.at("relative_rms")),
                                  FromNumber(q.at("relative_rms_bound"))});
      }
    }
    if (j.contains("step_bytes")) s.step_bytes = Numbers(j["step_bytes"]);
    if (j.contains("prefill_flops")) s.prefill_flops = FromNumber(j["prefill_flops"]);
    if (j.contains("bytes_per_second")) s.bytes_per_second = FromNumber(j["bytes_per_second"]);
    if (j.contains("dtype")) s.dtype = j["dtype"].get<std::string>();
    if (j.contains("flops_per_second")) s.flops_per_second = FromNumber(j["flops_per_second"]);
    if (j.contains("scores")) {
      if (!j["scores"].is_object()) {
        throw json::type_error::create(302, std::string("scores: expected an object, got ") + j["scores"].type_name(),
                                       &j["scores"]);
      }
      for (const auto& [name, value] : j["scores"].items()) s.scores[name] = FromNumber(value);
    }
  } catch (const json::exception& e) {
    return Status::InvalidArgument(where + ": run summary field missing or of the wrong type (" + e.what() + ")");
  }
  // A run without a loss (generation) records none; a training run one per step.
  bool losses_match = s.losses.empty() || s.losses.size() == s.step_times_s.size();
  for (const auto& [counts, what] : {std::pair{&s.step_flops, "FLOP counts"}, std::pair{&s.step_bytes, "byte counts"}}) {
    if (counts->empty() || counts->size() == s.step_times_s.size()) continue;
    return Status::InvalidArgument(where + ": run summary has " + std::to_string(s.step_times_s.size()) +
                                   " step times but " + std::to_string(counts->size()) + " " + what +
                                   "; fix: record one per step, or none");
  }
  if (s.step_tokens.size() != s.step_times_s.size() || !losses_match) {
    return Status::InvalidArgument(where + ": run summary has " + std::to_string(s.step_times_s.size()) +
                                   " step times but " + std::to_string(s.step_tokens.size()) + " token counts and " +
                                   std::to_string(s.losses.size()) +
                                   " losses; fix: record one token count per step, and one loss per step or none");
  }
  return s;
}

Status WriteRunSummary(const std::string& dir, const RunSummary& summary) {
  TM_RETURN_IF_ERROR(MakeDirs(dir));
  return WriteFileAtomically(dir + "/summary.json", DumpJson(RunSummaryToJson(summary), 2) + "\n");
}

StatusOr<RunSummary> ReadRunSummary(const std::string& dir) {
  std::string path = dir + "/summary.json";
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<json> j = ParseJsonText(path, *text);
  if (!j.ok()) return j.status();
  return RunSummaryFromJson(*j, path);
}

}  // namespace tmx
