#include "recipes/vision_training.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "base/file_util.h"
#include "recipes/checkpoint/hf_checkpoint.h"
#include "recipes/checkpoint/hf_vision.h"
#include "recipes/checkpointers.h"
#include "recipes/data/image_collate.h"
#include "recipes/models/lora.h"
#include "recipes/parallelism.h"
#include "recipes/train_setup.h"
#include "recipes/train_state.h"
#include "recipes/vision_components.h"

namespace tmx::recipes {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The vision model a run trains, on its device, and its trained tensors.
struct VisionRun {
  VisionModelChoice choice;
  models::VisionModel model{nullptr};
  std::vector<at::Tensor> trained;
  torch::Device device{torch::kCPU};
};

// A setting on (`key` True, or set at all when `when_set`) that the vision loop does not build.
void RefuseIfOn(const Config& config, const std::string& key, const std::string& what, const std::string& fix,
                std::vector<Problem>* out) {
  if (!config.Find(key).IsDefined() || config.IsNull(key)) return;
  StatusOr<bool> on = config.GetBool(key, false);
  if (on.ok() && !*on) return;
  out->push_back({config.OriginOf(key).ToString(), key, what + " is not built for Llama 3.2 Vision models; fix: " + fix});
}

// The folder of the starting weights: checkpointer.checkpoint_dir, or "" for the seed's (no checkpointer or
// folder; a stand-in, said in `stand_ins`, when the config names a folder this machine lacks). Found before the
// model is built, so a missing folder costs nothing.
StatusOr<std::string> WeightsDir(const Config& config, const RunContext& context, const VisionModelChoice& choice,
                                 std::vector<std::string>* stand_ins) {
  if (!config.Find("checkpointer").IsDefined() || config.IsNull("checkpointer.checkpoint_dir")) return std::string();
  StatusOr<std::string> dir = config.GetString("checkpointer.checkpoint_dir");
  TM_RETURN_IF_ERROR(dir.status());
  if (IsDirectory(*dir)) return dir;
  const std::string hub = choice.preset->hf_checkpoint;
  if (!context.allow_stand_ins) {
    return Status::NotFound(config.OriginOf("checkpointer.checkpoint_dir").ToString() +
                            ": checkpointer.checkpoint_dir " + *dir + " does not exist; fix: put the weights of " +
                            (hub.empty() ? std::string("the model") : hub) +
                            " there, or set it to null to start from the seed");
  }
  stand_ins->push_back("model " + choice.component + " started from the seed (checkpoint_dir " + *dir +
                       " is absent)");
  return std::string();
}

// Loads `dir`'s Hugging Face safetensors into the model (adapters keep their initialisation).
Status LoadVisionWeights(const std::string& dir, const VisionModelChoice& choice, models::VisionModelImpl& model) {
  StatusOr<checkpoint::NamedTensors> hf = checkpoint::ReadHfSafetensors(dir);
  TM_RETURN_IF_ERROR(hf.status());
  StatusOr<checkpoint::NamedTensors> tune = checkpoint::MllamaHfToTune(*hf, choice.args, dir);
  TM_RETURN_IF_ERROR(tune.status());
  return checkpoint::LoadIntoModule(model, *tune, /*strict=*/!choice.lora.has_value());
}

StatusOr<VisionRun> BuildVisionRun(const TrainingRecipe& recipe, const Config& config, const RunContext& context,
                                   const TrainingSettings& settings, RunSummary* summary) {
  VisionRun run;
  StatusOr<VisionModelChoice> choice = VisionModelFromConfig(config, *context.registry);
  TM_RETURN_IF_ERROR(choice.status());
  const bool lora = recipe.kind == TrainKind::kLora;
  if (choice->lora.has_value() != lora) {
    return Status::InvalidArgument(config.OriginOf("model._component_").ToString() + ": model '" + choice->component +
                                   "' " + (lora ? "has no LoRA adapters; " + recipe.name + " needs a lora_ model"
                                                : "has LoRA adapters; use lora_finetune_single_device"));
  }
  run.choice = *choice;
  run.device = torch::Device(context.device.id);
  torch::manual_seed(settings.seed);
  StatusOr<models::VisionModel> model =
      LoadVisionModel(config, context, run.choice, c10::TensorOptions().dtype(settings.dtype).device(run.device),
                      &summary->stand_ins);
  TM_RETURN_IF_ERROR(model.status());
  run.model = *model;
  run.model->set_activation_checkpointing(settings.activation_checkpointing);
  for (const auto& p : run.model->named_parameters()) {
    summary->total_parameters += p.value().numel();
    if (!p.value().requires_grad()) continue;
    run.trained.push_back(p.value());
    summary->trainable_parameters += p.value().numel();
  }
  return run;
}

// The batch's images as the model takes them (padded_collate_tiled_images_and_mask); undefined without images.
data::ImageBatch BatchImages(const VisionRun& run, const data::DataLoader& loader, const data::Batch& batch) {
  std::vector<data::SampleImages> samples;
  for (int64_t index : batch.indices) samples.push_back({loader.sample(index).tokens, loader.sample(index).images});
  const models::VisionModelArgs& a = run.choice.args;
  return data::CollateImages(samples, a.image_token_id(), a.encoder.tokens_per_tile(), batch.tokens.size(1));
}

// The mean next-token loss of `batch` over its trained labels, and how many there are.
std::pair<torch::Tensor, int64_t> BatchLoss(VisionRun& run, const data::DataLoader& loader, const data::Batch& batch) {
  torch::Tensor tokens = batch.tokens.to(run.device), labels = batch.labels.to(run.device);
  const data::ImageBatch images = BatchImages(run, loader, batch);
  auto on_device = [&](const torch::Tensor& t) { return t.defined() ? t.to(run.device) : t; };
  torch::Tensor logits = run.model
                             ->forward(tokens, on_device(images.images), on_device(images.aspect_ratio),
                                       on_device(images.encoder_mask))
                             .narrow(1, 0, tokens.size(1) - 1);
  torch::Tensor targets = labels.narrow(1, 1, labels.size(1) - 1);
  const int64_t count = targets.ne(data::kIgnoreIndex).sum().item<int64_t>();
  torch::Tensor loss = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}).to(torch::kFloat), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(data::kIgnoreIndex).reduction(torch::kSum));
  return {loss / std::max<int64_t>(count, 1), count};
}

