#include "recipes/finetune.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "base/cpu_usage.h"
#include "base/file_util.h"
#include "base/json_io.h"
#include "base/output_folder.h"
#include "base/text.h"
#include "harness/device_hooks.h"
#include "harness/run_summary.h"
#include "recipes/op_profile.h"
#include "harness/config_manifest.h"
#include "recipes/builtin.h"
#include "recipes/checkpointers.h"
#include "recipes/estimate.h"
#include "recipes/flops.h"
#include "recipes/loss.h"
#include "recipes/model_components.h"
#include "recipes/models/adapters_off.h"
#include "recipes/optimizer_in_backward.h"
#include "recipes/parallelism.h"
#include "recipes/run_progress.h"
#include "recipes/train_setup.h"

namespace tmx::recipes {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Learning rate multiplier at optimizer step `step` (0-based) of `total`: linear warm-up, then cosine.
double ScheduleFactor(int64_t step, int64_t total, int64_t warmup, double num_cycles) {
  if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(std::max<int64_t>(1, warmup));
  double progress = static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup));
  return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * num_cycles * 2.0 * progress)));
}

std::string FormatLr(double lr) {
  std::ostringstream s;
  s << std::scientific << std::setprecision(2) << lr;
  return s.str();
}

// torchtune's QAT recipes: qat_single_device and qat_distributed (full), qat_lora_finetune_distributed.
std::string QatRecipeName(TrainKind kind, bool distributed) {
  if (kind == TrainKind::kLora) return "qat_lora_finetune_distributed";
  return distributed ? "qat_distributed" : "qat_single_device";
}

std::string RecipeName(TrainKind kind, bool distributed, TrainObjective objective) {
  const std::string where = distributed ? "distributed" : "single_device";
  if (objective == TrainObjective::kDistill) return "knowledge_distillation_" + where;
  if (objective == TrainObjective::kDpo) return std::string(kind == TrainKind::kLora ? "lora_dpo_" : "full_dpo_") + where;
  return std::string(kind == TrainKind::kLora ? "lora_finetune_" : "full_finetune_") +
         (distributed ? "distributed" : "single_device");
}

// DPO's logged statistics over a step: sums over its pairs (one rank's, then every rank's), and their means under
// torchtune's names.
struct DpoSums {
  double pairs = 0, chosen = 0, rejected = 0, accurate = 0, chosen_logps = 0, rejected_logps = 0;

  template <typename Step>
  void Add(const Step& d) {
    pairs += static_cast<double>(d.terms.chosen_rewards.size(0));
    chosen += d.terms.chosen_rewards.sum().template item<double>();
    rejected += d.terms.rejected_rewards.sum().template item<double>();
    accurate += (d.terms.chosen_rewards > d.terms.rejected_rewards).sum().template item<double>();
    chosen_logps += d.policy_chosen.sum().template item<double>();
    rejected_logps += d.policy_rejected.sum().template item<double>();
  }
  // Every rank must call it.
  DpoSums OverRanks(const Parallelism& parallel) const {
    return {parallel.Sum(pairs),    parallel.Sum(chosen),       parallel.Sum(rejected),
            parallel.Sum(accurate), parallel.Sum(chosen_logps), parallel.Sum(rejected_logps)};
  }
  std::vector<std::pair<const char*, double>> Means() const {
    const double n = std::max(pairs, 1.0);
    return {{"rewards/chosen", chosen / n},          {"rewards/rejected", rejected / n},
            {"rewards/accuracies", accurate / n},    {"rewards/margins", (chosen - rejected) / n},
            {"log_probs/chosen", chosen_logps / n}, {"log_probs/rejected", rejected_logps / n}};
  }
};

class Trainer {
 public:
  Trainer(const Config& config, const RunContext& context, TrainKind kind, Parallelism* parallel,
          TrainObjective objective)
      : config_(config),
        context_(context),
        kind_(kind),
        objective_(objective),
        parallel_(*parallel),
        hooks_(HooksFor(context.device.type)),
        device_(parallel->LocalDevice(torch::Device(context.device.id))),
        out_(parallel->lead() ? context.out : &null_out_),
        progress_(out_) {}

  Status Run(RunSummary* summary);

