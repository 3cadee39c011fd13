#include "recipes/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "base/file_util.h"
#include "base/json_io.h"
#include "base/output_folder.h"
#include "base/text.h"
#include "harness/config_manifest.h"
#include "harness/device_hooks.h"
#include "recipes/checkpointers.h"
#include "recipes/estimate.h"
#include "recipes/vision_components.h"
#include "recipes/vision_training.h"
#include "recipes/first_step_probe.h"
#include "recipes/flops.h"
#include "recipes/loss.h"
#include "recipes/models/fault_injection.h"
#include "recipes/op_profile.h"
#include "recipes/optimizer_in_backward.h"

namespace tmx::recipes {

// ----- Objective: plain fine-tuning -----

Status Objective::Setup(const TrainingSetup& setup, RunSummary*) {
  policy_ = setup.model.model.ptr().get();
  device_ = setup.device;
  return Status::OK();
}

StatusOr<data::DataLoader> Objective::LoadData(const TrainingSetup& setup, RunSummary* summary) {
  return SetupData(setup.config, setup.settings, setup.model.choice.args, setup.context.allow_stand_ins,
                   &summary->stand_ins);
}

double Objective::LossCount(const data::Batch& batch) const {
  // Every label but the first of each row, and not masked.
  return static_cast<double>(batch.labels.slice(1, 1).ne(data::kIgnoreIndex).sum().item<int64_t>());
}

torch::Tensor Objective::Loss(const data::Batch& batch) {
  const DeviceBatch b = OnDevice(batch, device_);
  return ModelNextTokenLoss(*policy_, b.tokens, b.labels, b.input_pos, b.document_ids);
}

torch::Tensor Objective::ProbeLogits(const data::Batch& batch) {
  // The first row's first kProbeLogitPositions positions only: causal attention makes them the full batch's
  // logits there, and a real vocabulary's logits of the whole batch would add gigabytes to the run's peak.
  constexpr int64_t kProbeLogitPositions = 64;
  torch::NoGradGuard no_grad;
  policy_->eval();  // no dropout: the reference run's logits are the same function of the same weights
  const DeviceBatch b = OnDevice(batch, device_);
  const int64_t length = std::min<int64_t>(b.tokens.size(1), kProbeLogitPositions);
  auto first = [&](const torch::Tensor& t) {
    return t.defined() && t.dim() >= 2 ? t.narrow(0, 0, 1).narrow(1, 0, length) : t;
  };
  torch::Tensor logits = policy_->forward(first(b.tokens), first(b.input_pos), first(b.document_ids));
  policy_->train();
  return logits;
}

Objective::DeviceBatch Objective::OnDevice(const data::Batch& batch, torch::Device device) {
  // Packed batches carry each token's position in its document and the document ids (else undefined).
  DeviceBatch b;
  b.input_pos = batch.input_pos.defined() ? batch.input_pos.to(device) : batch.input_pos;
  b.document_ids = batch.document_ids.defined() ? batch.document_ids.to(device) : batch.document_ids;
  b.tokens = batch.tokens.to(device);
  b.labels = batch.labels.to(device);
  return b;
}

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string FormatLr(double lr) {
  std::ostringstream s;
  s << std::scientific << std::setprecision(2) << lr;
  return s.str();
}

// What the numeric probe reads of the trained weights: the parameters by name in one process; across ranks,
// whose weights live in flat buffers (recipes/parallelism.h), the tensors this rank's optimizer steps, as
// "flat.0", "flat.1", ... (the lead's, which its reference run with the same ranks lays out the same way).
NamedParameters ProbedTensors(const NamedParameters& trained, const std::vector<at::Tensor>& stepped, int world_size) {
  if (world_size == 1) return trained;
  NamedParameters flat;
  for (size_t i = 0; i < stepped.size(); ++i) flat.emplace_back("flat." + std::to_string(i), stepped[i]);
  return flat;
}

class Trainer {
 public:
  Trainer(const TrainingRecipe& recipe, const Config& config, const RunContext& context, const Registry& registry,
          Parallelism* parallel)
      : recipe_(recipe),
        config_(config),
        context_(context),
        registry_(registry),
        objective_(recipe.objective ? recipe.objective() : std::make_unique<Objective>()),
        parallel_(*parallel),
        hooks_(HooksFor(context.device.type)),
        device_(parallel->LocalDevice(torch::Device(context.device.id))),
        out_(parallel->lead() ? context.out : &null_out_),
        progress_(out_) {}

  Status Run(RunSummary* summary);

