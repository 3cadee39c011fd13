#include "recipes/quantize.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "base/file_util.h"
#include "base/text.h"
#include "harness/config_manifest.h"
#include "harness/device_hooks.h"
#include "harness/dtypes.h"
#include "harness/run_summary.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/checkpointers.h"
#include "recipes/model_components.h"
#include "recipes/models/fake_quant.h"
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

// Elements of each block of rows whose quantisation error is measured at once (QuantizationErrors::Add).
constexpr int64_t kErrorBlockElements = int64_t{1} << 22;

// Quantises every linear of `model` the scheme fits (models::QuantizeInt4Linears, one linear at a time), each
// original weight kept only until its error is measured (QuantizationErrors into summary->quantization); the
// quantisation's own time over the original weights' bytes is summary->bytes_per_second. Returns how many.
StatusOr<int64_t> QuantizeMeasured(torch::nn::Module& model, int64_t group, const std::string& dtype,
                                   const DeviceInfo& device, RunSummary* summary) {
  std::vector<std::pair<std::string, models::LinearImpl*>> linears;
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    if (auto* linear = dynamic_cast<models::LinearImpl*>(item.value().get())) linears.emplace_back(item.key(), linear);
  }
  const DeviceHooks& hooks = HooksFor(device.type);
  QuantizationErrors errors(group, dtype);
  int64_t count = 0;
  double bytes = 0, seconds = 0;
  for (const auto& [name, linear] : linears) {
    const torch::Tensor original = linear->weight().detach().clone();
    hooks.Synchronize(device.index);
    const Clock::time_point start = Clock::now();
    StatusOr<int64_t> one = models::QuantizeInt4Linears(*linear, group);
    hooks.Synchronize(device.index);
    seconds += Seconds(start, Clock::now());
    TM_RETURN_IF_ERROR(one.status());
    if (*one == 0) continue;
    ++count;
    bytes += static_cast<double>(original.nbytes());
    errors.Add(name, original, linear->weight(), linear->named_buffers()["scales"]);
  }
  summary->quantization = errors.Kinds();
  if (seconds > 0 && count > 0) summary->bytes_per_second = bytes / seconds;
  return count;
}

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
  summary->dtype = *dtype;
  torch::manual_seed(settings.seed);
  const Registry& registry = *context.registry;
  StatusOr<TrainableModel> model =
      SetupModel(config, registry, TrainKind::kFull, settings, torch::Device(context.device.id),
                 context.allow_stand_ins, &summary->stand_ins, &progress);
  TM_RETURN_IF_ERROR(model.status());
  summary->total_parameters = model->total_parameters;

  progress.Begin("Quantising the linears to int4 weights in groups of " + std::to_string(*group));
  StatusOr<int64_t> quantized = QuantizeMeasured(*model->model, *group, *dtype, context.device, summary);
  if (!quantized.ok()) return Status::InvalidArgument(config.OriginOf("quantizer").ToString() + ": " + quantized.status().message());
  progress.End("Quantised " + std::to_string(*quantized) + " linears");
  for (const QuantizedKind& q : summary->quantization) {
    out << "  " << q.kind << " (" << q.tensors << "): largest error " << FormatNumber(q.max_error, 3)
        << " steps (bound " << FormatNumber(q.max_bound, 3) << "), relative RMS " << FormatNumber(100 * q.relative_rms, 2)
        << "% (bound " << FormatNumber(100 * q.relative_rms_bound, 2) << "%)" << (q.Exceeds() ? "  OUT OF BOUNDS" : "")
        << "\n";
  }

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

QuantizationErrors::QuantizationErrors(int64_t group_size, const std::string& dtype)
    : group_size_(group_size), dtype_(dtype), scalar_type_(DtypeNamed(dtype)) {}

void QuantizationErrors::Add(const std::string& name, const torch::Tensor& original, const torch::Tensor& codes,
                             const torch::Tensor& scales) {
  torch::NoGradGuard no_grad;
  Sums& s = sums_[name.substr(name.rfind('.') + 1)];
  ++s.tensors;
  // In double, a block of rows at a time: about kErrorBlockElements elements of temporaries, not the output
  // projection's hundreds of millions.
  const int64_t rows = std::max<int64_t>(1, kErrorBlockElements / std::max<int64_t>(1, original.size(1)));
  for (int64_t row = 0; row < original.size(0); row += rows) {
    const int64_t n = std::min(rows, original.size(0) - row);
    const torch::Tensor block_scales = scales.narrow(0, row, n);
    const torch::Tensor deq = models::DequantizeInt4PerGroup(codes.narrow(0, row, n), block_scales, scalar_type_);
    const torch::Tensor w = original.narrow(0, row, n).to(torch::kDouble);
    const torch::Tensor diff = w - deq.to(torch::kDouble);
    const torch::Tensor step = block_scales.to(torch::kDouble).unsqueeze(-1);
    s.max_error = std::max(s.max_error, (diff.reshape({n, scales.size(1), -1}).abs() / step).max().item<double>());
    s.difference += diff.pow(2).sum().item<double>();
    s.original += w.pow(2).sum().item<double>();
    s.uniform += step.pow(2).sum().item<double>() * static_cast<double>(original.size(1) / scales.size(1)) / 12;
  }
}

std::vector<QuantizedKind> QuantizationErrors::Kinds() const {
  const DtypeInfo* info = FindDtype(dtype_);
  // The scale is computed in the dtype (max |w| / 7.5, rounded), so the group's largest element may fall up to
  // 7.5 x 2^-(m+1) steps past the last code and be clamped to it; and a code is at most 8 steps from 0, so the
  // dequantised value's rounding into the dtype adds at most 8 x 2^-(m+1) steps: 16 x 2^-(m+1) in all (bf16:
  // 0.0625 steps; measured 0.037 over 8192 seeded elements). 1e-5 more for the float32 quotient that chose the code.
  const double rounding = 16 * std::ldexp(1.0, -(info != nullptr ? info->mantissa_bits : 23) - 1) + 1e-5;
  std::vector<QuantizedKind> kinds;
  for (const auto& [kind, s] : sums_) {
    const double norm = std::sqrt(s.original);
    kinds.push_back({kind, "int4 per group of " + std::to_string(group_size_), s.tensors, s.max_error, 0.5 + rounding,
                     norm > 0 ? std::sqrt(s.difference) / norm : 0, norm > 0 ? 1.5 * std::sqrt(s.uniform) / norm : 0});
  }
  return kinds;
}

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
  r.task = RecipeTask::kQuantize;
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
    // And its original, kept while its error is measured over blocks of kErrorBlockElements in double (6 such).
    const double measuring = largest * bytes + 6.0 * 8 * static_cast<double>(kErrorBlockElements);
    const double peak =
        parameters * bytes + largest * (4 + 4 + 4 + 1) + measuring + static_cast<double>(int64_t{1} << 30);
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
