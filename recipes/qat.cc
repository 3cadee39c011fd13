#include "recipes/qat.h"

#include <algorithm>

#include "recipes/estimate.h"
#include "recipes/model_components.h"
#include "recipes/models/fake_quant.h"
#include "recipes/models/lora.h"
#include "recipes/trainer.h"

namespace tmx::recipes {
namespace {

// Next-token fine-tuning with fake quantisation, switched on at fake_quant_after_n_steps.
class FakeQuantizedTraining : public Objective {
 public:
  Status Setup(const TrainingSetup& setup, RunSummary* summary) override {
    after_ = setup.settings.fake_quant_after_n_steps;
    return Objective::Setup(setup, summary);
  }
  void BeforeStep(int64_t global_step, int64_t first_step, RunProgress& progress) override {
    if (!after_) return;
    const bool on = global_step >= *after_;
    models::EnableFakeQuantization(*policy_, on);
    if (global_step == first_step || global_step == *after_) {
      progress.Line("step " + std::to_string(global_step + 1) + ": fake quantisation " +
                    (on ? "on" : "off until step " + std::to_string(*after_ + 1)) +
                    " (fake_quant_after_n_steps=" + std::to_string(*after_) + ")");
    }
  }
  std::vector<std::string> Describe(const TrainingSetup& setup) const override {
    return {"Quantisation-aware training: " + std::to_string(setup.model.fake_quantized_linears) +
            " linears compute with int8 per-token activations and int4 weights in groups of " +
            std::to_string(setup.settings.fake_quant_group_size) + " (fake-quantised, trained in " +
            DtypeConfigName(setup.settings.dtype) + ")"};
  }

 private:
  std::optional<int64_t> after_;  // fake_quant_after_n_steps: plain steps first
};

}  // namespace

RecipeSpec QatRecipe(TrainKind kind, RecipeLaunch launch) {
  const bool distributed = launch == RecipeLaunch::kRanks;
  TrainingRecipe r;
  r.name = kind == TrainKind::kLora ? "qat_lora_finetune_distributed"
                                    : distributed ? "qat_distributed" : "qat_single_device";
  r.doc = std::string("quantisation-aware training: ") +
          (kind == TrainKind::kLora ? "LoRA fine-tuning whose adapted linears" : "full fine-tuning whose linears") +
          " compute with fake-quantised int8 activations and int4 weights (torchao's 8da4w), " +
          (distributed ? "across ranks" : "on one device") + "; the saved model is unquantised";
  r.kind = kind;
  r.launch = launch;
  r.objective_name = "qat";
  r.fields.push_back(ComponentField("quantizer", "qat_quantizer",
                                    "the fake quantisation (torchao's Int8DynActInt4WeightQATQuantizer)"));
  r.fields.push_back(Nullable(AtLeast(Field("fake_quant_after_n_steps", FieldType::kInt, "null",
                                            "optimizer steps trained without fake quantisation first; null: none"),
                                      0)));
  if (distributed && kind == TrainKind::kFull) {  // torchtune's qat_distributed reads them
    for (FieldSpec& f : SelectiveCheckpointingFields()) r.fields.push_back(std::move(f));
    r.checks.push_back(SelectiveCheckpointingChecks);
  }
  r.checks.push_back([kind](const Config& config, const Registry& registry, const DeviceInfo*) {
    return FakeQuantizationProblems(config, registry, kind == TrainKind::kLora);
  });
  r.extra_estimate = [kind](const Config& config, const Registry& registry, const DeviceInfo& device,
                            int ranks) -> StatusOr<CellEstimate> {
    StatusOr<double> extra = EstimateFakeQuantizationBytes(config, registry, device, kind, ranks);
    if (!extra.ok()) return extra.status();
    CellEstimate e;
    e.peak_memory_bytes = static_cast<int64_t>(std::min(*extra, 0x1p61));
    return e;
  };
  r.objective = [] { return std::make_unique<FakeQuantizedTraining>(); };
  return TrainingRecipeSpec(std::move(r));
}

StatusOr<double> EstimateFakeQuantizationBytes(const Config& config, const Registry& registry,
                                               const DeviceInfo& device, TrainKind kind, int ranks) {
  StatusOr<ExtraModelInputs> in = ReadExtraModelInputs(config, registry);
  StatusOr<int64_t> group = config.GetInt("quantizer.groupsize");
  StatusOr<bool> checkpointing = config.GetBool("enable_activation_checkpointing");
  for (const Status& s : {in.status(), group.status(), checkpointing.status()}) TM_RETURN_IF_ERROR(s);
  const ModelChoice& choice = in->model;
  const double bytes = in->bytes, tokens = in->tokens;
  const models::DecoderArgs& args = choice.args;
  const auto scope = kind == TrainKind::kLora ? models::FakeQuantScope::kAdaptedLinears
                                              : models::FakeQuantScope::kEveryLinear;
  double layer = 0, output = 0, largest = 0;  // bytes held for backward; elements of the largest weight
  for (const models::LinearShape& l : models::LinearShapes(args)) {
    const bool adapted = choice.lora && models::Adapts(*choice.lora, l.name);
    if (!models::FakeQuantizes(scope, adapted, l.in_features, *group)) continue;
    const double weight = static_cast<double>(l.in_features) * static_cast<double>(l.out_features);
    const double held = (weight + tokens * static_cast<double>(l.in_features)) * bytes;
    (l.name == "output" ? output : layer) += held;
    largest = std::max(largest, weight);
  }
  // Recomputed layers (activation checkpointing) hold one layer's copies at a time.
  const double layers = *checkpointing ? 1.0 : static_cast<double>(args.num_layers);
  // Quantising the largest weight by operations: its float32 quotient and rounded copy, and the integer codes
  // (the one-pass loop allocates only the copy counted above).
  const bool one_pass = models::FakeQuantizesInOnePass(device.type == "cpu", DtypeNamed(in->dtype));
  const double temporaries = one_pass ? 0.0 : largest * (4 + 4 + 4);
  const bool host_memory = device.traits().HostMemory();
  return (layers * layer + output + temporaries) * (host_memory ? static_cast<double>(ranks) : 1.0);
}

}  // namespace tmx::recipes