 private:
  Status Setup(RunSummary* summary);
  Status LoadData(RunSummary* summary);
  Status SetupOptimizer(RunSummary* summary);
  Status SetupValidation(RunSummary* summary);
  void DescribeRun(const RunSummary& summary);
  Status Train(RunSummary* summary);
  // Step `global_step` as the objective runs it (Objective::Step), given the loop's own (MicroBatchStep).
  Status Step(int64_t epoch, int64_t step, int64_t global_step, int64_t first_step, RunSummary* summary,
              StepResult* result);
  // One optimizer step's micro-batches, backward, clipping and step, at `global_step`.
  Status MicroBatchStep(int64_t epoch, int64_t step, int64_t global_step, int64_t first_step, RunSummary* summary,
                        StepResult* result);
  // An objective's own optimizer step (StepContext::optimizer_step).
  std::optional<double> OptimizerStep();
  Status LogStep(int64_t epoch, int64_t step, int64_t global_step, int64_t first_step, double lr,
                 const StepResult& r);
  Status Validate(int64_t epoch, int64_t global_step);
  Status SaveCheckpoint(int64_t epoch, int64_t global_step);
  // The mean loss over every token of the validation data (every rank's share), without training.
  double ValidationLoss();
  void Synchronize() const { hooks_.Synchronize(device_.has_index() ? device_.index() : context_.device.index); }
  double SumOverRanks(double v) const { return parallel_.Sum(v); }
  TrainingSetup SetupView() {
    return {config_, registry_, context_, recipe_.kind, settings_, model_, device_, progress_};
  }
  // This rank's model FLOPs of one micro-batch (recipes/flops.h): the policy's forward and backward over the
  // batch's padded shape, and the objective's frozen models' forward.
  double MicroBatchFlops(const data::Batch& batch) const {
    const int64_t rows = batch.tokens.size(0), length = batch.tokens.size(1);
    const FlopModel policy{model_.choice.args, model_.choice.lora};
    return TrainingFlops(policy, rows, length) + objective_->ExtraFlops(rows, length);
  }