 private:
  Status Setup(RunSummary* summary);
  Status SetupValidation(RunSummary* summary);
  Status SaveCheckpoint(int64_t epoch, int64_t global_step);
  Status Train(RunSummary* summary);
  // The mean loss over every token of the validation data (every rank's share), without training.
  double ValidationLoss();
  void Synchronize() const { hooks_.Synchronize(device_.has_index() ? device_.index() : context_.device.index); }
  // Knowledge distillation: the frozen teacher (teacher_model from teacher_checkpointer) on the trainer's device.
  Status SetupTeacher(RunSummary* summary);
  // DPO: the frozen reference (the policy with its adapters off for LoRA, else a second model from
  // ref_checkpointer) and the loss's options.
  Status SetupReference(RunSummary* summary);
  // DPO on a preference batch: one forward of the policy over its 2 x pairs rows, one of the reference without
  // gradient, and the DPO terms per pair (recipes/loss.h) with the policy's log-probabilities.
  struct DpoStep {
    DpoTerms terms;
    torch::Tensor policy_chosen, policy_rejected;  // detached, [pairs]
  };
  DpoStep Dpo(const data::Batch& batch) {
    const torch::Tensor tokens = batch.tokens.to(device_), labels = batch.labels.to(device_);
    const torch::Tensor policy = SequenceLogProbs(model_.model->forward(tokens), labels);
    torch::Tensor reference;
    {
      torch::NoGradGuard no_grad;
      if (reference_) {
        reference = SequenceLogProbs(reference_->forward(tokens), labels);
      } else {
        models::AdaptersOff off(*model_.model);
        reference = SequenceLogProbs(model_.model->forward(tokens), labels);
      }
    }
    const int64_t n = batch.pairs;
    DpoStep step;
    step.terms = DpoLoss(policy.narrow(0, 0, n), policy.narrow(0, n, n), reference.narrow(0, 0, n),
                         reference.narrow(0, n, n), dpo_);
    step.policy_chosen = policy.narrow(0, 0, n).detach();
    step.policy_rejected = policy.narrow(0, n, n).detach();
    return step;
  }
  // The model's next-token loss on `batch`, on the trainer's device (recipes/loss.h); with a teacher,
  // torchtune's (1 - kd_ratio) x cross-entropy + kd_ratio x forward KL to the teacher's next-token distribution.
  torch::Tensor Loss(const data::Batch& batch) {
    // Packed batches carry each token's position in its document and the document ids (else undefined).
    torch::Tensor input_pos = batch.input_pos.defined() ? batch.input_pos.to(device_) : batch.input_pos;
    torch::Tensor docs = batch.document_ids.defined() ? batch.document_ids.to(device_) : batch.document_ids;
    const torch::Tensor tokens = batch.tokens.to(device_), labels = batch.labels.to(device_);
    if (!teacher_) return ModelNextTokenLoss(*model_.model, tokens, labels, input_pos, docs);
    const torch::Tensor logits = model_.model->forward(tokens, input_pos, docs);
    torch::Tensor teacher_logits;
    {
      torch::NoGradGuard no_grad;
      teacher_logits = teacher_->forward(tokens, input_pos, docs);
    }
    return NextTokenDistillationLoss(logits, teacher_logits, labels, kd_ratio_);
  }
  // The tokens the loss averages over: every label but the first of each row, and not masked.
  static double LossTokens(const data::Batch& batch) {
    return static_cast<double>(batch.labels.slice(1, 1).ne(data::kIgnoreIndex).sum().item<int64_t>());
  }
  double SumOverRanks(double v) const { return parallel_.Sum(v); }
  // This rank's model FLOPs of one micro-batch (recipes/flops.h): the policy's forward and backward over the
  // batch's padded shape, and a teacher's or a DPO reference's forward.
  double MicroBatchFlops(const data::Batch& batch) const {
    const int64_t rows = batch.tokens.size(0), length = batch.tokens.size(1);
    const FlopModel policy{model_.choice.args, model_.choice.lora};
    double flops = TrainingFlops(policy, rows, length);
    if (teacher_flops_) flops += ForwardFlops(*teacher_flops_, rows, length);
    if (objective_ == TrainObjective::kDpo) flops += ForwardFlops({model_.choice.args, std::nullopt}, rows, length);
    return flops;
  }

  const Config& config_;
  const RunContext& context_;
  TrainKind kind_;
  TrainObjective objective_;
  models::Decoder teacher_{nullptr};  // with kDistill
  std::optional<FlopModel> teacher_flops_;  // the teacher's shape, for MicroBatchFlops
  double kd_ratio_ = 0;
  models::Decoder reference_{nullptr};  // full DPO's frozen reference (LoRA DPO turns the adapters off instead)
  DpoLossOptions dpo_;
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
  const Registry& registry = BuiltinRegistry();
  StatusOr<TrainingSettings> settings = ReadTrainingSettings(config_, kind_);
  TM_RETURN_IF_ERROR(settings.status());
  settings_ = *settings;
  format_ = CheckpointFormatOf(config_, registry);
  settings_.world_size = parallel_.world_size();
  settings_.rank = parallel_.rank();
  summary->world_size = parallel_.world_size();
  // tune run checks the outputs before starting (missing_inputs); a run started otherwise (stand-ins allowed,
  // a test) still stops here, before building anything.
  std::vector<Problem> problems = OutputProblems(config_, registry, kind_);
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

  StatusOr<TrainableModel> model =
      SetupModel(config_, registry, kind_, settings_, device_, context_.allow_stand_ins, &summary->stand_ins,
                 &progress_);
  TM_RETURN_IF_ERROR(model.status());
  model_ = std::move(*model);
  summary->total_parameters = model_.total_parameters;
  summary->trainable_parameters = model_.trainable_parameters;
  if (objective_ == TrainObjective::kDistill) TM_RETURN_IF_ERROR(SetupTeacher(summary));
  if (objective_ == TrainObjective::kDpo) TM_RETURN_IF_ERROR(SetupReference(summary));

