// One LoRA linear's forward and backward at a Llama 3.2 1B shape, two ways, in one run (issue 25 part 1: the
// adapter path as few, well-shaped products):
//
//   BM_LoraLinear/fused:0: the adapter as three passes, base + scale * B(A x): it writes and reads the
//                          [tokens, out] adapter output, its scaled copy and their sum (the layer's form before);
//   BM_LoraLinear/fused:1: the project's Linear (recipes/models/lora.h) as the recipes run it: the adapter's
//                          second product accumulated into the base's product in place,
//                          base.addmm_(A x, B^T, beta 1, alpha scale);
//   BM_LoraLinear/fused:2: the same sum out of place, addmm(base, A x, B^T, beta 1, alpha scale), which copies
//                          the base into a new result first (the layer's form from 2026-12-05 20:00 to 22:30).
//
// Args: out features (8192: w1/w3, 2048: q/o), in 2048, 1024 tokens as [4, 256] rows (as a layer sees them), rank 64, alpha 128, bf16, the
// base frozen and the adapters trained as in LoRA fine-tuning. Threads: $OMP_NUM_THREADS, else 1.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "benchmarks/torch_benchmark_main.h"
#include "recipes/models/lora.h"

namespace {

constexpr int64_t kTokens = 1024, kIn = 2048, kRank = 64;
constexpr double kAlpha = 128;

// Arg 0: 0 the three passes, 1 the project's layer, 2 the out-of-place sum; arg 1: out features.
void BM_LoraLinear(benchmark::State& state) {
  const int64_t form = state.range(0);
  const int64_t out = state.range(1);
  torch::manual_seed(0);
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16);
  tmx::models::Linear layer(kIn, out, options, tmx::models::LoraAdapterOptions{kRank, kAlpha, 0.0, false});
  layer->weight().set_requires_grad(false);
  {
    torch::NoGradGuard no_grad;
    layer->lora_b().normal_(0, 0.02);  // a trained adapter, not the zero start
  }
  const torch::Tensor x = torch::randn({4, kTokens / 4, kIn}, options).requires_grad_();
  const torch::Tensor grad = torch::randn({4, kTokens / 4, out}, options);
  const double scale = kAlpha / kRank;
  auto step = [&] {
    torch::Tensor y;
    if (form == 1) {
      y = layer->forward(x);
    } else if (form == 2) {
      y = at::addmm(at::linear(x, layer->weight()).reshape({kTokens, out}),
                    at::linear(x, layer->lora_a()).reshape({kTokens, kRank}), layer->lora_b().t(), 1, scale)
              .view({4, kTokens / 4, out});
    } else {
      y = at::linear(x, layer->weight()) + scale * at::linear(at::linear(x, layer->lora_a()), layer->lora_b());
    }
    y.backward(grad);
    layer->lora_a().mutable_grad().reset();
    layer->lora_b().mutable_grad().reset();
    x.mutable_grad().reset();
  };
  step();  // warm-up
  for (auto _ : state) step();
  const char* names[] = {"three passes", "in-place sum (the layer)", "out-of-place sum"};
  state.SetLabel(std::string(names[form]) + " [" + std::to_string(kTokens) + "," +
                 std::to_string(kIn) + "] -> " + std::to_string(out) + ", rank " + std::to_string(kRank) + ", " +
                 std::to_string(torch::get_num_threads()) + " thread(s)");
}

BENCHMARK(BM_LoraLinear)
    ->ArgNames({"fused", "out"})
    ->ArgsProduct({{0, 1, 2}, {2048, 8192}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) { return tmx::bench::RunTorchBenchmarks(argc, argv); }
