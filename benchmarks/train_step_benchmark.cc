// One optimizer step (forward, loss, backward, gradient clipping, optimizer step) of the tiny Llama-shaped
// model as the built-in tiny/lora_single_device and tiny/full_single_device configs build it, on the CPU in
// fp32, and as the tiny QAT configs build it (bf16) with fake quantisation on and off.
//
// The model and optimizer come from the project's own code: LocateConfig + LoadResolvedConfig read the
// built-in config, the recipes' own setup steps (recipes/train_setup.h) build the model and the optimizer.
// Step() is the recipes' step (Trainer::Train in recipes/finetune.cc) without data loading and logging:
// zero_grad, forward and ModelNextTokenLoss (the recipes' loss, recipes/loss.h), backward, loss.item(), clip_grad_norm_ when the
// config sets clip_grad_norm, optimizer step.
//
// Instead of the Alpaca data the batch is fixed random tokens, [batch_size from the config, kSeqLen], every
// position labelled, so every variant processes the same number of tokens per step.
//
// Intra-op threads: $OMP_NUM_THREADS when set to a positive number, else 1; set once in main() with
// torch::set_num_threads and shown in the context header ("torch_threads") and in each benchmark's label.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "base/status.h"
#include "harness/config.h"
#include "harness/config_store.h"
#include "benchmarks/torch_benchmark_main.h"
#include "recipes/builtin.h"
#include "recipes/loss.h"
#include "recipes/models/lora.h"
#include "recipes/train_setup.h"

namespace tmx::bench {
namespace {

// Sequence length of the random batch; the tiny model accepts up to 512.
constexpr int64_t kSeqLen = 256;

// The benchmarked configurations; each indexes SpecOf and the TrainStep cache.
enum Variant : int64_t {
  kLora = 0,               // tiny/lora_single_device
  kFull = 1,               // tiny/full_single_device
  kLoraCheckpointing = 2,  // tiny/lora_single_device enable_activation_checkpointing=True
  kQatFull = 3,            // tiny/qat_distributed as one process: fake quantisation on every linear
  kQatFullOff = 4,         // the same model with fake quantisation off (fake_quant_after_n_steps not reached)
  kQatLora = 5,            // tiny/qat_lora_distributed: fake quantisation on the adapted linears
  kQatLoraOff = 6,         // the same with it off
  kVariants = 7,
};

struct VariantSpec {
  const char* name;    // benchmark argument name
  const char* config;  // built-in config
  recipes::TrainKind kind;
  std::vector<std::string> overrides;
};

const VariantSpec& SpecOf(Variant v) {
  // dtype=fp32 is what the tiny configs already say; the override makes the benchmark's precision explicit.
  static const VariantSpec kSpecs[] = {
      {"lora", "tiny/lora_single_device", recipes::TrainKind::kLora,
       {"dtype=fp32", "enable_activation_checkpointing=False"}},
      {"full", "tiny/full_single_device", recipes::TrainKind::kFull,
       {"dtype=fp32", "enable_activation_checkpointing=False"}},
      {"lora_checkpointing", "tiny/lora_single_device", recipes::TrainKind::kLora,
       {"dtype=fp32", "enable_activation_checkpointing=True"}},
      // QAT trains in the configs' bf16, where its extra passes matter; off: the same model, fake quantisation
      // switched off as the recipe does before fake_quant_after_n_steps.
      {"qat_full", "tiny/qat_distributed", recipes::TrainKind::kFull, {}},
      {"qat_full_off", "tiny/qat_distributed", recipes::TrainKind::kFull, {"fake_quant_after_n_steps=1000000"}},
      {"qat_lora", "tiny/qat_lora_distributed", recipes::TrainKind::kLora, {}},
      {"qat_lora_off", "tiny/qat_lora_distributed", recipes::TrainKind::kLora, {"fake_quant_after_n_steps=1000000"}},
  };
  return kSpecs[v];
}

// A model, its optimizer and a fixed batch, built from a config as the recipes build them. Not copyable: it
// owns the model's and optimizer's tensors.
class TrainStep {
 public:
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  static StatusOr<std::unique_ptr<TrainStep>> Create(const VariantSpec& spec) {
    const Registry& registry = recipes::BuiltinRegistry();
    StatusOr<LocatedConfig> located = LocateConfig(spec.config, registry);
    if (!located.ok()) return located.status();
    StatusOr<Config> config = LoadResolvedConfig(*located, spec.overrides, located->recipe, &registry);
    if (!config.ok()) return config.status();
    recipes::TrainKind kind = spec.kind;
    StatusOr<recipes::TrainingSettings> settings = recipes::ReadTrainingSettings(*config, kind);
    if (!settings.ok()) return settings.status().WithContext(spec.config);

    std::unique_ptr<TrainStep> step(new TrainStep());
    step->clip_ = settings->clip_grad_norm;
    torch::manual_seed(settings->seed);
    StatusOr<recipes::TrainableModel> model = recipes::SetupModel(*config, registry, kind, *settings, torch::kCPU, /*allow_stand_ins=*/false, nullptr);
    if (!model.ok()) return model.status();
    step->model_ = std::move(*model);
    step->dtype_ = settings->dtype;
    if (settings->fake_quant_after_n_steps) {  // as the recipe's first step: off until that many steps are done
      models::EnableFakeQuantization(*step->model_.model, *settings->fake_quant_after_n_steps <= 0);
    }
    StatusOr<recipes::OptimizerPtr> optimizer = recipes::SetupOptimizer(*config, registry, step->model_.trained_tensors);
    if (!optimizer.ok()) return optimizer.status();
    step->optimizer_ = std::move(*optimizer);

    // Drawn after the model, from the same seeded generator: the same batch in every run.
    step->tokens_ = torch::randint(0, step->model_.choice.args.vocab_size, {settings->batch_size, kSeqLen}, torch::kLong);
    step->labels_ = step->tokens_.clone();
    step->batch_size_ = settings->batch_size;
    step->model_.model->train();
    step->Step();  // warm-up: allocates the optimizer state and the allocator's buffers
    return step;
  }