Status SaveVisionEpoch(const TrainingSettings& s, VisionRun& run, int64_t epoch, std::ostream& out) {
  const std::string dir = s.checkpoint_dir + "/epoch_" + std::to_string(epoch);
  TM_RETURN_IF_ERROR(MakeDirs(dir));
  checkpoint::NamedTensors tune;
  for (auto& [name, t] : models::MergedStateDict(*run.model)) tune.emplace_back(name, t);
  StatusOr<checkpoint::NamedTensors> hf = checkpoint::MllamaTuneToHf(tune, run.choice.args);
  TM_RETURN_IF_ERROR(hf.status());
  TM_RETURN_IF_ERROR(checkpoint::SaveSafetensors(dir + "/model.safetensors", *hf));
  out << "Saved " << dir << "/model.safetensors (Hugging Face names, adapters merged)\n";
  return Status::OK();
}

// The config's data for `run`'s model: ids up to its fusion tokens, each sample's images matching its <|image|>
// tokens (the tokenizer's <|image|> must be the model's first fusion token).
StatusOr<data::DataLoader> VisionData(const Config& config, const TrainingSettings& s, const VisionRun& run,
                                      const RunContext& context, RunSummary* summary) {
  models::DecoderArgs ids = run.choice.args.decoder;
  ids.vocab_size += run.choice.args.num_special_tokens;
  StatusOr<data::DataLoader> loader = SetupData(config, s, ids, context.allow_stand_ins, &summary->stand_ins);
  if (!loader.ok()) return loader;
  const int64_t image_id = run.choice.args.image_token_id();
  for (int64_t i = 0; i < loader->num_samples(); ++i) {
    const data::Sample& sample = loader->sample(i);
    const auto tokens = std::count(sample.tokens.begin(), sample.tokens.end(), image_id);
    if (tokens != static_cast<int64_t>(sample.images.size())) {
      return Status::InvalidArgument(config.OriginOf("tokenizer").ToString() + ": sample " + std::to_string(i) +
                                     " has " + std::to_string(sample.images.size()) + " images but " +
                                     std::to_string(tokens) + " tokens of id " + std::to_string(image_id) +
                                     ", the model's first fusion token (<|image|>); fix: use the tokenizer the model "
                                     "was made with (its <|image|> id must be " + std::to_string(image_id) + ")");
    }
  }
  return loader;
}

