// The run summary: the one contract between a recipe (training or generation) and whoever reads its result
// (tune-matrix's scheduler). The recipe writes <output_dir>/summary.json at the end of a run, failed or not;
// the reader takes it as written. Statistics (median step time, its spread, tokens/s) are computed once, by
// Finish(), on the recipe's side, so the two sides cannot disagree on them.
//
// The file is versioned like leveldb's tagged records: a reader refuses a newer version, and a field changes
// meaning only with a version bump.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tmx {

inline constexpr int kRunSummaryVersion = 1;

// A quantisation's error on one kind of tensor (every "q_proj" of the model, every "w1"...): its dequantised
// weights against the originals, as the quantize recipe measured them (recipes/quantize.h), and the scheme's
// bounds for them.
struct QuantizedKind {
  std::string kind;     // the linears' last name: "q_proj", "w2", "output"
  std::string scheme;   // "int4 per group of 256"
  int64_t tensors = 0;
  // The largest |original - dequantised| in steps of its group's scale, and its bound: half a step, plus the
  // rounding of the dequantised value into the model's dtype.
  double max_error = 0;
  double max_bound = 0;
  // ||original - dequantised|| / ||original|| over the kind's tensors, and what rounding to the nearest step
  // gives (each element off by a uniform fraction of its step: sqrt(sum of scale^2 / 12) / ||original||),
  // times 1.5.
  double relative_rms = 0;
  double relative_rms_bound = 0;
  bool Exceeds() const { return !(max_error <= max_bound) || !(relative_rms <= relative_rms_bound); }
};

struct RunSummary {
  std::string recipe;
  std::string config;
  std::string device;       // device id the run used: "cpu", "cuda:0"
  std::string device_name;  // e.g. "NVIDIA H200"
  std::string torch_version;
  bool ok = false;
  std::string error;        // why the run failed, when !ok
  std::string error_kind;   // "non_finite_loss", "out_of_memory", "error"; "" when ok
  uint64_t seed = 0;
  double init_time_s = 0;   // from the start to the first step: model, data, optimizer, checkpoint load
  // A step is an optimizer step of training, or a decode step of generation (one new token for each sequence
  // of the batch; the prompt's forward is the prefill below, not a step).
  std::vector<double> step_times_s;   // per step, device synchronised
  std::vector<double> losses;         // per optimizer step; empty for a run without a loss (generation)
  std::vector<int64_t> step_tokens;   // non-padding tokens processed per step (generation: new tokens)
  int warmup_steps = 1;               // leading steps left out of the statistics below
  std::optional<int64_t> peak_memory_bytes;
  std::string peak_memory_source;     // "cuda_allocator", "process_rss", ...; "" when not measured
  int64_t trainable_parameters = 0;
  int64_t total_parameters = 0;
  // Processes (ranks) that trained together: 1 for single-device recipes. With several, step_tokens count every
  // rank's tokens, and peak_memory_bytes is the largest rank's on an accelerator and the sum of the ranks'
  // on the host (cpu), whose memory they share. Optional in the file (absent: 1).
  int world_size = 1;
  // ATen's CPU threads in each process while it trained (recipes/finetune.cc chooses them); 0: not recorded.
  // Optional in the file.
  int threads = 0;
  // What stood in for an input this machine lacks, one line each ("tokenizer llama3_tokenizer ran on the
  // shipped sample tiktoken_small.model (path /tmp/x is absent)"); empty when the run used the real inputs.
  std::vector<std::string> stand_ins;
  // A generation run's prefill (nullopt for training; optional in the file): the time from the start of the
  // prompt's forward to the first new token, device synchronised, and the prompt tokens of every sequence over
  // the prefill's time.
  std::optional<double> time_to_first_token_s;
  std::optional<double> prefill_tokens_per_second;
  // The norm of the whole trained gradient at the first optimizer step (before clipping; over every rank), for
  // the numeric check, which compares the first step's loss and this norm with a float32 reference run's (the
  // first step is the one whose weights both runs share). nullopt where none is taken (generation, a step inside
  // backward). Optional in the file.
  std::optional<double> first_grad_norm;
  // Model FLOPs of each optimizer step over every rank (recipes/flops.h: the architecture and the batches'
  // padded shapes), beside step_times_s; empty for a run that counts none (generation). Optional in the file.
  std::vector<double> step_flops;
  // Bytes each decode step reads (recipes/flops.h DecodeStepBytes: the weights as stored and the KV cache),
  // beside step_times_s, for its share of the device's memory bandwidth; empty for a run that counts none
  // (training). Optional in the file.
  std::vector<double> step_bytes;
  // A generation's prefill FLOPs (recipes/flops.h PrefillFlops), over time_to_first_token_s its FLOP rate.
  // Optional in the file.
  std::optional<double> prefill_flops;
  // The dtype the model computed in ("bf16", "fp32", as configs spell it), which says which matmul peak the
  // FLOP rate compares with; "" when not recorded. Optional in the file.
  std::string dtype;
  // An evaluation run's scores by "<task>/<metric>" ("truthfulqa_mc2/acc", "truthfulqa_mc2/acc_stderr"), as the
  // harness names them; empty for a run that scores nothing. Optional in the file.
  std::map<std::string, double> scores;
  // A quantize run's error per kind of quantised tensor; empty for any other run. Optional in the file.
  std::vector<QuantizedKind> quantization;

  // Set by Finish() from the steps after warm-up (all steps when there are no more than warmup_steps).
  std::optional<double> step_time_median_s;
  std::optional<double> step_time_spread_s;  // median absolute deviation of those step times
  std::optional<double> tokens_per_second;   // median of per-step tokens / step time (generation: decode tok/s)
  std::optional<double> flops_per_second;    // median of per-step FLOPs / step time; unknown without step_flops
  // Median of per-step bytes / step time; without step_bytes left as the run set it (quantize: the weights it
  // read over the time it took).
  std::optional<double> bytes_per_second;

  // Computes the statistics above. Call once the steps are recorded.
  void Finish();
};

// An evaluation's scores as one line for a cell's record and the reports: each "<task>/<metric>" with its
// "<task>/<metric>_stderr" beside it, 4 decimals, joined by ", " ("truthfulqa_mc2 acc 0.2321 ± 0.1526"); "" for none.
std::string ScoresText(const std::map<std::string, double>& scores);

nlohmann::json RunSummaryToJson(const RunSummary& summary);
// InvalidArgument, prefixed by `where`, for a summary of another version, with missing or ill-typed fields, or
// with step times, token counts and losses that disagree (losses are one per step, or none).
StatusOr<RunSummary> RunSummaryFromJson(const nlohmann::json& j, const std::string& where);

// Writes <dir>/summary.json atomically. Bytes that are not UTF-8 (an error message quoting a file name, a config
// path) are written as U+FFFD, so a failed run's real error still reaches the scheduler.
Status WriteRunSummary(const std::string& dir, const RunSummary& summary);
// Reads <dir>/summary.json; NotFound when the run wrote none (it was killed before the end).
StatusOr<RunSummary> ReadRunSummary(const std::string& dir);

}  // namespace tmx