  // One optimizer step, as the recipes' training loop does it with gradient_accumulation_steps=1.
  // Returns the loss.
  double Step() {
    optimizer_->zero_grad();
    torch::Tensor loss = recipes::ModelNextTokenLoss(*model_.model, tokens_, labels_);
    loss.backward();
    double value = loss.item<double>();
    // The optimizer's parameters, held here: Optimizer::parameters() prints a deprecation warning per call.
    if (clip_) torch::nn::utils::clip_grad_norm_(model_.trained_tensors, *clip_);
    optimizer_->step();
    return value;
  }

  int64_t tokens_per_step() const { return tokens_.numel(); }
  int64_t batch_size() const { return batch_size_; }
  int64_t trainable_params() const { return model_.trainable_parameters; }
  c10::ScalarType dtype() const { return dtype_; }

 private:
  TrainStep() = default;

  recipes::TrainableModel model_;
  recipes::OptimizerPtr optimizer_;
  torch::Tensor tokens_, labels_;
  std::optional<double> clip_;
  int64_t batch_size_ = 0;
  c10::ScalarType dtype_ = c10::kFloat;
};

// The variant's TrainStep, built (and warmed up) on first use and kept for the rest of the process, so that
// Google Benchmark's repeated calls of a benchmark function measure steps, not construction. Sets `error`
// and returns null when the config cannot be built.
TrainStep* GetStep(Variant v, std::string* error) {
  static std::map<int64_t, std::unique_ptr<TrainStep>> steps;
  auto it = steps.find(v);
  if (it != steps.end()) return it->second.get();
  StatusOr<std::unique_ptr<TrainStep>> made = TrainStep::Create(SpecOf(v));
  if (!made.ok()) {
    *error = std::string(SpecOf(v).config) + ": " + made.status().ToString();
    return nullptr;
  }
  return (steps[v] = std::move(*made)).get();
}

std::string Label(Variant v, const TrainStep& step) {
  const VariantSpec& spec = SpecOf(v);
  std::string label = spec.config;
  if (v == kLoraCheckpointing) label += " +checkpointing";
  if (v == kQatFullOff || v == kQatLoraOff) label += " fake quantisation off";
  return label + ", " + DtypeConfigName(step.dtype()) + ", " + std::to_string(step.batch_size()) + "x" + std::to_string(kSeqLen) + " tokens, " +
         std::to_string(torch::get_num_threads()) + " thread(s)";
}

void BM_TrainStep(benchmark::State& state, Variant v) {
  std::string error;
  TrainStep* step = GetStep(v, &error);
  if (step == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(step->Step());
  state.counters["tokens_per_second"] = benchmark::Counter(
      static_cast<double>(step->tokens_per_step()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["trainable_params"] = static_cast<double>(step->trainable_params());
  state.counters["torch_threads"] = torch::get_num_threads();
  state.SetLabel(Label(v, *step));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Ratios of step times measured in this process (never against recorded timings): each iteration times one
// step of every variant back to back, in an order that rotates between iterations so no variant always runs
// first, and the counters are the medians of the per-iteration ratios. The iteration's time is the three
// steps together.
void BM_Ratios(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  std::string error;
  TrainStep* steps[kVariants];
  for (int64_t v = 0; v < kVariants; ++v) {
    steps[v] = GetStep(static_cast<Variant>(v), &error);
    if (steps[v] == nullptr) {
      state.SkipWithError(error.c_str());
      return;
    }
  }
  std::vector<double> lora_over_full, checkpointing_over_plain, qat_full_over_plain, qat_lora_over_plain;
  int64_t rotation = 0;
  for (auto _ : state) {
    double seconds[kVariants];
    for (int64_t k = 0; k < kVariants; ++k) {
      int64_t v = (rotation + k) % kVariants;
      auto t0 = Clock::now();
      benchmark::DoNotOptimize(steps[v]->Step());
      seconds[v] = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    ++rotation;
    lora_over_full.push_back(seconds[kLora] / seconds[kFull]);
    checkpointing_over_plain.push_back(seconds[kLoraCheckpointing] / seconds[kLora]);
    qat_full_over_plain.push_back(seconds[kQatFull] / seconds[kQatFullOff]);
    qat_lora_over_plain.push_back(seconds[kQatLora] / seconds[kQatLoraOff]);
  }
  state.counters["lora_over_full_step_time"] = Median(lora_over_full);
  state.counters["checkpointing_over_plain_step_time"] = Median(checkpointing_over_plain);
  state.counters["qat_full_over_plain_step_time"] = Median(qat_full_over_plain);
  state.counters["qat_lora_over_plain_step_time"] = Median(qat_lora_over_plain);
  state.counters["torch_threads"] = torch::get_num_threads();
  state.SetLabel("median of per-iteration ratios; checkpointing: tiny/lora_single_device on vs off; qat: fake "
                 "quantisation on vs off, bf16; " +
                 std::to_string(torch::get_num_threads()) + " thread(s)");
}

// Registered here rather than with BENCHMARK() so the names read BM_TrainStep/<variant> and the ratios run
// last.
void RegisterBenchmarks() {
  for (int64_t i = 0; i < kVariants; ++i) {
    const Variant v = static_cast<Variant>(i);
    benchmark::RegisterBenchmark((std::string("BM_TrainStep/") + SpecOf(v).name).c_str(), BM_TrainStep, v)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  // A fixed count keeps the run short and gives the medians the same sample size on every machine.
  benchmark::RegisterBenchmark("BM_Ratios", BM_Ratios)->Iterations(15)->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace
}  // namespace tmx::bench

int main(int argc, char** argv) {
  return tmx::bench::RunTorchBenchmarks(argc, argv, tmx::bench::RegisterBenchmarks);
}
