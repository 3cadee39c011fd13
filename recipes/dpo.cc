#include "recipes/dpo.h"

#include <algorithm>

#include <torch/torch.h>

#include "base/text.h"
#include "recipes/checkpointers.h"
#include "recipes/estimate.h"
#include "recipes/flops.h"
#include "recipes/loss.h"
#include "recipes/model_components.h"
#include "recipes/models/adapters_off.h"
#include "recipes/trainer.h"

namespace tmx::recipes {
namespace {

// The logged statistics over a step: sums over its pairs (one rank's, then every rank's), and their means under
// torchtune's names.
struct DpoSums {
  double pairs = 0, chosen = 0, rejected = 0, accurate = 0, chosen_logps = 0, rejected_logps = 0;

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

class Dpo : public Objective {
 public:
  explicit Dpo(TrainKind kind) : kind_(kind) {}
  Status Setup(const TrainingSetup& setup, RunSummary* summary) override;
  StatusOr<data::DataLoader> LoadData(const TrainingSetup& setup, RunSummary* summary) override {
    return SetupPreferenceData(setup.config, setup.settings, setup.model.choice.args, setup.context.allow_stand_ins,
                               &summary->stand_ins);
  }
  double LossCount(const data::Batch& batch) const override { return static_cast<double>(batch.pairs); }
  torch::Tensor Loss(const data::Batch& batch) override;
  double ExtraFlops(int64_t rows, int64_t length) const override {
    return ForwardFlops({args_, std::nullopt}, rows, length);  // the reference's forward
  }
  void StartStep() override { sums_ = {}; }
  void EndStep(const Parallelism& parallel) override { sums_ = sums_.OverRanks(parallel); }
  std::vector<std::pair<const char*, double>> StepMetrics() const override { return sums_.Means(); }

 private:
  // The reference's summed log-probabilities of `tokens`' rows, without gradient.
  torch::Tensor ReferenceLogProbs(const torch::Tensor& tokens, const torch::Tensor& labels);