struct VisionStep {
  double loss = 0;
  int64_t tokens = 0;
  double grad_norm = 0;
};

StatusOr<VisionStep> TrainStep(VisionRun& run, data::DataLoader& loader, torch::optim::Optimizer& optimizer,
                               const TrainingSettings& s, int64_t first_batch) {
  optimizer.zero_grad();
  VisionStep r;
  for (int64_t micro = 0; micro < s.gradient_accumulation_steps; ++micro) {
    data::Batch batch = loader.BatchAtStep(first_batch + micro);
    auto [loss, count] = BatchLoss(run, loader, batch);
    if (count == 0) {
      return Status::InvalidArgument("every label of a batch is masked, so there is no token to train on; fix: "
                                     "raise tokenizer.max_seq_len or set dataset.train_on_input=True");
    }
    (loss / static_cast<double>(s.gradient_accumulation_steps)).backward();
    r.loss += loss.item<double>() / static_cast<double>(s.gradient_accumulation_steps);
    r.tokens += batch.num_tokens;
  }
  if (!std::isfinite(r.loss)) return Status::Internal("non-finite loss; lower optimizer.lr or use dtype=fp32");
  r.grad_norm = torch::nn::utils::clip_grad_norm_(run.trained, s.clip_grad_norm.value_or(INFINITY));
  optimizer.step();
  return r;
}

Status TrainVision(const TrainingRecipe& recipe, const Config& config, const RunContext& context,
                   RunSummary* summary) {
  std::ostream& out = *context.out;
  out << ChooseThreads() << "\n";
  summary->threads = at::get_num_threads();
  const auto start = Clock::now();
  StatusOr<TrainingSettings> settings = ReadTrainingSettings(config, recipe.kind);
  TM_RETURN_IF_ERROR(settings.status());
  const TrainingSettings& s = *settings;
  summary->seed = s.seed;
  summary->dtype = DtypeConfigName(s.dtype);
  StatusOr<VisionRun> run = BuildVisionRun(recipe, config, context, s, summary);
  TM_RETURN_IF_ERROR(run.status());
  StatusOr<data::DataLoader> loader = VisionData(config, s, *run, context, summary);
  TM_RETURN_IF_ERROR(loader.status());
  StatusOr<OptimizerPtr> optimizer = SetupOptimizer(config, *context.registry, run->trained);
  TM_RETURN_IF_ERROR(optimizer.status());
  StatusOr<double> base_lr = config.GetDouble("optimizer.lr");
  TM_RETURN_IF_ERROR(base_lr.status());
  int64_t steps = loader->size() / s.gradient_accumulation_steps;
  if (s.max_steps_per_epoch) steps = std::min(steps, *s.max_steps_per_epoch);
  if (steps < 1) return Status::InvalidArgument("the data holds fewer batches than one optimizer step needs");
  summary->init_time_s = Seconds(start, Clock::now());
  out << "Training " << run->choice.component << " (" << summary->trainable_parameters << " of "
      << summary->total_parameters << " parameters trained) on " << context.device.id << ", " << steps
      << " steps an epoch\n";
  run->model->train();
  for (int64_t epoch = 0, global = 0; epoch < s.epochs; ++epoch) {
    for (int64_t step = 0; step < steps; ++step, ++global) {
      const double lr = *base_lr * (s.has_schedule ? LrScheduleFactor(global, s.epochs * steps, s.warmup_steps,
                                                                      s.num_cycles)
                                                   : 1.0);
      SetLearningRate(**optimizer, lr);
      const auto t0 = Clock::now();
      StatusOr<VisionStep> r =
          TrainStep(*run, *loader, **optimizer, s, (epoch * steps + step) * s.gradient_accumulation_steps);
      TM_RETURN_IF_ERROR(r.status());
      summary->step_times_s.push_back(Seconds(t0, Clock::now()));
      summary->losses.push_back(r->loss);
      summary->step_tokens.push_back(r->tokens);
      if (global == 0) summary->first_grad_norm = r->grad_norm;
      if ((global + 1) % s.log_every_n_steps == 0) {
        out << "epoch " << epoch + 1 << " step " << global + 1 << " loss " << r->loss << " lr " << lr
            << " grad_norm " << r->grad_norm << "\n";
      }
    }
    if (s.save_checkpoints) TM_RETURN_IF_ERROR(SaveVisionEpoch(s, *run, epoch, out));
  }
  return Status::OK();
}

}  // namespace

