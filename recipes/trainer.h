// The training loop every training recipe shares, and the one seam where recipes differ (Objective).
//
// torchtune's training recipes differ in their loss, their data and the frozen models beside the policy; the
// rest (settings, the model built and loaded, the data, the optimizer, resuming, the steps with accumulation,
// clipping and the schedule, logging, validation, checkpoints, the run summary) is the same. Here that rest is
// written once (RunTraining, over parallelism.h's one device or ranks), and a recipe is a file that declares a
// TrainingRecipe: its name, schema additions, checks, the inputs and estimate of its extra models, and its
// Objective. TrainingRecipeSpec turns it into the registry's RecipeSpec.
//
// Every logged step goes to stdout and to the metrics file; at the end, or on failure, the run writes
// <output_dir>/summary.json (harness/run_summary.h), which tune-matrix reads. `config` must have its schema
// defaults applied (LoadResolvedConfig with the recipe does it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
#include "harness/run_summary.h"
#include "recipes/data/loader.h"
#include "recipes/parallelism.h"
#include "recipes/run_progress.h"
#include "recipes/train_schema.h"
#include "recipes/train_setup.h"

namespace tmx::recipes {

// What an objective sees of a run while it sets up: the run's config, registry and context, the settings read
// from the config, the policy on its device, and where it says what it is doing.
struct TrainingSetup {
  const Config& config;
  const Registry& registry;
  const RunContext& context;
  TrainKind kind;
  const TrainingSettings& settings;
  const TrainableModel& model;
  torch::Device device;
  RunProgress& progress;
};

// What one optimizer step of the loop measured, summed over its micro-batches and every rank (a step an objective
// runs whole: over everything it did).
struct StepResult {
  double loss = 0;
  int64_t tokens = 0;
  double flops = 0;
  std::optional<double> grad_norm;
  double time_s = 0;
};

// A step of the loop as an objective sees it (Objective::Step).
struct StepContext {
  int64_t epoch = 0, step = 0, global_step = 0, first_step = 0;
  // The loop's own step: gradient_accumulation_steps micro-batches over Loss, clipping and the optimizer's step.
  std::function<Status()> micro_batches;
  // The step's batch of the training data (its first micro-batch's).
  std::function<data::Batch()> batch;
  // After backward passes: clips (clip_grad_norm) and steps the policy's optimizer, then zeroes the gradients;
  // with optimizer_in_bwd only zeroes them (each tensor was stepped inside backward). Returns the gradient norm
  // when one was taken.
  std::function<std::optional<double>()> optimizer_step;
  StepResult* result = nullptr;  // what the step measured; the loop times it
  RunSummary* summary = nullptr;
};

// What a training recipe optimises. The base class is plain fine-tuning: next-token cross-entropy over the SFT
// samples of `dataset`; a recipe overrides what it changes. Every rank holds its own objective.
class Objective {
 public:
  virtual ~Objective() = default;

  // Once the policy is built and before the data loads: the objective's options and extra models (a teacher, a
  // reference policy), added to `summary`'s parameters and stand-ins.
  virtual Status Setup(const TrainingSetup& setup, RunSummary* summary);
  // The training data: the config's `dataset` as SFT samples (SetupData).
  virtual StatusOr<data::DataLoader> LoadData(const TrainingSetup& setup, RunSummary* summary);
  // What Loss averages over in `batch`: the tokens whose labels are trained. A step's loss is the mean over
  // every micro-batch's count on every rank.
  virtual double LossCount(const data::Batch& batch) const;
  // The mean loss of `batch` (on the setup's device) over LossCount; with gradients during training, without
  // during validation. A step's metrics (StepMetrics) come from the calls between StartStep and EndStep.
  virtual torch::Tensor Loss(const data::Batch& batch);
  // The policy's logits of the start of `batch`'s first row as its weights are, without gradient or dropout:
  // the numeric probe's (harness/numeric_probe.h), taken before the first step.
  virtual torch::Tensor ProbeLogits(const data::Batch& batch);
  // Model FLOPs of a micro-batch besides the policy's forward and backward (a frozen model's forward).
  virtual double ExtraFlops(int64_t rows, int64_t length) const { return 0; }
  // Before optimizer step `global_step` (0-based; `first_step` is this run's first, after resuming).
  virtual void BeforeStep(int64_t global_step, int64_t first_step, RunProgress& progress) {}
  // One step of the loop: by default its micro-batches over Loss (StepContext::micro_batches). An objective that
  // does more per step (PPO: generation, then several optimizer steps of its own) runs it whole.
  virtual Status Step(StepContext& step) { return step.micro_batches(); }
  // Around each optimizer step's micro-batches: EndStep runs on every rank (it may sum over them), logged or not.
  virtual void StartStep() {}
  virtual void EndStep(const Parallelism& parallel) {}
  // After the loop saved the policy's checkpoint of `epoch` (the lead process only): what else the objective trains
  // (PPO's value model), saved beside it.
  virtual Status SaveCheckpoint(int64_t epoch, const TrainingSetup& setup) { return Status::OK(); }
  // The step's metrics by torchtune's names, logged beside the loss.
  virtual std::vector<std::pair<const char*, double>> StepMetrics() const { return {}; }
  // Lines printed once before the first step, after the run's own ("Training ... on cpu").
  virtual std::vector<std::string> Describe(const TrainingSetup& setup) const { return {}; }