  auto component = [this](const char* key) {
    YAML::Node node = config_.Find(std::string(key) + "._component_");
    return node.IsScalar() ? node.Scalar() : std::string(key);
  };
  progress_.Begin("Loading the data (" + component("tokenizer") + ", " + component("dataset") + ")");
  StatusOr<data::DataLoader> loader =
      objective_ == TrainObjective::kDpo
          ? SetupPreferenceData(config_, settings_, model_.choice.args, context_.allow_stand_ins, &summary->stand_ins)
          : SetupData(config_, settings_, model_.choice.args, context_.allow_stand_ins, &summary->stand_ins);
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

  auto load_weights = [this](const std::string& dir) {
    return LoadEpochWeights(dir, format_, model_.choice, *model_.model);
  };
  // Resuming reads the checkpoint before any weights are sharded: the weights into the model, the optimizer
  // state per parameter (the checkpoint's format), which goes to the optimizer once it exists.
  OptimizerPtr resumed;
  if (settings_.resume) {
    StatusOr<OptimizerPtr> per_param = SetupOptimizer(config_, registry, model_.trained_tensors);
    TM_RETURN_IF_ERROR(per_param.status());
    resumed = std::move(*per_param);
    StatusOr<ResumePoint> point = LoadTrainState(settings_.checkpoint_dir, config_, model_.trained, *resumed,
                                                 kind_ == TrainKind::kLora, load_weights);
    TM_RETURN_IF_ERROR(point.status());
    start_epoch_ = point->next_epoch;
    steps_.start_epoch = start_epoch_;
    *out_ << "Resuming from " << point->directory << " at epoch " << start_epoch_ << "\n";
  }
  StatusOr<std::vector<at::Tensor>> stepped = parallel_.Wrap(config_, model_);
  TM_RETURN_IF_ERROR(stepped.status());
  TM_RETURN_IF_ERROR(SetupValidation(summary));
  StatusOr<OptimizerPtr> optimizer = SetupOptimizer(config_, registry, *stepped);
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
  if (profiler->enabled) profiler_.emplace(*profiler, c10::DeviceTypeName(device_.type(), /*lower_case=*/true), parallel_.rank());
  return Status::OK();
}

Status Trainer::SetupTeacher(RunSummary* summary) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<double> ratio = config_.GetDouble("kd_ratio");
  TM_RETURN_IF_ERROR(ratio.status());
  kd_ratio_ = *ratio;
  StatusOr<ModelChoice> choice = ModelFromConfig(config_, registry, "teacher_model");
  TM_RETURN_IF_ERROR(choice.status());
  if (choice->args.vocab_size != model_.choice.args.vocab_size) {
    return Status::InvalidArgument(
        config_.OriginOf("teacher_model._component_").ToString() + ": teacher_model: '" + choice->component +
        "' has a vocabulary of " + std::to_string(choice->args.vocab_size) + " ids and the student '" +
        model_.choice.component + "' one of " + std::to_string(model_.choice.args.vocab_size) +
        "; the forward KL compares their distributions id by id, so use a teacher of the student's family");
  }
  const int64_t total = CountModelParameters(*choice).total;
  progress_.Begin("Building teacher " + choice->component + " (" + FormatCount(total) + " parameters)");
  teacher_ = models::Decoder(choice->args, choice->lora, c10::TensorOptions().dtype(settings_.dtype).device(device_));
  progress_.End("Built the teacher");
  TM_RETURN_IF_ERROR(LoadStartingWeights(config_, registry, *choice, *teacher_, context_.allow_stand_ins,
                                         &summary->stand_ins, {}, "teacher_checkpointer"));
  teacher_->eval();
  teacher_flops_ = FlopModel{choice->args, choice->lora};
  summary->total_parameters += total;
  return Status::OK();
}

