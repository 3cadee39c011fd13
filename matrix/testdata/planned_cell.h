// A runnable cpu cell for scheduler tests (proxies, repairs, numeric checks build theirs from it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/run_summary.h"
#include "matrix/plan.h"

namespace tmx::matrix {

// `config` of `recipe` on cpu, runnable, 3 steps, its output folder `<dir>/cell`, its preset naming the cell.
inline PlannedCell RunnableCpuCell(const std::string& config, const std::string& recipe, const std::string& dir) {
  PlannedCell c;
  c.key = {config, "cpu"};
  c.recipe = recipe;
  c.device.id = "cpu";
  c.device.type = "cpu";
  c.device_type = "cpu";
  c.runnable = true;
  c.steps = 3;
  c.output_dir = dir + "/cell";
  c.preset.key = c.key;
  c.preset.recipe = c.recipe;
  c.preset.device_type = "cpu";
  return c;
}

// What a child that trained writes into its output folder: `step_times_s`, 1000 tokens a step, the loss falling
// from 2 by 0.1 a step (10 steps at most), `peak_memory_bytes`, torch 2.11.0.
inline RunSummary TrainedSummary(const std::vector<double>& step_times_s, int64_t peak_memory_bytes) {
  RunSummary s;
  s.ok = true;
  s.step_times_s = step_times_s;
  s.step_tokens.assign(step_times_s.size(), 1000);
  static const double kLosses[] = {2, 1.9, 1.8, 1.7, 1.6, 1.5, 1.4, 1.3, 1.2, 1.1};
  for (size_t i = 0; i < step_times_s.size() && i < 10; ++i) s.losses.push_back(kLosses[i]);
  s.peak_memory_bytes = peak_memory_bytes;
  s.torch_version = "2.11.0";
  s.Finish();
  return s;
}

}  // namespace tmx::matrix
