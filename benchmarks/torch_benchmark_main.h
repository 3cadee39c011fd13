// What every LibTorch benchmark's main() does: ATen's intra-op threads from $OMP_NUM_THREADS when set to a
// positive number, else 1, shown in the context header ("torch_threads") with the torch version, then Google
// Benchmark's usual run. The peak of a product is per thread count: compare a step with the peak at its own.
// The allocator is a training process's (tm_training_allocator in cmake/TuneMatrixTargets.cmake: jemalloc with
// `tune`'s settings, else glibc's malloc tuned as `tune` tunes it), shown as "allocator".
#pragma once

#include <cstdlib>
#include <functional>
#include <string>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "harness/allocator.h"
#include "harness/device_hooks.h"

namespace tmx::bench {

inline int TorchThreads() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  const int n = env != nullptr ? std::atoi(env) : 0;
  return n > 0 ? n : 1;
}

// `register_benchmarks` (when set) runs after the threads are set and before the flags are read.
inline int RunTorchBenchmarks(int argc, char** argv, const std::function<void()>& register_benchmarks = {}) {
  benchmark::AddCustomContext("allocator", PrepareTrainingAllocator());  // as `tune` allocates
  torch::set_num_threads(TorchThreads());
  benchmark::AddCustomContext("torch_threads", std::to_string(torch::get_num_threads()));
  benchmark::AddCustomContext("torch_version", TorchVersion());
  if (register_benchmarks) register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace tmx::bench
