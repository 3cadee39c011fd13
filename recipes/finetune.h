// The single-device fine-tuning recipes: full_finetune_single_device and lora_finetune_single_device.
//
// One training loop serves both; LoRA differs only in the model built, which parameters train and what is
// saved. Every logged step goes to stdout and to <log_dir>/metrics.jsonl; at the end (or on failure) the run
// writes <output_dir>/summary.json, which tune-matrix reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/config.h"
#include "harness/registry.h"
#include "harness/status.h"

namespace tmx::recipes {

Status RunFullFinetune(const Config& config, const RunContext& context);
Status RunLoraFinetune(const Config& config, const RunContext& context);

// What a finished (or failed) run measured; written as summary.json.
struct RunSummary {
  std::string recipe;
  std::string config;
  std::string device;
  std::string device_name;
  std::string torch_version;
  bool ok = false;
  std::string error;            // why the run failed, when !ok
  std::string error_kind;       // "non_finite_loss", "out_of_memory", "error"
  uint64_t seed = 0;
  double init_time_s = 0;       // from start to the first step: model, data, optimizer, checkpoint load
  std::vector<double> step_times_s;  // per optimizer step, device synchronised
  std::vector<double> losses;        // per optimizer step
  std::vector<int64_t> step_tokens;  // non-padding tokens processed per optimizer step
  int warmup_steps = 1;              // excluded from the medians
  std::optional<double> tokens_per_second;  // median over steps after warm-up
  std::optional<int64_t> peak_memory_bytes;
  std::string peak_memory_source;    // "cuda_allocator", "process_rss"
  int64_t trainable_parameters = 0;
  int64_t total_parameters = 0;
};

// Peak memory so far: the CUDA caching allocator's peak allocated bytes on cuda, the process's peak
// resident set size elsewhere. Sets `source`.
int64_t PeakMemoryBytes(const DeviceInfo& device, std::string* source);

}  // namespace tmx::recipes
