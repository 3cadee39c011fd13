// The machine's matrix-multiply rate: the ceiling a training step's achieved FLOP/s is compared with.
//
// BM_Gemm/<dtype>/<n>: C = A x B for square [n, n] matrices on the CPU (torch::mm, LibTorch's own BLAS path,
// the one nn::Linear uses), dtype bf16 or fp32. FLOPs per multiply: 2 x n^3 (a multiply and an add per term).
// The counter `flops` is that count over wall time, in FLOP/s; the peak of a dtype is its best size.
// BM_Linear/<dtype>/<tokens>x<in>x<out>: one nn::Linear-shaped product (activations [tokens, in] times a weight
// [out, in] transposed), the shapes of a Llama 3.2 1B layer at the benchmark batch [4, 256] (1024 tokens), so
// the rate a real step can reach is seen next to the square peak.
//
// Threads: $OMP_NUM_THREADS when set to a positive number, else 1 (torch::set_num_threads), shown in the
// context and in each label: the peak is per thread count, so compare a step with the peak at its own count.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "benchmarks/torch_benchmark_main.h"

namespace {

torch::Dtype DtypeOf(int64_t code) { return code == 0 ? torch::kBFloat16 : torch::kFloat32; }
const char* DtypeName(int64_t code) { return code == 0 ? "bf16" : "fp32"; }

void Report(benchmark::State& state, double flops_per_iteration, const std::string& what) {
  state.counters["flops"] =
      benchmark::Counter(flops_per_iteration, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["torch_threads"] = torch::get_num_threads();
  state.SetLabel(what + ", " + std::to_string(torch::get_num_threads()) + " thread(s)");
}

// Args: dtype code (0 bf16, 1 fp32), n.
void BM_Gemm(benchmark::State& state) {
  const int64_t n = state.range(1);
  const auto options = torch::TensorOptions().dtype(DtypeOf(state.range(0)));
  torch::manual_seed(0);
  torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
  torch::Tensor c = torch::empty({n, n}, options);
  torch::mm_out(c, a, b);  // warm-up: first-call allocations and kernel selection
  for (auto _ : state) {
    torch::mm_out(c, a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  Report(state, 2.0 * static_cast<double>(n) * n * n,
         std::string(DtypeName(state.range(0))) + " " + std::to_string(n) + "^3");
}

// Args: dtype code, tokens, in features, out features.
void BM_Linear(benchmark::State& state) {
  const int64_t tokens = state.range(1), in = state.range(2), out = state.range(3);
  const auto options = torch::TensorOptions().dtype(DtypeOf(state.range(0)));
  torch::manual_seed(0);
  torch::Tensor x = torch::randn({tokens, in}, options), w = torch::randn({out, in}, options);
  benchmark::DoNotOptimize(torch::linear(x, w));
  for (auto _ : state) benchmark::DoNotOptimize(torch::linear(x, w));
  Report(state, 2.0 * static_cast<double>(tokens) * in * out,
         std::string(DtypeName(state.range(0))) + " [" + std::to_string(tokens) + "," + std::to_string(in) + "] x [" +
             std::to_string(in) + "," + std::to_string(out) + "]");
}

BENCHMARK(BM_Gemm)
    ->ArgNames({"dtype", "n"})
    ->ArgsProduct({{0, 1}, {1024, 2048, 4096}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);
// Llama 3.2 1B at 1024 tokens: q/o (2048 -> 2048), k/v (2048 -> 512), MLP (2048 -> 8192, 8192 -> 2048).
BENCHMARK(BM_Linear)
    ->ArgNames({"dtype", "tokens", "in", "out"})
    ->Args({0, 1024, 2048, 2048})
    ->Args({0, 1024, 2048, 512})
    ->Args({0, 1024, 2048, 8192})
    ->Args({0, 1024, 8192, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) { return tmx::bench::RunTorchBenchmarks(argc, argv); }