Status Trainer::SetupReference(RunSummary* summary) {
  StatusOr<double> beta = config_.GetDouble("loss.beta");
  StatusOr<double> smoothing = config_.GetDouble("loss.label_smoothing");
  TM_RETURN_IF_ERROR(beta.status());
  TM_RETURN_IF_ERROR(smoothing.status());
  dpo_.beta = *beta;
  dpo_.label_smoothing = *smoothing;
  if (kind_ == TrainKind::kLora) return Status::OK();  // the policy with its adapters off
  const Registry& registry = BuiltinRegistry();
  const ModelChoice& choice = model_.choice;
  progress_.Begin("Building the reference " + choice.component + " (" + FormatCount(model_.total_parameters) +
                  " parameters)");
  // Drawn as the policy was (from the seed), so without a checkpoint the reference starts as the policy does.
  torch::manual_seed(settings_.seed);
  reference_ = models::Decoder(choice.args, choice.lora, c10::TensorOptions().dtype(settings_.dtype).device(device_));
  progress_.End("Built the reference");
  TM_RETURN_IF_ERROR(LoadStartingWeights(config_, registry, choice, *reference_, context_.allow_stand_ins,
                                         &summary->stand_ins, {}, "ref_checkpointer"));
  for (torch::Tensor& p : reference_->parameters()) p.set_requires_grad(false);
  reference_->eval();
  summary->total_parameters += model_.total_parameters;
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
    StatusOr<OptimizerPtr> made = SetupOptimizer(config_, BuiltinRegistry(), model_.trained_tensors);
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
                                      kind_ == TrainKind::kLora, {epoch + 1, global_step, s.seed}));
    progress_.End("Saved checkpoint " + dir + " (" + FormatBytes(FolderFileBytes(dir)) + ")");
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
    const double local = LossTokens(batch);
    torch::Tensor loss = Loss(batch);  // every rank runs the model: fully sharded layers gather together
    if (local > 0) loss_sum += loss.item<double>() * local;
    count += local;
  }
  model_.model->train();
  const double total = SumOverRanks(count);
  return total > 0 ? SumOverRanks(loss_sum) / total : std::nan("");
}

