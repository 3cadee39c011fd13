#include "recipes/quantize.h"

#include <torch/torch.h>

#include <chrono>

#include "base/file_util.h"
#include "base/text.h"
#include "harness/config_manifest.h"
#include "harness/run_summary.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/checkpointers.h"
#include "recipes/model_components.h"
#include "recipes/models/lora.h"
#include "recipes/parallelism.h"
#include "recipes/run_progress.h"
#include "recipes/train_schema.h"
#include "recipes/train_setup.h"

namespace tmx::recipes {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

constexpr const char* kMode = "8da4w";

Status Quantize(const Config& config, const RunContext& context, RunSummary* summary) {
  const Clock::time_point start = Clock::now();
  std::ostream& out = *context.out;
  RunProgress progress(&out);
  out << ChooseThreads() << "\n";
  summary->threads = at::get_num_threads();
  StatusOr<std::string> dtype = config.GetString("dtype");
  StatusOr<int64_t> group = config.GetInt("quantizer.groupsize");
  StatusOr<uint64_t> seed = ReadSeed(config);
  for (const Status& s : {dtype.status(), group.status(), seed.status()}) TM_RETURN_IF_ERROR(s);
  std::vector<Problem> problems = OutputDirProblems(config);
  if (!problems.empty()) return Status::InvalidArgument(problems.front().ToString());
  const std::string path = QuantizedCheckpointPath(config);
  TM_RETURN_IF_ERROR(MakeDirs(ParentDir(path)));

  TrainingSettings settings;
  settings.dtype = DtypeNamed(*dtype);
  settings.seed = *seed;
  summary->seed = *seed;
  torch::manual_seed(settings.seed);
  const Registry& registry = *context.registry;
  StatusOr<TrainableModel> model =
      SetupModel(config, registry, TrainKind::kFull, settings, torch::Device(context.device.id),
                 context.allow_stand_ins, &summary->stand_ins, &progress);
  TM_RETURN_IF_ERROR(model.status());
  summary->total_parameters = model->total_parameters;

  progress.Begin("Quantising the linears to int4 weights in groups of " + std::to_string(*group));
  StatusOr<int64_t> quantized = models::QuantizeInt4Linears(*model->model, *group);
  if (!quantized.ok()) return Status::InvalidArgument(config.OriginOf("quantizer").ToString() + ": " + quantized.status().message());
  progress.End("Quantised " + std::to_string(*quantized) + " linears");

  progress.Begin("Writing " + path);
  checkpoint::NamedTensors tensors;
  int64_t bytes = 0;
  for (auto& [name, t] : checkpoint::ModuleTensors(*model->model)) {
    tensors.emplace_back(name, t.to(torch::kCPU));
    bytes += static_cast<int64_t>(t.nbytes());
  }
  TM_RETURN_IF_ERROR(checkpoint::SaveSafetensors(
      path, tensors, {{"format", "pt"}, {"quantization", kMode}, {"groupsize", std::to_string(*group)}}));
  progress.End("Wrote " + path + " (" + FormatBytes(bytes) + " of tensors)");
  summary->init_time_s = Seconds(start, Clock::now());
  return Status::OK();
}

}  // namespace

std::string QuantizedCheckpointPath(const Config& config) {
  StatusOr<std::string> out = config.GetString("output_dir");
  std::string stem = "model";
  StatusOr<std::vector<std::string>> files = config.GetStringList("checkpointer.checkpoint_files");
  if (files.ok() && !files->empty()) {
    stem = (*files)[0].substr((*files)[0].rfind('/') + 1);
    stem = stem.substr(0, stem.rfind('.'));
  }
  return (out.ok() ? *out : std::string(".")) + "/" + stem + "-" + kMode + ".safetensors";
}

RecipeSpec QuantizeRecipe() {
  RecipeSpec r;
  r.name = "quantize";
  r.doc = "post-training quantisation of a model to int8 dynamic activations and int4 weights (8da4w), written as "
          "a checkpoint the generation recipes load with the same quantizer";
  r.launch = RecipeLaunch::kOneProcess;
  r.configs = ManifestConfigsOf(BuiltinConfigManifest(), r.name);
  r.fields = {OutputDirField("folder of the quantised checkpoint (<checkpoint stem>-8da4w.safetensors)"),
              ComponentField("model", "model", "the model to quantise (no adapters: quantise a merged model)"),
              ComponentField("checkpointer", "checkpointer", "where its weights are loaded from", false),
              ComponentField("quantizer", "quantizer", "the post-training quantisation (8da4w)"),
              DeviceField(),
              DtypeField(),
              SeedField(),
              LogLevelField()};
  r.run = [](const Config& config, const RunContext& context) {
    auto work = [&](Parallelism&, RunSummary* summary) { return Quantize(config, context, summary); };
    auto report = [&](const RunSummary& summary) {
      *context.out << "Finished: quantised in " << FormatSeconds(summary.init_time_s);
      if (summary.peak_memory_bytes) {
        *context.out << ", peak memory " << FormatBytes(*summary.peak_memory_bytes) << " ("
                     << summary.peak_memory_source << ")";
      }
      *context.out << "\n";
    };
    return RunInProcessOrRanks(config, context, "quantize", /*distributed=*/false,
                               "use a device with more memory; the whole model is loaded in its dtype", work, report);
  };
  r.estimate = [](const Config& config, const Registry& registry, const DeviceInfo& device) -> StatusOr<CellEstimate> {
    StatusOr<ModelChoice> choice = ModelFromConfig(config, registry);
    StatusOr<std::string> dtype = config.GetString("dtype");
    for (const Status& s : {choice.status(), dtype.status()}) TM_RETURN_IF_ERROR(s);
    CellEstimate e;
    e.parameters = CountModelParameters(*choice).total;
    const double bytes = static_cast<double>(c10::elementSize(DtypeNamed(*dtype)));
    // The model in its dtype; each linear's weight gives way to its codes as it is quantised, so besides it only
    // the largest linear's float32 quotient, rounded copy and scales, and its codes; and the runtime.
    double largest = 0;
    for (const models::LinearShape& l : models::LinearShapes(choice->args)) {
      largest = std::max(largest, static_cast<double>(l.in_features) * static_cast<double>(l.out_features));
    }
    const double parameters = static_cast<double>(e.parameters);
    const double peak = parameters * bytes + largest * (4 + 4 + 4 + 1) + static_cast<double>(int64_t{1} << 30);
    e.peak_memory_bytes = peak < 0x1p62 ? static_cast<int64_t>(peak) : int64_t{1} << 62;
    e.work = parameters;
    return e;
  };
  r.missing_inputs = [](const Config& config, const Registry& registry) {
    std::vector<Problem> problems = MissingCheckpointFiles(config, registry, "checkpointer", "model");
    for (Problem& p : OutputDirProblems(config)) problems.push_back(std::move(p));
    return problems;
  };
  r.cell_overrides = [](int) -> std::vector<std::string> { return {}; };
  return r;
}

}  // namespace tmx::recipes
