// AdamW8bit's step (bitsandbytes' blockwise 8-bit AdamW, recipes/adamw8bit.h) on one bf16 tensor of a Llama 3.2
// 1B MLP weight's size, two ways, in one run:
//
//   BM_AdamW8bitStep/fused:0: the ATen operations' path (other devices' step): some twenty passes a run of blocks;
//   BM_AdamW8bitStep/fused:1: the one-pass cpu step (BnbAdamWOptions::fused_cpu).
//
// [8192, 2048] bf16 weights and gradients, weight decay on. Counter `params_per_s`. Threads: $OMP_NUM_THREADS,
// else 1.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "benchmarks/torch_benchmark_main.h"
#include "recipes/adamw8bit.h"

namespace {

void BM_AdamW8bitStep(benchmark::State& state) {
  const bool fused = state.range(0) == 1;
  torch::manual_seed(0);
  std::vector<at::Tensor> params = {torch::randn({8192, 2048}).to(torch::kBFloat16).requires_grad_()};
  params[0].mutable_grad() = (torch::randn({8192, 2048}) * 1e-3).to(torch::kBFloat16);
  tmx::recipes::BnbAdamW optimizer(params, tmx::recipes::BnbAdamWOptions(2e-5).weight_decay(0.01).fused_cpu(fused));
  optimizer.step();  // the state's first step allocates it
  for (auto _ : state) optimizer.step();
  state.counters["params_per_s"] =
      benchmark::Counter(static_cast<double>(params[0].numel()), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(fused ? "one pass" : "ATen operations") + ", [8192,2048] bf16, " +
                 std::to_string(torch::get_num_threads()) + " thread(s)");
}

BENCHMARK(BM_AdamW8bitStep)->ArgNames({"fused"})->DenseRange(0, 1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) { return tmx::bench::RunTorchBenchmarks(argc, argv); }
