// SwiGLU's elementwise half, silu(gate) * up, forward and backward at a Llama 3.2 1B MLP's shape, two ways, in
// one run (issue 25 part 1: fewer elementwise passes):
//
//   BM_SiluMul/fused:0: SiluMulUnfused, at::silu(gate) * up differentiated by autograd (the form before);
//   BM_SiluMul/fused:1: SiluMul, one autograd node with one pass each way on the CPU.
//
// backward:0 times the forward alone (no gradient recorded), backward:1 forward and backward.
//
// [4, 256, 8192] bf16, both inputs needing gradients (they are w1's and w3's outputs).
// Threads: $OMP_NUM_THREADS, else 1.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "benchmarks/torch_benchmark_main.h"
#include "recipes/models/swiglu.h"

namespace {

void BM_SiluMul(benchmark::State& state) {
  const bool fused = state.range(0) == 1;
  const bool backward = state.range(1) == 1;
  torch::manual_seed(0);
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16);
  const torch::Tensor gate = torch::randn({4, 256, 8192}, options).requires_grad_();
  const torch::Tensor up = torch::randn({4, 256, 8192}, options).requires_grad_();
  const torch::Tensor grad = torch::randn({4, 256, 8192}, options);
  auto step = [&] {
    if (!backward) {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(fused ? tmx::models::SiluMul(gate, up) : tmx::models::SiluMulUnfused(gate, up));
      return;
    }
    torch::Tensor y = fused ? tmx::models::SiluMul(gate, up) : tmx::models::SiluMulUnfused(gate, up);
    y.backward(grad);
    gate.mutable_grad().reset();
    up.mutable_grad().reset();
  };
  step();  // warm-up
  for (auto _ : state) step();
  state.SetLabel(std::string(fused ? "one node" : "ATen operations") + (backward ? ", forward and backward" : ", forward") +
                 " [4,256,8192] bf16, " +
                 std::to_string(torch::get_num_threads()) + " thread(s)");
}

BENCHMARK(BM_SiluMul)->ArgNames({"fused", "backward"})->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) { return tmx::bench::RunTorchBenchmarks(argc, argv); }