  TrainKind kind_;
  models::DecoderArgs args_;
  models::Decoder reference_{nullptr};  // full DPO's frozen reference (LoRA DPO turns the adapters off instead)
  DpoLossOptions options_;
  DpoSums sums_;  // this step's: this rank's over its micro-batches, then every rank's
};

// The loss's options, and for full DPO the frozen reference.
Status Dpo::Setup(const TrainingSetup& setup, RunSummary* summary) {
  TM_RETURN_IF_ERROR(Objective::Setup(setup, summary));
  const Config& config = setup.config;
  args_ = setup.model.choice.args;
  StatusOr<double> beta = config.GetDouble("loss.beta");
  StatusOr<double> smoothing = config.GetDouble("loss.label_smoothing");
  TM_RETURN_IF_ERROR(beta.status());
  TM_RETURN_IF_ERROR(smoothing.status());
  options_.beta = *beta;
  options_.label_smoothing = *smoothing;
  if (kind_ == TrainKind::kLora) return Status::OK();  // the policy with its adapters off
  const ModelChoice& choice = setup.model.choice;
  setup.progress.Begin("Building the reference " + choice.component + " (" +
                       FormatCount(setup.model.total_parameters) + " parameters)");
  // Drawn as the policy was (from the seed), so without a checkpoint the reference starts as the policy does.
  torch::manual_seed(setup.settings.seed);
  reference_ =
      models::Decoder(choice.args, choice.lora, c10::TensorOptions().dtype(setup.settings.dtype).device(setup.device));
  setup.progress.End("Built the reference");
  TM_RETURN_IF_ERROR(LoadStartingWeights(config, setup.registry, choice, *reference_, setup.context.allow_stand_ins,
                                         &summary->stand_ins, {}, "ref_checkpointer"));
  for (torch::Tensor& p : reference_->parameters()) p.set_requires_grad(false);
  reference_->eval();
  summary->total_parameters += setup.model.total_parameters;
  return Status::OK();
}

torch::Tensor Dpo::ReferenceLogProbs(const torch::Tensor& tokens, const torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  if (reference_) return SequenceLogProbs(reference_->forward(tokens), labels);
  models::AdaptersOff off(*policy_);
  return SequenceLogProbs(policy_->forward(tokens), labels);
}

// One forward of the policy over the batch's 2 x pairs rows (chosen, then rejected), one of the reference without
// gradient, and the DPO terms per pair (recipes/loss.h); the mean over the pairs.
torch::Tensor Dpo::Loss(const data::Batch& batch) {
  const torch::Tensor tokens = batch.tokens.to(device_), labels = batch.labels.to(device_);
  const torch::Tensor policy = SequenceLogProbs(policy_->forward(tokens), labels);
  const torch::Tensor reference = ReferenceLogProbs(tokens, labels);
  const int64_t n = batch.pairs;
  const torch::Tensor chosen = policy.narrow(0, 0, n), rejected = policy.narrow(0, n, n);
  const DpoTerms terms = DpoLoss(chosen, rejected, reference.narrow(0, 0, n), reference.narrow(0, n, n), options_);
  sums_.pairs += static_cast<double>(terms.chosen_rewards.size(0));
  sums_.chosen += terms.chosen_rewards.sum().item<double>();
  sums_.rejected += terms.rejected_rewards.sum().item<double>();
  sums_.accurate += (terms.chosen_rewards > terms.rejected_rewards).sum().item<double>();
  sums_.chosen_logps += chosen.detach().sum().item<double>();
  sums_.rejected_logps += rejected.detach().sum().item<double>();
  return terms.losses.mean();
}

}  // namespace

RecipeSpec DpoRecipe(TrainKind kind, RecipeLaunch launch) {
  const bool distributed = launch == RecipeLaunch::kRanks;
  const bool lora = kind == TrainKind::kLora;
  TrainingRecipe r;
  r.name = std::string(lora ? "lora_dpo_" : "full_dpo_") + (distributed ? "distributed" : "single_device");
  r.doc = std::string(lora ? "LoRA" : "full") + " direct preference optimization (DPO)" +
          (distributed ? " across ranks" : " on one device") +
          ": chosen/rejected pairs of a preference dataset, the policy's log-probabilities against a frozen " +
          (lora ? "reference (the model with its adapters off)" : "reference (ref_checkpointer)");
  r.kind = kind;
  r.launch = launch;
  r.data = TrainingData::kPreferencePairs;
  r.objective_name = "dpo";
  if (!lora) {
    r.fields.push_back(ComponentField(
        "ref_checkpointer", "checkpointer",
        "the frozen reference's weights, the model component's (full DPO compares the policy with it; usually "
        "the same checkpoint_dir and files as checkpointer)"));
    r.extra_inputs = [](const Config& config, const Registry& registry) {
      return MissingCheckpointFiles(config, registry, "ref_checkpointer", "model");
    };
  }
  r.extra_estimate = [lora](const Config& config, const Registry& registry, const DeviceInfo& device, int ranks) {
    return EstimateDpoReference(config, registry, device, /*own_weights=*/!lora, ranks);
  };
  r.objective = [kind] { return std::make_unique<Dpo>(kind); };
  return TrainingRecipeSpec(std::move(r));
}

StatusOr<CellEstimate> EstimateDpoReference(const Config& config, const Registry& registry, const DeviceInfo& device,
                                            bool own_weights, int ranks) {
  StatusOr<ExtraModelInputs> model = ReadExtraModelInputs(config, registry);
  TM_RETURN_IF_ERROR(model.status());
  CellEstimate e;
  const int64_t total = CountModelParameters(model->model).total;
  const double bytes = model->bytes;
  const double tokens = 2 * model->tokens;  // chosen and rejected rows
  const bool host_memory = device.traits().HostMemory();
  const double weights = own_weights ? static_cast<double>(total) * bytes : 0;
  if (own_weights) e.parameters = total;
  // The reference's logits and float32 log-softmax (no gradient), and the policy's float32 log-softmax and its
  // gradient beyond the fused cross-entropy's.
  const double per_rank = weights + tokens * static_cast<double>(model->model.args.vocab_size) * (bytes + 4 + 2 * 4);
  const double peak = per_rank * (host_memory ? ranks : 1);
  e.peak_memory_bytes = peak < 0x1p62 ? static_cast<int64_t>(peak) : int64_t{1} << 62;
  e.work = static_cast<double>(total) * tokens * ranks;  // one forward pass
  return e;
}

}  // namespace tmx::recipes