  const TrainingRecipe& recipe_;
  const Config& config_;
  const RunContext& context_;
  const Registry& registry_;
  std::unique_ptr<Objective> objective_;
  Parallelism& parallel_;
  const DeviceHooks& hooks_;
  torch::Device device_;
  NullStream null_out_;
  std::ostream* out_;
  RunProgress progress_;  // on out_: the lead's lines only
  TrainingSettings settings_;
  CheckpointFormat format_ = CheckpointFormat::kTorchtune;
  TrainableModel model_;
  OptimizerPtr optimizer_;
  std::vector<at::Tensor> stepped_;  // what the optimizer steps (Parallelism::Wrap)
  NamedParameters probed_;           // what the numeric probe reads of them (ProbedTensors)
  std::unique_ptr<OptimizerInBackward> in_backward_;  // with optimizer_in_bwd; hooks removed before optimizer_
  std::optional<data::DataLoader> loader_;
  std::optional<data::DataLoader> val_loader_;  // with run_val_every_n_steps
  int64_t val_every_ = 0;
  StepCounts steps_;  // what decides steps_per_epoch_, for the line before the first step
  int64_t steps_per_epoch_ = 0, start_epoch_ = 0;
  double base_lr_ = 0;
  std::optional<StepProfiler> profiler_;  // with profiler.enabled
};

Status Trainer::Setup(RunSummary* summary) {
  StatusOr<TrainingSettings> settings = ReadTrainingSettings(config_, recipe_.kind);
  TM_RETURN_IF_ERROR(settings.status());
  settings_ = *settings;
  format_ = CheckpointFormatOf(config_, registry_);
  settings_.world_size = parallel_.world_size();
  settings_.rank = parallel_.rank();
  summary->world_size = parallel_.world_size();
  // tune run checks the outputs before starting (missing_inputs); a run started otherwise (stand-ins allowed,
  // a test) still stops here, before building anything.
  std::vector<Problem> problems = OutputProblems(config_, registry_, recipe_.kind);
  if (!problems.empty()) {
    std::string text = "cannot write this run's outputs:";
    for (const Problem& p : problems) text += "\n  " + p.ToString();
    return Status::InvalidArgument(text);
  }
  progress_.Line("Writing to " + settings_.output_dir + ": metrics " + settings_.metrics_path + ", " +
                 (settings_.save_checkpoints ? "checkpoints " + settings_.checkpoint_dir + "/epoch_<N>"
                                             : std::string("no checkpoints (save_checkpoints=False)")) +
                 ", summary " + settings_.output_dir + "/summary.json");
  TM_RETURN_IF_ERROR(MakeDirs(settings_.output_dir));
  TM_RETURN_IF_ERROR(MakeDirs(ParentDir(settings_.metrics_path)));
  if (parallel_.lead()) ::unlink(settings_.metrics_path.c_str());
  summary->seed = settings_.seed;
  torch::manual_seed(settings_.seed);

  StatusOr<TrainableModel> model = SetupModel(config_, registry_, recipe_.kind, settings_, device_,
                                              context_.allow_stand_ins, &summary->stand_ins, &progress_);
  TM_RETURN_IF_ERROR(model.status());
  model_ = std::move(*model);
  summary->total_parameters = model_.total_parameters;
  summary->trainable_parameters = model_.trainable_parameters;
  TM_RETURN_IF_ERROR(objective_->Setup(SetupView(), summary));
  TM_RETURN_IF_ERROR(LoadData(summary));
  return SetupOptimizer(summary);
}

Status Trainer::LoadData(RunSummary* summary) {
  auto component = [this](const char* key) {
    YAML::Node node = config_.Find(std::string(key) + "._component_");
    return node.IsScalar() ? node.Scalar() : std::string(key);
  };
  progress_.Begin("Loading the data (" + component("tokenizer") + ", " + component("dataset") + ")");
  StatusOr<data::DataLoader> loader = objective_->LoadData(SetupView(), summary);
  TM_RETURN_IF_ERROR(loader.status());
  loader_.emplace(std::move(*loader));
  steps_.samples = loader_->num_samples();
  StatusOr<bool> packed = config_.GetBool("dataset.packed", false);
  steps_.packed = packed.ok() && *packed;
  steps_.ranks = settings_.world_size;
  steps_.batch_size = settings_.batch_size;
  steps_.batches = loader_->size();
  steps_.gradient_accumulation_steps = settings_.gradient_accumulation_steps;
  steps_.max_steps_per_epoch = settings_.max_steps_per_epoch;
  steps_.epochs = settings_.epochs;
  progress_.End("Loaded " + std::to_string(steps_.samples) +
                (loader_->preference() ? " preference pairs" : steps_.packed ? " packed rows" : " samples"));
  steps_per_epoch_ = steps_.steps_per_epoch();
  if (steps_per_epoch_ < 1) {
    return Status::InvalidArgument("the dataset has " + std::to_string(loader_->size()) +
                                   " batches, fewer than gradient_accumulation_steps=" +
                                   std::to_string(settings_.gradient_accumulation_steps) +
                                   "; lower gradient_accumulation_steps or batch_size");
  }
  return Status::OK();
}

// The optimizer (resumed from a checkpoint, stepped inside backward), validation, the schedule's base and the
// profiler.
Status Trainer::SetupOptimizer(RunSummary* summary) {
  auto load_weights = [this](const std::string& dir) {
    return LoadEpochWeights(dir, format_, model_.choice, *model_.model);
  };
  // Resuming reads the checkpoint before any weights are sharded: the weights into the model, the optimizer
  // state per parameter (the checkpoint's format), which goes to the optimizer once it exists.
  OptimizerPtr resumed;
  if (settings_.resume) {
    StatusOr<OptimizerPtr> per_param = recipes::SetupOptimizer(config_, registry_, model_.trained_tensors);
    TM_RETURN_IF_ERROR(per_param.status());
    resumed = std::move(*per_param);
    StatusOr<ResumePoint> point = LoadTrainState(settings_.checkpoint_dir, config_, model_.trained, *resumed,
                                                 recipe_.kind == TrainKind::kLora, load_weights);
    TM_RETURN_IF_ERROR(point.status());
    start_epoch_ = point->next_epoch;
    steps_.start_epoch = start_epoch_;
    *out_ << "Resuming from " << point->directory << " at epoch " << start_epoch_ << "\n";
  }
  StatusOr<std::vector<at::Tensor>> stepped = parallel_.Wrap(config_, model_);
  TM_RETURN_IF_ERROR(stepped.status());
  stepped_ = *stepped;
  probed_ = ProbedTensors(model_.trained, stepped_, parallel_.world_size());
  TM_RETURN_IF_ERROR(SetupValidation(summary));
  StatusOr<OptimizerPtr> optimizer = recipes::SetupOptimizer(config_, registry_, *stepped);
  TM_RETURN_IF_ERROR(optimizer.status());
  optimizer_ = std::move(*optimizer);
  if (resumed != nullptr) parallel_.LoadOptimizerState(*resumed, optimizer_.get());
  if (settings_.optimizer_in_bwd) {
    // The checks refuse it across ranks, with gradient accumulation and with clipping (as torchtune does).
    if (parallel_.world_size() > 1 || settings_.gradient_accumulation_steps != 1 || settings_.clip_grad_norm) {
      return Status::InvalidArgument(
          "optimizer_in_bwd=True steps each tensor inside backward: it needs one process, "
          "gradient_accumulation_steps=1 and clip_grad_norm=null");
    }
    in_backward_ = std::make_unique<OptimizerInBackward>(optimizer_.get(), *stepped);
  }
  StatusOr<double> lr = config_.GetDouble("optimizer.lr");
  TM_RETURN_IF_ERROR(lr.status());
  base_lr_ = *lr;
  StatusOr<ProfilerSettings> profiler = ReadProfilerSettings(config_);
  TM_RETURN_IF_ERROR(profiler.status());
  if (profiler->enabled) {
    profiler_.emplace(*profiler, c10::DeviceTypeName(device_.type(), /*lower_case=*/true), parallel_.rank());
  }
  return Status::OK();
}

// Validation (the distributed recipes' run_val_every_n_steps, dataset_val, batch_size_val): the validation
// data in order, sharded over the ranks like the training data.
Status Trainer::SetupValidation(RunSummary* summary) {
  if (config_.IsNull("run_val_every_n_steps")) return Status::OK();  // absent (single-device recipes) or null
  StatusOr<int64_t> every = config_.GetInt("run_val_every_n_steps");
  StatusOr<int64_t> batch = config_.GetInt("batch_size_val");
  TM_RETURN_IF_ERROR(every.status());
  TM_RETURN_IF_ERROR(batch.status());
  if (config_.IsNull("dataset_val")) {
    return Status::InvalidArgument(config_.OriginOf("run_val_every_n_steps").ToString() +
                                   ": run_val_every_n_steps: validation needs dataset_val; add it, or set "
                                   "run_val_every_n_steps=null");
  }
  TrainingSettings val = settings_;
  val.batch_size = *batch;
  val.shuffle = false;
  StatusOr<data::DataLoader> loader =
      SetupData(config_, val, model_.choice.args, context_.allow_stand_ins, &summary->stand_ins, "dataset_val");
  TM_RETURN_IF_ERROR(loader.status());
  val_loader_.emplace(std::move(*loader));
  val_every_ = *every;
  return Status::OK();
}

// Sharded optimizer state is gathered into the per-parameter format. The lead process writes the weights and
// the recipe state once, in the single-device formats.
Status Trainer::SaveCheckpoint(int64_t epoch, int64_t global_step) {
  const TrainingSettings& s = settings_;
  parallel_.BeginSave();
  OptimizerPtr per_param;
  if (parallel_.ShardsOptimizerState()) {
    StatusOr<OptimizerPtr> made = recipes::SetupOptimizer(config_, registry_, model_.trained_tensors);
    TM_RETURN_IF_ERROR(made.status());
    per_param = std::move(*made);
    parallel_.GatherOptimizerState(*optimizer_, per_param.get());
  }
  if (parallel_.lead()) {
    std::string dir = s.checkpoint_dir + "/epoch_" + std::to_string(epoch);
    progress_.Begin("Saving checkpoint " + dir);
    TM_RETURN_IF_ERROR(MakeDirs(dir));
    TM_RETURN_IF_ERROR(SaveEpochWeights(dir, format_, model_.choice, *model_.model, s.save_adapter_weights_only));
    TM_RETURN_IF_ERROR(SaveTrainState(dir, model_.trained, per_param ? *per_param : *optimizer_,
                                      recipe_.kind == TrainKind::kLora, {epoch + 1, global_step, s.seed}));
    progress_.End("Saved checkpoint " + dir + " (" + FormatBytes(FolderFileBytes(dir)) + ")");
    TM_RETURN_IF_ERROR(objective_->SaveCheckpoint(epoch, SetupView()));
  }
  parallel_.EndSave();
  return Status::OK();
}

double Trainer::ValidationLoss() {
  torch::NoGradGuard no_grad;
  model_.model->eval();
  double loss_sum = 0, count = 0;
  for (int64_t i = 0; i < val_loader_->size(); ++i) {
    data::Batch batch = val_loader_->GetBatch(i);
    const double local = objective_->LossCount(batch);
    torch::Tensor loss = objective_->Loss(batch);  // every rank runs the model: fully sharded layers gather together
    if (local > 0) loss_sum += loss.item<double>() * local;
    count += local;
  }
  model_.model->train();
  const double total = SumOverRanks(count);
  return total > 0 ? SumOverRanks(loss_sum) / total : std::nan("");
}

Status Trainer::Step(int64_t epoch, int64_t step, int64_t global_step, int64_t first_step, RunSummary* summary,
                     StepResult* r) {
  StepContext context;
  context.epoch = epoch;
  context.step = step;
  context.global_step = global_step;
  context.first_step = first_step;
  context.micro_batches = [=] { return MicroBatchStep(epoch, step, global_step, first_step, summary, r); };
  context.batch = [=] {
    return loader_->BatchAtStep(epoch * loader_->size() + step * settings_.gradient_accumulation_steps);
  };
  context.optimizer_step = [this] { return OptimizerStep(); };
  context.result = r;
  context.summary = summary;
  return objective_->Step(context);
}

std::optional<double> Trainer::OptimizerStep() {
  std::optional<double> norm;
  if (in_backward_ == nullptr) {
    norm = parallel_.ReduceAndClip(settings_.clip_grad_norm);
    optimizer_->step();
  }
  parallel_.AfterStep();
  parallel_.ZeroGrad(*optimizer_);
  return norm;
}

Status Trainer::MicroBatchStep(int64_t epoch, int64_t step, int64_t global_step, int64_t first_step,
                               RunSummary* summary, StepResult* r) {
  const TrainingSettings& s = settings_;
  parallel_.ZeroGrad(*optimizer_);
  std::optional<FirstStepProbe> probe;  // for the numeric check (harness/numeric_probe.h), on every rank
  if (global_step == first_step && NumericProbeRequested()) {
    // Routed experts make a discrete choice per token as quantisation makes one per weight: a bf16 run and its
    // float32 reference can route a token differently (tiny Llama 4 LoRA, top-1: an expert's adapter gradient
    // 15% off with the loss 0.01% off), so a mixture takes the looser tolerances too (matrix/tensor_check.h).
    const bool quantized = (model_.choice.lora && model_.choice.lora->quantize_base) ||
                           model_.fake_quantized_linears > 0 || model_.choice.args.num_experts > 0;
    probe.emplace(DtypeConfigName(s.dtype), quantized);
    const data::Batch first = loader_->BatchAtStep(epoch * loader_->size() + step * s.gradient_accumulation_steps);
    probe->AddBatch(first.tokens, objective_->ProbeLogits(first));
    probe->AddParameters(probed_, "weight");
  }
  objective_->StartStep();
  double loss_sum = 0;
  for (int64_t micro = 0; micro < s.gradient_accumulation_steps; ++micro) {
    int64_t batch_index = epoch * loader_->size() + step * s.gradient_accumulation_steps + micro;
    data::Batch batch = loader_->BatchAtStep(batch_index);
    // What the loss is averaged over (tokens; DPO: pairs), on every rank: each rank's share of the mean is its
    // count over the global count.
    const double local_count = objective_->LossCount(batch);
    const double global_count = SumOverRanks(local_count);
    if (global_count == 0) {
      // The loss of a batch with nothing to learn is 0/0; say why instead of reporting a NaN.
      summary->error_kind = "no_trained_tokens";
      return Status::InvalidArgument(
          "step " + std::to_string(global_step + 1) + ": every label of the batch is masked, so there is no " +
          "token to train on (prompts longer than tokenizer.max_seq_len leave no response); fix: raise " +
          "tokenizer.max_seq_len or set dataset.train_on_input=True");
    }
    torch::Tensor loss = objective_->Loss(batch);
    if (local_count > 0) {
      const double share = local_count / global_count;
      (loss * (share / static_cast<double>(s.gradient_accumulation_steps))).backward();
      loss_sum += SumOverRanks(loss.item<double>() * share);
    } else {
      loss_sum += SumOverRanks(0.0);  // nothing to learn on this rank; the others still sum with it
    }
    // Every non-padding token the model processed (on every rank), as torchtune counts.
    r->tokens += static_cast<int64_t>(SumOverRanks(static_cast<double>(batch.num_tokens)));
    r->flops += SumOverRanks(MicroBatchFlops(batch));
  }
  r->loss = loss_sum / static_cast<double>(s.gradient_accumulation_steps);
  if (!std::isfinite(r->loss)) {
    summary->error_kind = "non_finite_loss";
    return Status::Internal("non-finite loss (" + std::to_string(r->loss) + ") at step " +
                            std::to_string(global_step + 1) + "; lower optimizer.lr or use dtype=fp32");
  }
  objective_->EndStep(parallel_);  // every rank, logged or not
  if (in_backward_ == nullptr) {  // else every tensor was stepped, and its gradient freed, inside backward
    // The first step's norm is always taken, for the numeric check (RunSummary::first_grad_norm): clipping at
    // infinity scales every gradient by exactly 1.
    std::optional<double> clip = s.clip_grad_norm;
    if (!clip && global_step == first_step) clip = std::numeric_limits<double>::infinity();
    r->grad_norm = parallel_.ReduceAndClip(clip);
    if (global_step == first_step) summary->first_grad_norm = r->grad_norm;
    if (probe) probe->AddParameters(probed_, "gradient");
    const std::vector<torch::Tensor> before = models::OptimizerFaultBefore(stepped_);  // tests only
    optimizer_->step();
    models::OptimizerFaultAfter(stepped_, before);
    if (probe) probe->AddParameters(probed_, "stepped");
  }
  parallel_.AfterStep();
  if (probe && parallel_.lead()) return probe->Write(s.output_dir);
  return Status::OK();
}

// The metrics file's record and the progress line of step `global_step` (1-based, done), when it is logged; else
// a line when a long step is due one.
Status Trainer::LogStep(int64_t epoch, int64_t step, int64_t global_step, int64_t first_step, double lr,
                        const StepResult& r) {
  const TrainingSettings& s = settings_;
  const bool logged = global_step % s.log_every_n_steps == 0 || step + 1 == steps_per_epoch_;
  if (!parallel_.lead()) return Status::OK();
  if (!logged) {
    // A long step that is not logged: still a line, so a slow run is never silent for long.
    if (progress_.StepLineDue()) {
      progress_.Line("epoch " + std::to_string(epoch + 1) + " step " + std::to_string(global_step) + " | step " +
                     FormatSeconds(r.time_s) + " | " + progress_.StepTiming(global_step - first_step));
    }
    return Status::OK();
  }
  nlohmann::json record = {{"step", global_step}, {"epoch", epoch},
                           {"loss", r.loss},      {"lr", lr},
                           {"tokens", r.tokens},  {"tokens_per_second", r.tokens / r.time_s},
                           {"step_time_s", r.time_s}};
  if (r.grad_norm) record["grad_norm"] = *r.grad_norm;
  const std::vector<std::pair<const char*, double>> metrics = objective_->StepMetrics();
  for (const auto& [name, value] : metrics) record[name] = value;
  std::optional<MemoryReading> peak = s.log_peak_memory ? PeakMemory(context_.device) : std::nullopt;
  if (peak) record["peak_memory_gib"] = static_cast<double>(peak->bytes) / (1 << 30);
  TM_RETURN_IF_ERROR(AppendLineDurably(s.metrics_path, DumpJson(record)));
  std::ostringstream line;
  line << "epoch " << epoch + 1 << " step " << global_step << " | loss " << std::fixed << std::setprecision(4)
       << r.loss << " | lr " << FormatLr(lr) << " | tok/s " << std::setprecision(0) << r.tokens / r.time_s;
  if (r.grad_norm) line << " | grad_norm " << std::setprecision(3) << *r.grad_norm;
  for (const auto& [name, value] : metrics) line << " | " << name << " " << std::setprecision(4) << value;
  if (peak) line << " | peak_mem " << std::setprecision(3) << static_cast<double>(peak->bytes) / (1 << 30) << " GiB";
  line << " | " << progress_.StepTiming(global_step - first_step);
  progress_.Line(line.str());
  return Status::OK();
}

Status Trainer::Validate(int64_t epoch, int64_t global_step) {
  if (val_every_ <= 0 || global_step % val_every_ != 0) return Status::OK();
  const double val_loss = ValidationLoss();  // every rank takes part
  if (!parallel_.lead()) return Status::OK();
  nlohmann::json record = {{"step", global_step}, {"epoch", epoch}, {"val_loss", val_loss}};
  TM_RETURN_IF_ERROR(AppendLineDurably(settings_.metrics_path, DumpJson(record)));
  std::ostringstream line;
  line << "epoch " << epoch + 1 << " step " << global_step << " | val_loss " << std::fixed << std::setprecision(4)
       << val_loss;
  progress_.Line(line.str());
  return Status::OK();
}

Status Trainer::Train(RunSummary* summary) {
  const TrainingSettings& s = settings_;
  int64_t total_steps = s.epochs * steps_per_epoch_;
  int64_t global_step = start_epoch_ * steps_per_epoch_;
  const int64_t first_step = global_step;
  progress_.StartSteps(steps_.total_steps());
  progress_.StartWatching();  // a step of minutes says it still runs
  model_.model->train();
  for (int64_t epoch = start_epoch_; epoch < s.epochs; ++epoch) {
    for (int64_t step = 0; step < steps_per_epoch_; ++step) {
      objective_->BeforeStep(global_step, first_step, progress_);
      double lr = base_lr_ * (s.has_schedule ? LrScheduleFactor(global_step, total_steps, s.warmup_steps, s.num_cycles)
                                             : 1.0);
      SetLearningRate(*optimizer_, lr);
      Synchronize();
      if (profiler_) TM_RETURN_IF_ERROR(profiler_->BeforeStep(global_step - first_step));
      progress_.Doing("epoch " + std::to_string(epoch + 1) + " step " + std::to_string(global_step + 1));
      auto t0 = Clock::now();
      StepResult result;
      TM_RETURN_IF_ERROR(Step(epoch, step, global_step, first_step, summary, &result));
      Synchronize();
      result.time_s = Seconds(t0, Clock::now());
      progress_.Doing("");
      if (profiler_) {
        StatusOr<bool> wrote = profiler_->AfterStep(global_step - first_step, result.time_s);
        TM_RETURN_IF_ERROR(wrote.status());
        if (*wrote) {
          progress_.Line("Profile of " + profiler_->settings().DescribeSteps() + ": " +
                         SummarizeOpProfile(profiler_->Profile()) + "; by operation in " + profiler_->TextPath());
        }
      }
      ++global_step;
      summary->step_times_s.push_back(result.time_s);
      summary->losses.push_back(result.loss);
      summary->step_tokens.push_back(result.tokens);
      summary->step_flops.push_back(result.flops);
      TM_RETURN_IF_ERROR(LogStep(epoch, step, global_step, first_step, lr, result));
      TM_RETURN_IF_ERROR(Validate(epoch, global_step));
    }
    if (s.save_checkpoints) TM_RETURN_IF_ERROR(SaveCheckpoint(epoch, global_step));
  }
  progress_.StopWatching();
  return Status::OK();
}

void Trainer::DescribeRun(const RunSummary& summary) {
  for (const std::string& s : summary.stand_ins) *out_ << "Stand-in: " << s << "\n";
  *out_ << "Training " << context_.config_name << " on " << device_ << " (" << context_.device.name
        << "): " << summary.trainable_parameters << " of " << summary.total_parameters << " parameters trainable, "
        << steps_per_epoch_ << (steps_per_epoch_ == 1 ? " step" : " steps") << " per epoch, seed " << settings_.seed
        << parallel_.Describe()
        << (in_backward_ ? ", optimizer stepped inside backward (optimizer_in_bwd: gradients freed as they arrive)" : "")
        << std::endl;
  for (const std::string& line : objective_->Describe(SetupView())) progress_.Line(line);
  progress_.Line(DescribeSteps(steps_));
  if (!profiler_) return;
  const ProfilerSettings& p = profiler_->settings();
  const int64_t run_steps = steps_.total_steps();
  const int64_t needed = p.CycleSteps();
  if (run_steps < needed) {
    progress_.Line("Profiler: this run has " + std::to_string(run_steps) + " steps, fewer than profiler.wait_steps + "
                   "warmup_steps + active_steps (" + std::to_string(needed) + "), so no step is profiled; lower "
                   "profiler.wait_steps and profiler.warmup_steps");
  } else {
    progress_.Line("Profiler: " + p.DescribeSteps() + " timed by ATen operation (profiler.wait_steps " +
                   std::to_string(p.wait_steps) + ", warmup_steps " + std::to_string(p.warmup_steps) +
                   ", active_steps " + std::to_string(p.active_steps) + "), written to " + profiler_->TextPath());
  }
}

Status Trainer::Run(RunSummary* summary) {
  *out_ << ChooseThreads() << "\n";
  summary->threads = at::get_num_threads();
  auto start = Clock::now();
  TM_RETURN_IF_ERROR(Setup(summary));
  summary->dtype = DtypeConfigName(settings_.dtype);
  Synchronize();
  summary->init_time_s = Seconds(start, Clock::now());
  DescribeRun(*summary);
  return Train(summary);
}

void ReportFinished(const RunSummary& summary, std::ostream& out) {
  out << "Finished: " << summary.losses.size() << (summary.losses.size() == 1 ? " step" : " steps");
  if (!summary.losses.empty()) out << ", first loss " << summary.losses.front() << ", last loss " << summary.losses.back();
  if (summary.peak_memory_bytes) {
    out << ", peak memory " << static_cast<double>(*summary.peak_memory_bytes) / (1 << 30) << " GiB ("
        << summary.peak_memory_source << ")";
  }
  out << "\n";
}

// The policy's estimate: EstimateFinetune over `ranks` with the config's sharding, for preference pairs with two
// rows a pair.
StatusOr<CellEstimate> EstimatePolicy(const TrainingRecipe& recipe, const Config& config, const Registry& registry,
                                      const DeviceInfo& device, int ranks) {
  Config rows = config;
  if (recipe.data == TrainingData::kPreferencePairs) {  // chosen and rejected: 2 x batch_size rows a micro-batch
    StatusOr<int64_t> batch = config.GetInt("batch_size");
    if (!batch.ok()) return batch.status();
    TM_RETURN_IF_ERROR(rows.ApplyOverrides({"batch_size=" + std::to_string(2 * *batch)}));
  }
  if (recipe.launch != RecipeLaunch::kRanks) return EstimateFinetune(rows, registry, device, recipe.kind);
  StatusOr<int64_t> shard_dim = config.GetInt("data_parallel_shard_dim");
  StatusOr<bool> reshard = config.GetBool("fsdp_reshard_after_forward");
  if (!shard_dim.ok()) return shard_dim.status();
  if (!reshard.ok()) return reshard.status();
  const Sharding sharding = *shard_dim == 1 ? Sharding::kNone : *reshard ? Sharding::kFull : Sharding::kGradients;
  return EstimateFinetune(rows, registry, device, recipe.kind, ranks, sharding);
}

// `check` on the loop's config (TrainingRecipe::loop_config), its problems at a renamed key moved to the config's.
CrossCheck OnLoopConfig(CrossCheck check, std::function<Config(const Config&)> view,
                        std::vector<std::pair<std::string, std::string>> renamed) {
  return [check = std::move(check), view = std::move(view), renamed = std::move(renamed)](
             const Config& config, const Registry& registry, const DeviceInfo* device) {
    std::vector<Problem> problems = check(view(config), registry, device);
    for (Problem& p : problems) {
      for (const auto& [loop_key, own_key] : renamed) {
        if (p.key != loop_key && p.key.rfind(loop_key + ".", 0) != 0) continue;
        p.key = own_key + p.key.substr(loop_key.size());
        p.where = config.OriginOf(p.key).ToString();
      }
    }
    return problems;
  };
}

}  // namespace