StatusOr<models::VisionModel> LoadVisionModel(const Config& config, const RunContext& context,
                                              const VisionModelChoice& choice, c10::TensorOptions options,
                                              std::vector<std::string>* stand_ins) {
  StatusOr<std::string> weights = WeightsDir(config, context, choice, stand_ins);
  TM_RETURN_IF_ERROR(weights.status());
  models::VisionModel model(choice.args, choice.lora, choice.trainable, options);
  if (!weights->empty()) TM_RETURN_IF_ERROR(LoadVisionWeights(*weights, choice, *model));
  models::InitializeDoraMagnitudes(*model);
  return model;
}

std::vector<Problem> VisionTrainingRefusals(const TrainingRecipe& recipe, const Config& config) {
  std::vector<Problem> out;
  auto refuse = [&](const std::string& key, const std::string& message) {
    out.push_back({config.OriginOf(key).ToString(), key, message});
  };
  if (recipe.launch == RecipeLaunch::kRanks || recipe.objective) {
    refuse("model", recipe.name + " with a Llama 3.2 Vision model is not built (only full_finetune_single_device "
                                  "and lora_finetune_single_device are); fix: run one of those with this model");
  }
  RefuseIfOn(config, "enable_activation_offloading", "activation offloading",
             "set enable_activation_offloading=False", &out);
  RefuseIfOn(config, "optimizer_in_bwd", "optimizer_in_bwd", "set optimizer_in_bwd=False", &out);
  RefuseIfOn(config, "resume_from_checkpoint", "resuming", "set resume_from_checkpoint=False", &out);
  RefuseIfOn(config, "save_adapter_weights_only", "saving the adapters alone",
             "set save_adapter_weights_only=False (the merged model is saved)", &out);
  RefuseIfOn(config, "profiler.enabled", "the operation profile", "set profiler.enabled=False", &out);
  if (config.Find("run_val_every_n_steps").IsDefined() && !config.IsNull("run_val_every_n_steps")) {
    refuse("run_val_every_n_steps", "validation is not built for Llama 3.2 Vision models; fix: set "
                                    "run_val_every_n_steps=null");
  }
  if (config.Find("checkpointer").IsDefined() && !config.IsNull("checkpointer.checkpoint_dir")) {
    StatusOr<std::string> component = config.GetString("checkpointer._component_", "");
    if (component.ok() && component->find("HFCheckpointer") == std::string::npos) {
      refuse("checkpointer._component_", "only Hugging Face checkpoints (FullModelHFCheckpointer) of Llama 3.2 "
                                         "Vision are read here; fix: use the Hub's safetensors with "
                                         "torchtune.training.FullModelHFCheckpointer");
    }
  }
  return out;
}

Status RunVisionTraining(const TrainingRecipe& recipe, const Config& config, const RunContext& context) {
  const std::vector<Problem> refused = VisionTrainingRefusals(recipe, config);
  if (!refused.empty()) {
    std::string message = "cannot run this Llama 3.2 Vision config (" + std::to_string(refused.size()) +
                          (refused.size() == 1 ? " problem):" : " problems):");
    for (const Problem& p : refused) message += "\n  " + p.ToString();
    return Status::FailedPrecondition(message);
  }
  auto report = [&](const RunSummary& summary) {
    *context.out << "Finished: " << summary.losses.size() << " steps, first loss " << summary.losses.front()
                 << ", last loss " << summary.losses.back() << "\n";
  };
  return RunInProcessOrRanks(
      config, context, recipe.name, /*distributed=*/false, "lower batch_size",
      [&](Parallelism&, RunSummary* summary) { return TrainVision(recipe, config, context, summary); }, report);
}

}  // namespace tmx::recipes
