// Where a training step's time goes, by ATen operation: the recipes' `profiler` section (torchtune's
// setup_torch_profiler keys and schedule), measured with ATen's RecordFunction callbacks (LibTorch's C++
// profiler gave no events in these builds). Each operation's self time is its wall time minus that of the
// operations it called (aten::linear -> aten::addmm), so self times add up to the time spent in operations;
// what is left of the step is outside any operation (the recipe's own code, data). Operations fall into three
// categories: matrix products, attention kernels and everything else (elementwise work, copies, reductions,
// autograd's nodes, the optimizer), which is the overhead a step pays beyond its kernels.
//
// Times are the host's wall clock. On the CPU that is where the work runs; on an accelerator an operation
// returns once its kernel is queued, so its time is the launch unless it waits (the text says so).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "harness/config.h"

namespace tmx::recipes {

enum class OpCategory { kMatmul, kAttention, kOther };
const char* OpCategoryName(OpCategory category);  // "matmul", "attention", "other"
// Matrix products (aten::mm, addmm, bmm, baddbmm, addbmm, their in-place forms, _addmm_activation and the int8/int4 packed
// products) and attention kernels (ATen's fused scaled-dot-product kernels and their backwards); the rest other.
OpCategory CategoryOf(std::string_view op_name);

// One operation (with record_shapes, one operation at one set of input shapes) over the profiled steps.
struct OpStats {
  std::string name;    // "aten::mm", or an autograd node ("MmBackward0")
  std::string shapes;  // with record_shapes: the tensor inputs, "bf16[1024, 2048], bf16[2048, 8192]"; else ""
  int64_t calls = 0;
  double self_s = 0;   // inside the operation, not in the operations it called
  double total_s = 0;  // inside it, with what it called
};

// Records every ATen operation's calls and times while started, through a global RecordFunction callback.
// One may record at a time in a process. Thread-safe; operations started before Start() are not seen.
class OpProfiler {
 public:
  explicit OpProfiler(bool record_shapes);
  ~OpProfiler();  // stops
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // FailedPrecondition when another OpProfiler of this process is recording.
  Status Start();
  void Stop();
  // What was recorded over every Start/Stop so far, the largest self time first.
  std::vector<OpStats> Ops() const;

  struct State;  // shared with the callbacks

 private:
  bool recording_ = false;
  uint64_t handle_ = 0;
  std::shared_ptr<State> state_;
};

// The `profiler` section of a recipe config (torchtune's setup_torch_profiler), with torchtune's defaults for
// absent keys: wait 5 steps, warm up 5, record 2, once; record_shapes on; the files under
// <output_dir>/profiler_output.
struct ProfilerSettings {
  bool enabled = false;
  std::string output_dir;
  int64_t wait_steps = 5, warmup_steps = 5, active_steps = 2;
  int64_t num_cycles = 1;  // 0: the cycle repeats until the run ends
  bool record_shapes = true;

  // Steps in one cycle: wait, warm-up and recorded ones.
  int64_t CycleSteps() const { return wait_steps + warmup_steps + active_steps; }
  // Whether this run's step `step` (0-based, counted from the run's first step) is recorded. Warm-up steps
  // are not: they are there so that what is recorded runs warm, as torch.profiler's schedule has them.
  bool Active(int64_t step) const;
  // Whether `step` is the last recorded step of a cycle (the profile is written then).
  bool EndsCycle(int64_t step) const;
  // "steps 11-12" (one cycle), "steps 11-12, 23-24, ..." (repeating), "steps 11-12 and 23-24".
  std::string DescribeSteps() const;
};

// The config's `profiler` section; a missing section is a disabled profiler.
StatusOr<ProfilerSettings> ReadProfilerSettings(const Config& config);

// A profile: what the operations took over `steps` recorded steps of `step_time_s` in all.
struct OpProfile {
  int64_t steps = 0;
  double step_time_s = 0;
  std::string device_type;  // "cpu", "cuda", ...: the text says when host times are launch times
  std::vector<OpStats> ops;

  double CategorySeconds(OpCategory category) const;
  // Step time in no operation: the recipe's own code between them (never below 0).
  double OutsideOpsSeconds() const;
  // The share of the step time outside matmul and attention kernels: 1 - (matmul + attention) / step time.
  double OverheadShare() const;
};

// A table for people: the categories' seconds and shares, then every operation by self time.
std::string FormatOpProfile(const OpProfile& profile);
nlohmann::json OpProfileJson(const OpProfile& profile);
// One line: "matmul 66.1%, attention 5.4%, other 25.0%, outside operations 3.5% of 2 steps (36.20 s)".
std::string SummarizeOpProfile(const OpProfile& profile);

// The recipe's side: records the steps the schedule names and writes <output_dir>/op_profile.txt and .json
// (op_profile_rank<r>.* on ranks other than 0) at the end of each cycle, over every recorded step so far.
class StepProfiler {
 public:
  StepProfiler(ProfilerSettings settings, std::string device_type, int64_t rank);

  const ProfilerSettings& settings() const { return settings_; }
  std::string TextPath() const;
  std::string JsonPath() const;
  // Call before step `step` (0-based from the run's first step) starts, and after it ends with its wall time.
  Status BeforeStep(int64_t step);
  // Returns whether it wrote the files (the end of a cycle).
  StatusOr<bool> AfterStep(int64_t step, double step_time_s);
  OpProfile Profile() const;

 private:
  ProfilerSettings settings_;
  std::string device_type_;
  int64_t rank_;
  OpProfiler profiler_;
  int64_t steps_ = 0;
  double step_time_s_ = 0;
};

}  // namespace tmx::recipes