Status RunTraining(const TrainingRecipe& recipe, const Config& config, const RunContext& context) {
  if (context.registry != nullptr && VisionComponentOf(config, *context.registry) != nullptr) {
    return RunVisionTraining(recipe, config, context);  // a fusion model: its own loop (vision_training.h)
  }
  auto train = [&](Parallelism& parallel, RunSummary* summary) {
    Trainer trainer(recipe, config, context, *context.registry, &parallel);
    return trainer.Run(summary);
  };
  auto report = [&](const RunSummary& summary) { ReportFinished(summary, *context.out); };
  return RunInProcessOrRanks(config, context, recipe.name, recipe.launch == RecipeLaunch::kRanks,
                             "lower batch_size or enable_activation_checkpointing=True", train, report);
}

RecipeSpec TrainingRecipeSpec(TrainingRecipe recipe) {
  const bool distributed = recipe.launch == RecipeLaunch::kRanks;
  const TrainKind kind = recipe.kind;
  RecipeSpec r;
  r.name = recipe.name;
  r.doc = recipe.doc;
  r.launch = recipe.launch;
  r.task = RecipeTask::kTrain;
  r.trains = kind == TrainKind::kLora ? "lora" : "full";
  r.data = recipe.data == TrainingData::kPreferencePairs ? "preference_pairs"
            : recipe.data == TrainingData::kPrompts     ? "prompts"
                                                         : "samples";
  r.objective = recipe.objective_name;
  r.configs = ManifestConfigsOf(BuiltinConfigManifest(), r.name);
  r.fields = TrainingFields(kind, recipe.data);
  r.checks = {TrainingChecks, ModelSizeChecks};
  if (kind == TrainKind::kLora) r.checks.push_back(LoraChecks);
  if (distributed) {
    for (FieldSpec& f : DistributedFields(recipe.data)) r.fields.push_back(std::move(f));
    r.checks.push_back(DistributedChecks);
  }
  if (recipe.loop_config) {  // the shared checks read the loop's config, and name the config's keys
    for (CrossCheck& check : r.checks) check = OnLoopConfig(std::move(check), recipe.loop_config, recipe.renamed);
  }
  for (FieldSpec& f : recipe.fields) r.fields.push_back(std::move(f));
  for (CrossCheck& c : recipe.checks) r.checks.push_back(std::move(c));
  // Every input it lacks and every output it cannot write, named together before anything is built.
  r.missing_inputs = [kind, extra = recipe.extra_inputs, view = recipe.loop_config](const Config& config,
                                                                                    const Registry& registry) {
    const Config loop = view ? view(config) : config;
    std::vector<Problem> problems = MissingInputs(loop, registry);
    if (extra) {
      for (Problem& p : extra(config, registry)) problems.push_back(std::move(p));
    }
    for (Problem& p : OutputProblems(loop, registry, kind)) problems.push_back(std::move(p));
    return problems;
  };
  auto shared = std::make_shared<const TrainingRecipe>(std::move(recipe));
  r.estimate = [shared](const Config& config, const Registry& registry,
                        const DeviceInfo& device) -> StatusOr<CellEstimate> {
    const int ranks = shared->launch == RecipeLaunch::kRanks ? device.traits().matrix_ranks : 1;
    StatusOr<CellEstimate> e = EstimatePolicy(*shared, shared->loop_config ? shared->loop_config(config) : config,
                                              registry, device, ranks);
    if (!e.ok() || !shared->extra_estimate) return e;
    StatusOr<CellEstimate> extra = shared->extra_estimate(config, registry, device, ranks);
    if (!extra.ok()) return extra;
    e->peak_memory_bytes += extra->peak_memory_bytes;
    e->work += extra->work;
    e->parameters += extra->parameters;
    return e;
  };
  r.run = [shared](const Config& config, const RunContext& context) {
    return RunTraining(*shared, shared->loop_config ? shared->loop_config(config) : config, context);
  };
  if (shared->cell_overrides) {
    r.cell_overrides = shared->cell_overrides;
    return r;
  }
  // A cell: one epoch of `steps` optimizer steps of one micro-batch each, every step logged, nothing saved.
  r.cell_overrides = [](int steps) -> std::vector<std::string> {
    return {"epochs=1",          "max_steps_per_epoch=" + std::to_string(steps), "gradient_accumulation_steps=1",
            "log_every_n_steps=1", "save_checkpoints=False",                      "resume_from_checkpoint=False"};
  };
  return r;
}

}  // namespace tmx::recipes
