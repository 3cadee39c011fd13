// Quantisation-aware training's fake quantisation (recipes/models/fake_quant.h) at a Llama 3.2 1B MLP's shapes,
// two ways in one run:
//
//   BM_FakeQuantInt4Weight/one_pass:{0,1}: a [8192, 2048] bf16 weight in int4 groups of 256 (torchtune's QAT
//     configs' groupsize), by ATen's operations (0) or the one-pass cpu loop (1);
//   BM_FakeQuantInt8Activation/one_pass:{0,1}: a [4, 256, 8192] bf16 activation, int8 per token, likewise.
//
// Counter `values_per_s`. Threads: $OMP_NUM_THREADS, else 1.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <string>

#include "benchmarks/torch_benchmark_main.h"
#include "recipes/models/fake_quant.h"

namespace {

using tmx::models::FakeQuantizeInt4PerGroup;
using tmx::models::FakeQuantizeInt4PerGroupByOperations;
using tmx::models::FakeQuantizeInt8PerToken;
using tmx::models::FakeQuantizeInt8PerTokenByOperations;

void Label(benchmark::State& state, bool one_pass, const torch::Tensor& t) {
  state.counters["values_per_s"] =
      benchmark::Counter(static_cast<double>(t.numel()), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(one_pass ? "one pass" : "ATen operations") + ", " + std::to_string(t.numel()) +
                 " bf16 values, " + std::to_string(torch::get_num_threads()) + " thread(s)");
}

void BM_FakeQuantInt4Weight(benchmark::State& state) {
  const bool one_pass = state.range(0) == 1;
  torch::manual_seed(0);
  const torch::Tensor w = (torch::randn({8192, 2048}) * 0.02).to(torch::kBFloat16);
  for (auto _ : state) {
    benchmark::DoNotOptimize(one_pass ? FakeQuantizeInt4PerGroup(w, 256) : FakeQuantizeInt4PerGroupByOperations(w, 256));
  }
  Label(state, one_pass, w);
}

void BM_FakeQuantInt8Activation(benchmark::State& state) {
  const bool one_pass = state.range(0) == 1;
  torch::manual_seed(0);
  const torch::Tensor x = torch::randn({4, 256, 8192}).to(torch::kBFloat16);
  for (auto _ : state) {
    benchmark::DoNotOptimize(one_pass ? FakeQuantizeInt8PerToken(x) : FakeQuantizeInt8PerTokenByOperations(x));
  }
  Label(state, one_pass, x);
}

BENCHMARK(BM_FakeQuantInt4Weight)->ArgNames({"one_pass"})->DenseRange(0, 1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_FakeQuantInt8Activation)->ArgNames({"one_pass"})->DenseRange(0, 1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) { return tmx::bench::RunTorchBenchmarks(argc, argv); }