Status Trainer::Train(RunSummary* summary) {
  const TrainingSettings& s = settings_;
  int64_t total_steps = s.epochs * steps_per_epoch_;
  int64_t global_step = start_epoch_ * steps_per_epoch_;
  const int64_t first_step = global_step;
  progress_.StartSteps(steps_.total_steps());
  model_.model->train();
  for (int64_t epoch = start_epoch_; epoch < s.epochs; ++epoch) {
    for (int64_t step = 0; step < steps_per_epoch_; ++step) {
      if (s.fake_quant_after_n_steps) {  // torchtune's fake_quant_after_n_steps: plain steps first
        const bool on = global_step >= *s.fake_quant_after_n_steps;
        models::EnableFakeQuantization(*model_.model, on);
        if (global_step == first_step || global_step == *s.fake_quant_after_n_steps) {
          progress_.Line("step " + std::to_string(global_step + 1) + ": fake quantisation " +
                         (on ? "on" : "off until step " + std::to_string(*s.fake_quant_after_n_steps + 1)) +
                         " (fake_quant_after_n_steps=" + std::to_string(*s.fake_quant_after_n_steps) + ")");
        }
      }
      double lr = base_lr_ * (s.has_schedule ? ScheduleFactor(global_step, total_steps, s.warmup_steps, s.num_cycles)
                                             : 1.0);
      SetLearningRate(*optimizer_, lr);
      Synchronize();
      if (profiler_) TM_RETURN_IF_ERROR(profiler_->BeforeStep(global_step - first_step));
      auto t0 = Clock::now();
      parallel_.ZeroGrad(*optimizer_);
      double loss_sum = 0;
      int64_t tokens = 0;
      double flops = 0;
      DpoSums dpo;  // this rank's, over the step's micro-batches
      for (int64_t micro = 0; micro < s.gradient_accumulation_steps; ++micro) {
        int64_t batch_index = epoch * loader_->size() + step * s.gradient_accumulation_steps + micro;
        data::Batch batch = loader_->BatchAtStep(batch_index);
        // What the loss is averaged over (tokens; DPO: pairs), on every rank: each rank's share of the mean is
        // its count over the global count.
        const bool pairs = objective_ == TrainObjective::kDpo;
        const double local_count = pairs ? static_cast<double>(batch.pairs) : LossTokens(batch);
        const double global_count = SumOverRanks(local_count);
        if (global_count == 0) {
          // The loss of a batch with nothing to learn is 0/0; say why instead of reporting a NaN.
          summary->error_kind = "no_trained_tokens";
          return Status::InvalidArgument(
              "step " + std::to_string(global_step + 1) + ": every label of the batch is masked, so there is no " +
              "token to train on (prompts longer than tokenizer.max_seq_len leave no response); fix: raise " +
              "tokenizer.max_seq_len or set dataset.train_on_input=True");
        }
        torch::Tensor loss;
        if (pairs) {
          DpoStep d = Dpo(batch);
          loss = d.terms.losses.mean();
          dpo.Add(d);
        } else {
          loss = Loss(batch);
        }
        if (local_count > 0) {
          const double share = local_count / global_count;
          (loss * (share / static_cast<double>(s.gradient_accumulation_steps))).backward();
          loss_sum += SumOverRanks(loss.item<double>() * share);
        } else {
          loss_sum += SumOverRanks(0.0);  // nothing to learn on this rank; the others still sum with it
        }
        // Every non-padding token the model processed (on every rank), as torchtune counts.
        tokens += static_cast<int64_t>(SumOverRanks(static_cast<double>(batch.num_tokens)));
        flops += SumOverRanks(MicroBatchFlops(batch));
      }
      double loss_value = loss_sum / static_cast<double>(s.gradient_accumulation_steps);
      if (!std::isfinite(loss_value)) {
        summary->error_kind = "non_finite_loss";
        return Status::Internal("non-finite loss (" + std::to_string(loss_value) + ") at step " +
                                std::to_string(global_step + 1) + "; lower optimizer.lr or use dtype=fp32");
      }
      if (objective_ == TrainObjective::kDpo) dpo = dpo.OverRanks(parallel_);  // every rank, logged or not
      std::optional<double> grad_norm;
      if (in_backward_ == nullptr) {  // else every tensor was stepped, and its gradient freed, inside backward
        // The first step's norm is always taken, for the numeric check (RunSummary::first_grad_norm): clipping
        // at infinity scales every gradient by exactly 1.
        std::optional<double> clip = s.clip_grad_norm;
        if (!clip && global_step == first_step) clip = std::numeric_limits<double>::infinity();
        grad_norm = parallel_.ReduceAndClip(clip);
        if (global_step == first_step) summary->first_grad_norm = grad_norm;
        optimizer_->step();
      }
      parallel_.AfterStep();
      Synchronize();
      double step_time = Seconds(t0, Clock::now());
      if (profiler_) {
        StatusOr<bool> wrote = profiler_->AfterStep(global_step - first_step, step_time);
        TM_RETURN_IF_ERROR(wrote.status());
        if (*wrote) {
          progress_.Line("Profile of " + profiler_->settings().DescribeSteps() + ": " +
                         SummarizeOpProfile(profiler_->Profile()) + "; by operation in " + profiler_->TextPath());
        }
      }
      ++global_step;
      summary->step_times_s.push_back(step_time);
      summary->losses.push_back(loss_value);
      summary->step_tokens.push_back(tokens);
      summary->step_flops.push_back(flops);
      const bool logged = global_step % s.log_every_n_steps == 0 || step + 1 == steps_per_epoch_;
      if (parallel_.lead() && logged) {
        nlohmann::json record = {{"step", global_step},  {"epoch", epoch},
                                 {"loss", loss_value},   {"lr", lr},
                                 {"tokens", tokens},     {"tokens_per_second", tokens / step_time},
                                 {"step_time_s", step_time}};
        if (grad_norm) record["grad_norm"] = *grad_norm;
        if (objective_ == TrainObjective::kDpo) {
          for (const auto& [name, value] : dpo.Means()) record[name] = value;
        }
        std::optional<MemoryReading> peak = s.log_peak_memory ? PeakMemory(context_.device) : std::nullopt;
        if (peak) record["peak_memory_gib"] = static_cast<double>(peak->bytes) / (1 << 30);
        TM_RETURN_IF_ERROR(AppendLineDurably(s.metrics_path, DumpJson(record)));
        std::ostringstream line;
        line << "epoch " << epoch + 1 << " step " << global_step << " | loss " << std::fixed << std::setprecision(4)
             << loss_value << " | lr " << FormatLr(lr) << " | tok/s " << std::setprecision(0) << tokens / step_time;
        if (grad_norm) line << " | grad_norm " << std::setprecision(3) << *grad_norm;
        if (objective_ == TrainObjective::kDpo) {
          for (const auto& [name, value] : dpo.Means()) line << " | " << name << " " << std::setprecision(4) << value;
        }
        if (peak) {
          line << " | peak_mem " << std::setprecision(3) << static_cast<double>(peak->bytes) / (1 << 30) << " GiB";
        }
        line << " | " << progress_.StepTiming(global_step - first_step);
        progress_.Line(line.str());
      } else if (parallel_.lead() && progress_.StepLineDue()) {
        // A long step that is not logged: still a line, so a slow run is never silent for long.
        progress_.Line("epoch " + std::to_string(epoch + 1) + " step " + std::to_string(global_step) + " | step " +
                       FormatSeconds(step_time) + " | " + progress_.StepTiming(global_step - first_step));
      }
      if (val_every_ > 0 && global_step % val_every_ == 0) {
        const double val_loss = ValidationLoss();  // every rank takes part
        if (parallel_.lead()) {
          nlohmann::json record = {{"step", global_step}, {"epoch", epoch}, {"val_loss", val_loss}};
          TM_RETURN_IF_ERROR(AppendLineDurably(s.metrics_path, DumpJson(record)));
          std::ostringstream line;
          line << "epoch " << epoch + 1 << " step " << global_step << " | val_loss " << std::fixed
               << std::setprecision(4) << val_loss;
          progress_.Line(line.str());
        }
      }
    }
    if (s.save_checkpoints) TM_RETURN_IF_ERROR(SaveCheckpoint(epoch, global_step));
  }
  return Status::OK();
}

