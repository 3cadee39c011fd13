// RoPE's forward and backward at a Llama 3.2 1B attention's shapes, two ways, in one run (issue 25 part 1: fewer
// elementwise passes):
//
//   BM_Rope/fused:0: ApplyRotaryEmbeddingUnfused, torchtune's formula as ATen operations on a float32 copy,
//                    differentiated by autograd (the form before);
//   BM_Rope/fused:1: ApplyRotaryEmbedding, one autograd node with one pass each way on the CPU (the same bits).
//
// Args: heads (32: q, 8: k), [4, 256] tokens, head_dim 64, bf16, Llama 3's rope base 500000; the input a view
// of a projection's output and the gradient a transposed [B, heads, T, D] one, as attention hands them.
// Threads: $OMP_NUM_THREADS, else 1.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "benchmarks/torch_benchmark_main.h"
#include "recipes/models/rope.h"

namespace {

constexpr int64_t kBatch = 4, kSeq = 256, kHeadDim = 64;

void BM_Rope(benchmark::State& state) {
  const bool fused = state.range(0) == 1;
  const int64_t heads = state.range(1);
  torch::manual_seed(0);
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16);
  const torch::Tensor angles =
      torch::outer(torch::arange(kSeq, torch::kFloat), tmx::models::RopeInverseFrequencies(kHeadDim, 500000, {}));
  const torch::Tensor cos = angles.cos(), sin = angles.sin();
  const torch::Tensor x = torch::randn({kBatch, kSeq, heads * kHeadDim}, options).requires_grad_();
  const torch::Tensor grad = torch::randn({kBatch, heads, kSeq, kHeadDim}, options).transpose(1, 2);
  auto step = [&] {
    const torch::Tensor q = x.view({kBatch, kSeq, heads, kHeadDim});
    torch::Tensor y =
        fused ? tmx::models::ApplyRotaryEmbedding(q, cos, sin) : tmx::models::ApplyRotaryEmbeddingUnfused(q, cos, sin);
    y.backward(grad);
    x.mutable_grad().reset();
  };
  step();  // warm-up
  for (auto _ : state) step();
  state.SetLabel(std::string(fused ? "one node" : "ATen operations") + " [" + std::to_string(kBatch) + "," +
                 std::to_string(kSeq) + "," + std::to_string(heads) + "," + std::to_string(kHeadDim) + "] bf16, " +
                 std::to_string(torch::get_num_threads()) + " thread(s)");
}

BENCHMARK(BM_Rope)
    ->ArgNames({"fused", "heads"})
    ->ArgsProduct({{0, 1}, {32, 8}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) { return tmx::bench::RunTorchBenchmarks(argc, argv); }
