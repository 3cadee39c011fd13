// RMSNorm's forward and backward at a Llama 3.2 1B layer's shape, two ways, in one run (issue 25 part 1: fewer
// elementwise passes):
//
//   BM_RmsNorm/fused:0: RmsNormUnfused, torchtune's float32 formula as ATen operations, differentiated by
//                       autograd (the form before);
//   BM_RmsNorm/fused:1: RmsNorm, one autograd node with one pass over each row each way on the CPU.
//
// [4, 256, 2048] bf16, the scale frozen (LoRA) or trained (arg train_scale: full fine-tuning).
//
// And a decoder layer's residual add with the norm after it (h = x + attention, mlp_norm(h)), gradients reaching
// both h and the norm's output, as in the layer (arg backward 0: forward only, without autograd's graph):
//
//   BM_AddRmsNorm/one_node:0: x + a, then RmsNorm (one node); autograd sums h's two gradients;
//   BM_AddRmsNorm/one_node:1: AddRmsNorm, both in one node, one pass each way.
// Threads: $OMP_NUM_THREADS, else 1.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "benchmarks/torch_benchmark_main.h"
#include "recipes/models/rms_norm.h"

namespace {

void BM_RmsNorm(benchmark::State& state) {
  const bool fused = state.range(0) == 1;
  const bool train_scale = state.range(1) == 1;
  torch::manual_seed(0);
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16);
  const torch::Tensor scale = (torch::randn({2048}) * 0.1 + 1).to(torch::kBFloat16).requires_grad_(train_scale);
  const torch::Tensor x = torch::randn({4, 256, 2048}, options).requires_grad_();
  const torch::Tensor grad = torch::randn({4, 256, 2048}, options);
  auto step = [&] {
    torch::Tensor y =
        fused ? tmx::models::RmsNorm(x, scale, 1e-5, false) : tmx::models::RmsNormUnfused(x, scale, 1e-5, false);
    y.backward(grad);
    x.mutable_grad().reset();
    if (train_scale) scale.mutable_grad().reset();
  };
  step();  // warm-up
  for (auto _ : state) step();
  state.SetLabel(std::string(fused ? "one node" : "ATen operations") +
                 (train_scale ? ", scale trained" : ", scale frozen") + " [4,256,2048] bf16, " +
                 std::to_string(torch::get_num_threads()) + " thread(s)");
}

BENCHMARK(BM_RmsNorm)
    ->ArgNames({"fused", "train_scale"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

void BM_AddRmsNorm(benchmark::State& state) {
  const bool one_node = state.range(0) == 1;
  const bool backward = state.range(1) == 1;
  torch::manual_seed(0);
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16);
  const torch::Tensor scale = (torch::randn({2048}) * 0.1 + 1).to(torch::kBFloat16);
  const torch::Tensor x = torch::randn({4, 256, 2048}, options).requires_grad_();
  const torch::Tensor a = torch::randn({4, 256, 2048}, options).requires_grad_();
  const torch::Tensor grad_h = torch::randn({4, 256, 2048}, options);
  const torch::Tensor grad_y = torch::randn({4, 256, 2048}, options);
  auto step = [&] {
    std::optional<torch::NoGradGuard> no_grad;
    if (!backward) no_grad.emplace();
    torch::Tensor h, y;
    if (one_node) {
      std::tie(h, y) = tmx::models::AddRmsNorm(x, a, scale, 1e-5, false);
    } else {
      h = x + a;
      y = tmx::models::RmsNorm(h, scale, 1e-5, false);
    }
    if (!backward) return;
    torch::autograd::backward({h, y}, {grad_h, grad_y});
    x.mutable_grad().reset();
    a.mutable_grad().reset();
  };
  step();  // warm-up
  for (auto _ : state) step();
  state.SetLabel(std::string(one_node ? "one node" : "add, then the norm") +
                 (backward ? ", forward and backward" : ", forward") + " [4,256,2048] bf16, " +
                 std::to_string(torch::get_num_threads()) + " thread(s)");
}

BENCHMARK(BM_AddRmsNorm)
    ->ArgNames({"one_node", "backward"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) { return tmx::bench::RunTorchBenchmarks(argc, argv); }