Status Trainer::Run(RunSummary* summary) {
  *out_ << ChooseThreads() << "\n";
  summary->threads = at::get_num_threads();
  auto start = Clock::now();
  TM_RETURN_IF_ERROR(Setup(summary));
  summary->dtype = DtypeConfigName(settings_.dtype);
  Synchronize();
  summary->init_time_s = Seconds(start, Clock::now());
  for (const std::string& s : summary->stand_ins) *out_ << "Stand-in: " << s << "\n";
  *out_ << "Training " << context_.config_name << " on " << device_ << " (" << context_.device.name
        << "): " << summary->trainable_parameters << " of " << summary->total_parameters << " parameters trainable, "
        << steps_per_epoch_ << (steps_per_epoch_ == 1 ? " step" : " steps") << " per epoch, seed " << settings_.seed
        << parallel_.Describe()
        << (in_backward_ ? ", optimizer stepped inside backward (optimizer_in_bwd: gradients freed as they arrive)" : "")
        << std::endl;
  if (settings_.fake_quant_group_size > 0) {
    progress_.Line("Quantisation-aware training: " + std::to_string(model_.fake_quantized_linears) +
                   " linears compute with int8 per-token activations and int4 weights in groups of " +
                   std::to_string(settings_.fake_quant_group_size) + " (fake-quantised, trained in " +
                   DtypeConfigName(settings_.dtype) + ")");
  }
  progress_.Line(DescribeSteps(steps_));
  if (profiler_) {
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
  return Train(summary);
}

}  // namespace

Status RunFinetune(const Config& config, const RunContext& context, TrainKind kind, bool distributed,
                   TrainObjective objective) {
  auto train = [&](Parallelism& parallel, RunSummary* summary) {
    Trainer trainer(config, context, kind, &parallel, objective);
    return trainer.Run(summary);
  };
  auto report = [&](const RunSummary& summary) {
    std::ostream& out = *context.out;
    out << "Finished: " << summary.losses.size() << (summary.losses.size() == 1 ? " step" : " steps");
    if (!summary.losses.empty()) out << ", first loss " << summary.losses.front() << ", last loss " << summary.losses.back();
    if (summary.peak_memory_bytes) {
      out << ", peak memory " << static_cast<double>(*summary.peak_memory_bytes) / (1 << 30) << " GiB ("
          << summary.peak_memory_source << ")";
    }
    out << "\n";
  };
  // Only the QAT recipes' schemas have a quantizer key.
  const std::string name =
      config.IsNull("quantizer") ? RecipeName(kind, distributed, objective) : QatRecipeName(kind, distributed);
  return RunInProcessOrRanks(config, context, name, distributed,
                             "lower batch_size or enable_activation_checkpointing=True", train, report);
}

RecipeSpec FinetuneRecipe(TrainKind kind, RecipeLaunch launch) {
  const bool distributed = launch == RecipeLaunch::kRanks;
  RecipeSpec r;
  bool lora = kind == TrainKind::kLora;
  r.name = RecipeName(kind, distributed, TrainObjective::kNextToken);
  if (distributed) {
    r.doc = lora ? "LoRA fine-tuning across ranks (tune run --nproc_per_node N): data parallel, adapters' gradients "
                   "and optimizer state sharded"
                 : "full fine-tuning across ranks (tune run --nproc_per_node N): data parallel, gradients and "
                   "optimizer state sharded";
  } else {
    r.doc = lora ? "LoRA fine-tuning on one device: base weights frozen, low-rank adapters trained"
                 : "full fine-tuning of every weight on one device";
  }
  r.launch = launch;
  r.configs = ManifestConfigsOf(BuiltinConfigManifest(), r.name);
  r.fields = TrainingFields(kind);
  r.checks = {TrainingChecks, ModelSizeChecks};
  if (kind == TrainKind::kLora) r.checks.push_back(LoraChecks);
  // Every input it lacks and every output it cannot write, named together before anything is built.
  r.missing_inputs = [kind](const Config& config, const Registry& registry) {
    std::vector<Problem> problems = MissingInputs(config, registry);
    for (Problem& p : OutputProblems(config, registry, kind)) problems.push_back(std::move(p));
    return problems;
  };
  if (distributed) {
    for (FieldSpec& f : DistributedFields()) r.fields.push_back(std::move(f));
    r.checks.push_back(DistributedChecks);
  }
  r.run = [kind, distributed](const Config& config, const RunContext& context) {
    return RunFinetune(config, context, kind, distributed);
  };
  r.estimate = [kind, distributed](const Config& config, const Registry& registry, const DeviceInfo& device) {
    if (!distributed) return EstimateFinetune(config, registry, device, kind);
    StatusOr<int64_t> shard_dim = config.GetInt("data_parallel_shard_dim");
    StatusOr<bool> reshard = config.GetBool("fsdp_reshard_after_forward");
    if (!shard_dim.ok()) return StatusOr<CellEstimate>(shard_dim.status());
    if (!reshard.ok()) return StatusOr<CellEstimate>(reshard.status());
    const Sharding sharding = *shard_dim == 1 ? Sharding::kNone : *reshard ? Sharding::kFull : Sharding::kGradients;
    return EstimateFinetune(config, registry, device, kind, device.traits().matrix_ranks, sharding);
  };
  // A cell: one epoch of `steps` optimizer steps of one micro-batch each, every step logged, nothing saved.
  r.cell_overrides = [](int steps) -> std::vector<std::string> {
    return {"epochs=1",          "max_steps_per_epoch=" + std::to_string(steps), "gradient_accumulation_steps=1",
            "log_every_n_steps=1", "save_checkpoints=False",                      "resume_from_checkpoint=False"};
  };
  return r;
}