 protected:
  // The tokens and labels of `batch` (and a packed batch's positions and document ids) on `device`.
  struct DeviceBatch {
    torch::Tensor tokens, labels, input_pos, document_ids;
  };
  static DeviceBatch OnDevice(const data::Batch& batch, torch::Device device);

  models::DecoderImpl* policy_ = nullptr;  // set by the base Setup
  torch::Device device_{torch::kCPU};
};

// A training recipe: what it adds to the shared loop and schema.
struct TrainingRecipe {
  std::string name;  // torchtune's, e.g. "lora_dpo_single_device"
  std::string doc;
  TrainKind kind = TrainKind::kFull;
  RecipeLaunch launch = RecipeLaunch::kOneProcess;
  TrainingData data = TrainingData::kSamples;
  // Its objective's name, for `tune ls --json` (RecipeSpec::objective): "fine-tuning", "knowledge_distillation",
  // "dpo", "qat", "ppo".
  std::string objective_name = "fine-tuning";
  // Schema fields and checks beside the shared ones (train_schema.h's, the distributed ones when launched as
  // ranks), appended after them.
  std::vector<FieldSpec> fields;
  std::vector<CrossCheck> checks;
  // The input files its extra models read that this machine lacks (a teacher's checkpoint), listed after the
  // policy's and before the outputs' problems.
  std::function<std::vector<Problem>(const Config& config, const Registry& registry)> extra_inputs;
  // What its extra models and copies add to the policy's estimate (peak memory, work, parameters), for `ranks`
  // processes (1, or the device type's matrix_ranks when launched as ranks).
  std::function<StatusOr<CellEstimate>(const Config& config, const Registry& registry, const DeviceInfo& device,
                                       int ranks)>
      extra_estimate;
  // The config as the shared loop, its checks and its estimate read it, for a recipe whose torchtune configs name
  // the loop's keys otherwise (PPO: the policy is `policy_model`, the steps `num_steps`); null: as written. The
  // problems the shared checks find at a key it renamed are reported at the config's own key (`renamed`).
  std::function<Config(const Config& config)> loop_config;
  std::vector<std::pair<std::string, std::string>> renamed;  // {loop's key, config's key}
  // A matrix cell's overrides for `steps` steps; null: the loop's (one epoch of `steps` single micro-batch steps).
  std::function<std::vector<std::string>(int steps)> cell_overrides;
  // A fresh objective for one run (one per rank); null: plain fine-tuning (Objective).
  std::function<std::unique_ptr<Objective>()> objective;
};

// The registry's entry for `recipe`: its configs from configs/MANIFEST, the shared schema and checks plus its
// own, its inputs and outputs checked before a run, its estimate (the policy's, for preference pairs with two
// rows a pair, plus extra_estimate), the overrides of a matrix cell, and `run` (RunTraining).
RecipeSpec TrainingRecipeSpec(TrainingRecipe recipe);

// Runs `recipe` on `config` in this process, or as this process's rank when it is launched as ranks (the rank,
// the world size and the rendezvous from the environment; without a launcher, one rank). Each rank trains
// batch_size samples of every global batch; gradients are summed over the ranks (distributed/data_parallel.h),
// sharded unless data_parallel_shard_dim=1. Rank 0 alone prints progress and writes metrics, checkpoints and
// summary.json (whose peak memory is the largest rank's and tokens those of every rank).
Status RunTraining(const TrainingRecipe& recipe, const Config& config, const RunContext& context);

}  // namespace tmx::recipes