RecipeSpec KnowledgeDistillationRecipe(RecipeLaunch launch) {
  const bool distributed = launch == RecipeLaunch::kRanks;
  RecipeSpec r = FinetuneRecipe(TrainKind::kLora, launch);
  r.name = RecipeName(TrainKind::kLora, distributed, TrainObjective::kDistill);
  r.doc = std::string("knowledge distillation") + (distributed ? " across ranks" : " on one device") +
          ": LoRA adapters of a student trained on (1 - kd_ratio) x cross-entropy + kd_ratio x the forward KL to a "
          "frozen teacher's next-token distribution";
  r.configs = ManifestConfigsOf(BuiltinConfigManifest(), r.name);
  r.fields.push_back(ComponentField("teacher_model", "model", "the frozen teacher; its vocabulary is the student's"));
  r.fields.push_back(
      ComponentField("teacher_checkpointer", "checkpointer", "where the teacher's weights are loaded from", false));
  r.fields.push_back(ComponentField("kd_loss", "kd_loss", "the distillation loss (torchtune's forward KL)"));
  r.fields.push_back(AtMost(AtLeast(Field("kd_ratio", FieldType::kFloat, "0.5",
                                          "weight of the distillation loss; the cross-entropy gets 1 - kd_ratio"),
                                    0),
                            1));
  r.checks.push_back([](const Config& config, const Registry& registry, const DeviceInfo*) -> std::vector<Problem> {
    StatusOr<ModelChoice> student = ModelFromConfig(config, registry);
    StatusOr<ModelChoice> teacher = ModelFromConfig(config, registry, "teacher_model");
    if (!student.ok() || !teacher.ok() || student->args.vocab_size == teacher->args.vocab_size) return {};
    return {{config.OriginOf("teacher_model").ToString(), "teacher_model",
             "the teacher's vocabulary (" + std::to_string(teacher->args.vocab_size) + " ids) is not the student's (" +
                 std::to_string(student->args.vocab_size) +
                 "); the forward KL compares their distributions id by id, so use a teacher of the student's family"}};
  });
  r.missing_inputs = [](const Config& config, const Registry& registry) {
    std::vector<Problem> problems = MissingInputs(config, registry);
    for (Problem& p : MissingCheckpointFiles(config, registry, "teacher_checkpointer", "teacher_model")) {
      problems.push_back(std::move(p));
    }
    for (Problem& p : OutputProblems(config, registry, TrainKind::kLora)) problems.push_back(std::move(p));
    return problems;
  };
  const CellEstimator student = r.estimate;
  r.estimate = [student, distributed](const Config& config, const Registry& registry, const DeviceInfo& device) {
    StatusOr<CellEstimate> e = student(config, registry, device);
    if (!e.ok()) return e;
    StatusOr<CellEstimate> teacher =
        EstimateTeacher(config, registry, device, distributed ? device.traits().matrix_ranks : 1);
    if (!teacher.ok()) return teacher;
    e->peak_memory_bytes += teacher->peak_memory_bytes;
    e->work += teacher->work;
    e->parameters += teacher->parameters;
    return e;
  };
  r.run = [distributed](const Config& config, const RunContext& context) {
    return RunFinetune(config, context, TrainKind::kLora, distributed, TrainObjective::kDistill);
  };
  return r;
}

RecipeSpec DpoRecipe(TrainKind kind, RecipeLaunch launch) {
  const bool distributed = launch == RecipeLaunch::kRanks;
  const bool lora = kind == TrainKind::kLora;
  RecipeSpec r = FinetuneRecipe(kind, launch);
  r.name = RecipeName(kind, distributed, TrainObjective::kDpo);
  r.doc = std::string(lora ? "LoRA" : "full") + " direct preference optimization (DPO)" +
          (distributed ? " across ranks" : " on one device") +
          ": chosen/rejected pairs of a preference dataset, the policy's log-probabilities against a frozen " +
          (lora ? "reference (the model with its adapters off)" : "reference (ref_checkpointer)");
  r.configs = ManifestConfigsOf(BuiltinConfigManifest(), r.name);
  // No validation pass (torchtune's DPO recipes have none); the data are pairs and the loss is DPO's.
  std::vector<FieldSpec> fields;
  for (FieldSpec& f : r.fields) {
    if (f.name == "dataset_val" || f.name == "run_val_every_n_steps" || f.name == "batch_size_val") continue;
    if (f.name == "dataset") {
      f = ComponentField("dataset", "preference_dataset",
                         "the preference data: chosen and rejected responses to each prompt (hh_rlhf_helpful_dataset, "
                         "stack_exchange_paired_dataset)");
    } else if (f.name == "loss") {
      f = ComponentField("loss", "preference_loss", "the preference loss (torchtune's rlhf.loss.DPOLoss)");
    } else if (f.name == "batch_size") {
      f.doc = "preference pairs per micro-batch (each pair is two rows: chosen and rejected)";
    }
    fields.push_back(std::move(f));
  }
  r.fields = std::move(fields);
  if (!lora) {
    r.fields.push_back(ComponentField(
        "ref_checkpointer", "checkpointer",
        "the frozen reference's weights, the model component's (full DPO compares the policy with it; usually "
        "the same checkpoint_dir and files as checkpointer)"));
  }
  r.missing_inputs = [kind](const Config& config, const Registry& registry) {
    std::vector<Problem> problems = MissingInputs(config, registry);
    if (kind == TrainKind::kFull) {
      for (Problem& p : MissingCheckpointFiles(config, registry, "ref_checkpointer", "model")) {
        problems.push_back(std::move(p));
      }
    }
    for (Problem& p : OutputProblems(config, registry, kind)) problems.push_back(std::move(p));
    return problems;
  };
  r.estimate = [kind, distributed](const Config& config, const Registry& registry, const DeviceInfo& device) {
    // The policy trains on 2 x batch_size rows a micro-batch.
    Config pairs = config;
    StatusOr<int64_t> batch = config.GetInt("batch_size");
    if (!batch.ok()) return StatusOr<CellEstimate>(batch.status());
    Status doubled = pairs.ApplyOverrides({"batch_size=" + std::to_string(2 * *batch)});
    if (!doubled.ok()) return StatusOr<CellEstimate>(doubled);
    const int ranks = distributed ? device.traits().matrix_ranks : 1;
    StatusOr<CellEstimate> e = EstimateFinetune(pairs, registry, device, kind);
    if (distributed) {
      StatusOr<int64_t> shard_dim = config.GetInt("data_parallel_shard_dim");
      StatusOr<bool> reshard = config.GetBool("fsdp_reshard_after_forward");
      if (!shard_dim.ok()) return StatusOr<CellEstimate>(shard_dim.status());
      if (!reshard.ok()) return StatusOr<CellEstimate>(reshard.status());
      const Sharding sharding = *shard_dim == 1 ? Sharding::kNone : *reshard ? Sharding::kFull : Sharding::kGradients;
      e = EstimateFinetune(pairs, registry, device, kind, ranks, sharding);
    }
    if (!e.ok()) return e;
    StatusOr<CellEstimate> reference = EstimateDpoReference(config, registry, device, kind == TrainKind::kFull, ranks);
    if (!reference.ok()) return reference;
    e->peak_memory_bytes += reference->peak_memory_bytes;
    e->work += reference->work;
    e->parameters += reference->parameters;
    return e;
  };
  r.run = [kind, distributed](const Config& config, const RunContext& context) {
    return RunFinetune(config, context, kind, distributed, TrainObjective::kDpo);
  };
  return r;
}

RecipeSpec QatRecipe(TrainKind kind, RecipeLaunch launch) {
  const bool distributed = launch == RecipeLaunch::kRanks;
  RecipeSpec r = FinetuneRecipe(kind, launch);
  r.name = QatRecipeName(kind, distributed);
  r.doc = std::string("quantisation-aware training: ") +
          (kind == TrainKind::kLora ? "LoRA fine-tuning whose adapted linears" : "full fine-tuning whose linears") +
          " compute with fake-quantised int8 activations and int4 weights (torchao's 8da4w), " +
          (distributed ? "across ranks" : "on one device") + "; the saved model is unquantised";
  r.configs = ManifestConfigsOf(BuiltinConfigManifest(), r.name);
  r.fields.push_back(ComponentField("quantizer", "qat_quantizer",
                                    "the fake quantisation (torchao's Int8DynActInt4WeightQATQuantizer)"));
  r.fields.push_back(Nullable(AtLeast(Field("fake_quant_after_n_steps", FieldType::kInt, "null",
                                            "optimizer steps trained without fake quantisation first; null: none"),
                                      0)));
  r.checks.push_back([kind](const Config& config, const Registry& registry, const DeviceInfo*) {
    return FakeQuantizationProblems(config, registry, kind == TrainKind::kLora);
  });
  const CellEstimator base = r.estimate;
  r.estimate = [base, kind, distributed](const Config& config, const Registry& registry, const DeviceInfo& device) {
    StatusOr<CellEstimate> e = base(config, registry, device);
    if (!e.ok()) return e;
    StatusOr<double> extra = EstimateFakeQuantizationBytes(config, registry, device, kind,
                                                           distributed ? device.traits().matrix_ranks : 1);
    if (!extra.ok()) return StatusOr<CellEstimate>(extra.status());
    e->peak_memory_bytes += static_cast<int64_t>(std::min(*extra, 0x1p61));
    return e;
  };
  return r;
}

}  // namespace tmx::recipes
