#include "recipes/finetune.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>
#ifdef TUNE_MATRIX_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "harness/file_util.h"
#include "harness/stats.h"
#include "recipes/builtin.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/data/alpaca.h"
#include "recipes/data/loader.h"
#include "recipes/data/tokenizer.h"
#include "recipes/model_builder.h"
#include "recipes/models/llama.h"
#include "recipes/train_state.h"

namespace tmx::recipes {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
  if (device.is_mps()) torch::mps::synchronize();
}

// The model for this recipe: ModelFromConfig, checked against the recipe's kind (LoRA or full).
StatusOr<ModelChoice> ChooseModel(const Config& config, const Registry& registry, bool lora_recipe) {
  StatusOr<ModelChoice> choice = ModelFromConfig(config, registry);
  if (!choice.ok()) return choice.status();
  if (choice->lora.has_value() != lora_recipe) {
    return Status::InvalidArgument(config.OriginOf("model._component_").ToString() + ": model '" + choice->component +
                                   "' " +
                                   (lora_recipe ? "has no LoRA adapters; lora_finetune_single_device needs a lora_ model"
                                                : "has LoRA adapters; use lora_finetune_single_device"));
  }
  return choice;
}

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

nlohmann::json SummaryJson(const RunSummary& s) {
  nlohmann::json j = {{"recipe", s.recipe},
                      {"config", s.config},
                      {"device", s.device},
                      {"device_name", s.device_name},
                      {"torch_version", s.torch_version},
                      {"ok", s.ok},
                      {"seed", s.seed},
                      {"init_time_s", s.init_time_s},
                      {"step_times_s", s.step_times_s},
                      {"losses", s.losses},
                      {"step_tokens", s.step_tokens},
                      {"warmup_steps", s.warmup_steps},
                      {"trainable_parameters", s.trainable_parameters},
                      {"total_parameters", s.total_parameters},
                      {"peak_memory_source", s.peak_memory_source}};
  if (!s.ok) {
    j["error"] = s.error;
    j["error_kind"] = s.error_kind;
  }
  if (s.tokens_per_second) j["tokens_per_second"] = *s.tokens_per_second;
  if (s.peak_memory_bytes) j["peak_memory_bytes"] = *s.peak_memory_bytes;
  return j;
}

class Trainer {
 public:
  Trainer(const Config& config, const RunContext& context, bool lora)
      : config_(config), context_(context), lora_(lora), device_(torch::kCPU) {}

  Status Run(RunSummary* summary);

 private:
  Status Setup(RunSummary* summary);
  Status Train(RunSummary* summary);
  Status SaveEpoch(int64_t epoch, int64_t global_step);
  Status LogStep(const nlohmann::json& record);

  const Config& config_;
  const RunContext& context_;
  bool lora_;
  torch::Device device_;
  torch::ScalarType dtype_ = torch::kFloat;
  std::string output_dir_;
  std::string checkpoint_out_;
  std::string metrics_path_;
  std::optional<models::Llama> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<std::pair<std::string, torch::Tensor>> trained_;  // named trainable parameters
  // The same tensors, as the optimizer and gradient clipping take them (Optimizer::parameters() warns on
  // every call that it is deprecated).
  std::vector<torch::Tensor> trained_tensors_;
  std::optional<data::DataLoader> loader_;
  int64_t batch_size_ = 2, epochs_ = 1, grad_accum_ = 1, log_every_ = 1, steps_per_epoch_ = 0;
  int64_t warmup_ = 0, start_epoch_ = 0;
  double num_cycles_ = 0.5, base_lr_ = 1e-3;
  std::optional<double> clip_;
  bool save_checkpoints_ = true, save_adapter_only_ = false, log_memory_ = true;
  uint64_t seed_ = 0;
};

Status Trainer::Setup(RunSummary* summary) {
  const Registry& registry = BuiltinRegistry();
  if (context_.device.type == DeviceType::kMeta) {
    return Status::InvalidArgument("device meta holds shapes only and cannot train; use device=cpu or a GPU");
  }
  device_ = torch::Device(context_.device.id);
  StatusOr<std::string> dtype = config_.GetString("dtype", "bf16");
  TM_RETURN_IF_ERROR(dtype.status());
  dtype_ = *dtype == "bf16" ? torch::kBFloat16 : torch::kFloat;

  StatusOr<std::string> out = config_.GetString("output_dir", "");
  TM_RETURN_IF_ERROR(out.status());
  output_dir_ = *out;
  TM_RETURN_IF_ERROR(MakeDirs(output_dir_));
  StatusOr<std::string> ckpt_out = config_.GetString("checkpointer.output_dir", output_dir_);
  TM_RETURN_IF_ERROR(ckpt_out.status());
  checkpoint_out_ = *ckpt_out;
  StatusOr<std::string> log_dir = config_.GetString("metric_logger.log_dir", output_dir_ + "/logs");
  StatusOr<std::string> log_file = config_.GetString("metric_logger.filename", "metrics.jsonl");
  TM_RETURN_IF_ERROR(log_dir.status());
  TM_RETURN_IF_ERROR(log_file.status());
  TM_RETURN_IF_ERROR(MakeDirs(*log_dir));
  metrics_path_ = *log_dir + "/" + *log_file;
  ::unlink(metrics_path_.c_str());

  struct IntField {
    const char* key;
    int64_t* dest;
  } ints[] = {{"batch_size", &batch_size_}, {"epochs", &epochs_}, {"gradient_accumulation_steps", &grad_accum_},
              {"log_every_n_steps", &log_every_}, {"lr_scheduler.num_warmup_steps", &warmup_}};
  for (const IntField& f : ints) {
    StatusOr<int64_t> v = config_.GetInt(f.key, *f.dest);
    TM_RETURN_IF_ERROR(v.status());
    *f.dest = *v;
  }
  StatusOr<double> cycles = config_.GetDouble("lr_scheduler.num_cycles", 0.5);
  TM_RETURN_IF_ERROR(cycles.status());
  num_cycles_ = *cycles;
  if (!config_.IsNull("clip_grad_norm")) {
    StatusOr<double> clip = config_.GetDouble("clip_grad_norm", 0);
    TM_RETURN_IF_ERROR(clip.status());
    clip_ = *clip;
  }
  for (auto [key, dest, fallback] : {std::tuple<const char*, bool*, bool>{"save_checkpoints", &save_checkpoints_, true},
                                     {"save_adapter_weights_only", &save_adapter_only_, false},
                                     {"log_peak_memory_stats", &log_memory_, true}}) {
    StatusOr<bool> v = config_.GetBool(key, fallback);
    TM_RETURN_IF_ERROR(v.status());
    *dest = *v;
  }
  if (config_.IsNull("seed")) {
    seed_ = std::random_device{}();
  } else {
    StatusOr<int64_t> seed = config_.GetInt("seed", 0);
    TM_RETURN_IF_ERROR(seed.status());
    seed_ = static_cast<uint64_t>(*seed);
  }
  summary->seed = seed_;
  torch::manual_seed(seed_);

  // Model.
  StatusOr<ModelChoice> choice = ChooseModel(config_, registry, lora_);
  TM_RETURN_IF_ERROR(choice.status());
  model_ = models::Llama(choice->args, choice->lora, torch::TensorOptions().dtype(dtype_).device(device_));
  StatusOr<bool> ac = config_.GetBool("enable_activation_checkpointing", false);
  TM_RETURN_IF_ERROR(ac.status());
  (*model_)->set_activation_checkpointing(*ac);
  if (!config_.IsNull("checkpointer.checkpoint_dir")) {
    StatusOr<std::string> dir = config_.GetString("checkpointer.checkpoint_dir", "");
    TM_RETURN_IF_ERROR(dir.status());
    std::vector<std::string> files = {"model.safetensors"};
    YAML::Node listed = config_.Find("checkpointer.checkpoint_files");
    if (listed.IsSequence()) {
      files.clear();
      for (const auto& f : listed) files.push_back(f.as<std::string>());
    }
    checkpoint::NamedTensors all;
    for (const std::string& f : files) {
      StatusOr<checkpoint::LoadedSafetensors> loaded = checkpoint::LoadSafetensors(*dir + "/" + f);
      TM_RETURN_IF_ERROR(loaded.status());
      for (auto& t : loaded->tensors) all.push_back(std::move(t));
    }
    TM_RETURN_IF_ERROR(LoadBaseWeights(**model_, all, lora_));
  }
  if (lora_) models::FreezeBaseParameters(**model_);
  for (const auto& p : (*model_)->named_parameters()) {
    summary->total_parameters += p.value().numel();
    if (p.value().requires_grad()) {
      trained_.emplace_back(p.key(), p.value());
      summary->trainable_parameters += p.value().numel();
    }
  }

  // Data.
  StatusOr<std::string> source = config_.GetString("dataset.source", DefaultDatasetPath());
  TM_RETURN_IF_ERROR(source.status());
  data::AlpacaOptions data_options;
  data_options.path = *source;
  StatusOr<int64_t> max_len = config_.GetInt("tokenizer.max_seq_len", std::min<int64_t>(choice->args.max_seq_len, 2048));
  TM_RETURN_IF_ERROR(max_len.status());
  data_options.max_seq_len = *max_len;
  StatusOr<bool> on_input = config_.GetBool("dataset.train_on_input", false);
  TM_RETURN_IF_ERROR(on_input.status());
  data_options.train_on_input = *on_input;
  data::ByteTokenizer tokenizer;
  StatusOr<data::AlpacaDataset> dataset = data::LoadAlpaca(data_options, tokenizer);
  TM_RETURN_IF_ERROR(dataset.status());
  data::DataLoaderOptions loader_options;
  loader_options.batch_size = batch_size_;
  StatusOr<bool> shuffle = config_.GetBool("shuffle", true);
  TM_RETURN_IF_ERROR(shuffle.status());
  loader_options.shuffle = *shuffle;
  loader_options.seed = seed_;
  StatusOr<data::DataLoader> loader = data::DataLoader::Create(dataset->samples(), loader_options);
  TM_RETURN_IF_ERROR(loader.status());
  loader_.emplace(std::move(*loader));
  steps_per_epoch_ = loader_->size() / grad_accum_;
  if (!config_.IsNull("max_steps_per_epoch")) {
    StatusOr<int64_t> max_steps = config_.GetInt("max_steps_per_epoch", steps_per_epoch_);
    TM_RETURN_IF_ERROR(max_steps.status());
    steps_per_epoch_ = std::min(steps_per_epoch_, *max_steps);
  }
  if (steps_per_epoch_ < 1) {
    return Status::InvalidArgument("the dataset has " + std::to_string(loader_->size()) +
                                   " batches, fewer than gradient_accumulation_steps=" + std::to_string(grad_accum_) +
                                   "; lower gradient_accumulation_steps or batch_size");
  }

  // Optimizer.
  for (const auto& p : trained_) trained_tensors_.push_back(p.second);
  YAML::Node opt_node = config_.Find("optimizer._component_");
  const ComponentSpec* opt = registry.FindComponent(opt_node.IsScalar() ? opt_node.Scalar() : "");
  StatusOr<double> lr = config_.GetDouble("optimizer.lr", opt != nullptr && opt->name == "tune_matrix.optim.SGD" ? 1e-2 : 1e-3);
  TM_RETURN_IF_ERROR(lr.status());
  base_lr_ = *lr;
  StatusOr<std::unique_ptr<torch::optim::Optimizer>> optimizer = MakeOptimizer(config_, opt ? opt->name : "", trained_tensors_);
  TM_RETURN_IF_ERROR(optimizer.status());
  optimizer_ = std::move(*optimizer);

  // Resume.
  StatusOr<bool> resume = config_.GetBool("resume_from_checkpoint", false);
  TM_RETURN_IF_ERROR(resume.status());
  if (*resume) {
    StatusOr<ResumePoint> point = LoadTrainState(checkpoint_out_, config_, **model_, trained_, *optimizer_);
    TM_RETURN_IF_ERROR(point.status());
    start_epoch_ = point->next_epoch;
    *context_.out << "Resuming from " << point->directory << " at epoch " << start_epoch_ << "\n";
  }
  return Status::OK();
}

Status Trainer::LogStep(const nlohmann::json& record) { return AppendLineDurably(metrics_path_, record.dump()); }

Status Trainer::SaveEpoch(int64_t epoch, int64_t global_step) {
  std::string dir = checkpoint_out_ + "/epoch_" + std::to_string(epoch);
  TM_RETURN_IF_ERROR(MakeDirs(dir));
  return SaveTrainState(dir, **model_, trained_, *optimizer_, lora_, save_adapter_only_,
                        {epoch + 1, global_step, seed_});
}

Status Trainer::Train(RunSummary* summary) {
  std::ostream& out = *context_.out;
  int64_t total_steps = epochs_ * steps_per_epoch_;
  int64_t global_step = start_epoch_ * steps_per_epoch_;
  (*model_)->train();
  for (int64_t epoch = start_epoch_; epoch < epochs_; ++epoch) {
    for (int64_t step = 0; step < steps_per_epoch_; ++step) {
      double factor = ScheduleFactor(global_step, total_steps, warmup_, num_cycles_);
      double lr = base_lr_ * factor;
      SetLearningRate(*optimizer_, lr);
      Synchronize(device_);
      auto t0 = Clock::now();
      optimizer_->zero_grad();
      double loss_sum = 0;
      int64_t tokens = 0;
      for (int64_t micro = 0; micro < grad_accum_; ++micro) {
        int64_t batch_index = epoch * loader_->size() + step * grad_accum_ + micro;
        data::Batch batch = loader_->BatchAtStep(batch_index);
        torch::Tensor input = batch.tokens.to(device_);
        torch::Tensor labels = batch.labels.to(device_);
        torch::Tensor loss = NextTokenLoss((*model_)->forward(input), labels);
        (loss / static_cast<double>(grad_accum_)).backward();
        loss_sum += loss.item<double>();
        tokens += batch.num_tokens;  // every non-padding token the model processed, as torchtune counts
      }
      double loss_value = loss_sum / static_cast<double>(grad_accum_);
      if (!std::isfinite(loss_value)) {
        summary->error_kind = "non_finite_loss";
        return Status::Internal("non-finite loss (" + std::to_string(loss_value) + ") at step " +
                                std::to_string(global_step + 1) + "; lower optimizer.lr or use dtype=fp32");
      }
      std::optional<double> grad_norm;
      if (clip_) {
        grad_norm = torch::nn::utils::clip_grad_norm_(trained_tensors_, *clip_);
      }
      optimizer_->step();
      Synchronize(device_);
      double step_time = Seconds(t0, Clock::now());
      ++global_step;
      summary->step_times_s.push_back(step_time);
      summary->losses.push_back(loss_value);
      summary->step_tokens.push_back(tokens);
      std::string source;
      int64_t peak = PeakMemoryBytes(context_.device, &source);
      if (global_step % log_every_ == 0 || step + 1 == steps_per_epoch_) {
        nlohmann::json record = {{"step", global_step},  {"epoch", epoch},
                                 {"loss", loss_value},   {"lr", lr},
                                 {"tokens", tokens},     {"tokens_per_second", tokens / step_time},
                                 {"step_time_s", step_time}};
        if (grad_norm) record["grad_norm"] = *grad_norm;
        if (log_memory_) record["peak_memory_gib"] = static_cast<double>(peak) / (1 << 30);
        TM_RETURN_IF_ERROR(LogStep(record));
        out << "epoch " << epoch + 1 << " step " << global_step << " | loss " << std::fixed << std::setprecision(4)
            << loss_value << " | lr " << FormatLr(lr) << " | tok/s " << std::setprecision(0) << tokens / step_time;
        if (grad_norm) out << " | grad_norm " << std::setprecision(3) << *grad_norm;
        if (log_memory_) out << " | peak_mem " << std::setprecision(3) << static_cast<double>(peak) / (1 << 30) << " GiB";
        out << std::defaultfloat << std::endl;
      }
    }
    if (save_checkpoints_) TM_RETURN_IF_ERROR(SaveEpoch(epoch, global_step));
  }
  return Status::OK();
}

Status Trainer::Run(RunSummary* summary) {
  auto start = Clock::now();
  TM_RETURN_IF_ERROR(Setup(summary));
  Synchronize(device_);
  summary->init_time_s = Seconds(start, Clock::now());
  *context_.out << "Training " << context_.config_name << " on " << context_.device.id << " ("
                << context_.device.name << "): " << summary->trainable_parameters << " of "
                << summary->total_parameters << " parameters trainable, " << steps_per_epoch_
                << " steps per epoch, seed " << seed_ << std::endl;
  return Train(summary);
}

Status RunRecipe(const Config& config, const RunContext& context, bool lora) {
  RunSummary summary;
  summary.recipe = lora ? "lora_finetune_single_device" : "full_finetune_single_device";
  summary.config = context.config_name;
  summary.device = context.device.id;
  summary.device_name = context.device.name;
  summary.torch_version = TorchVersion();
  Status s;
  {
    Trainer trainer(config, context, lora);
    try {
      s = trainer.Run(&summary);
    } catch (const c10::OutOfMemoryError& e) {
      summary.error_kind = "out_of_memory";
      std::string what = e.what();
      s = Status::Internal("out of memory on " + context.device.id + ": " + what.substr(0, what.find('\n')) +
                           "; lower batch_size or enable_activation_checkpointing=True");
    } catch (const std::exception& e) {
      std::string what = e.what();
      s = Status::Internal(summary.recipe + " failed on " + context.device.id + ": " + what.substr(0, what.find('\n')));
    }
  }
  summary.ok = s.ok();
  if (!s.ok()) {
    summary.error = s.message();
    if (summary.error_kind.empty()) summary.error_kind = "error";
  }
  if (!summary.step_times_s.empty()) {
    std::vector<double> tps;
    for (size_t i = 0; i < summary.step_times_s.size(); ++i) {
      tps.push_back(static_cast<double>(summary.step_tokens[i]) / summary.step_times_s[i]);
    }
    summary.tokens_per_second = MedianAfter(tps, static_cast<size_t>(summary.warmup_steps));
  }
  std::string source;
  summary.peak_memory_bytes = PeakMemoryBytes(context.device, &source);
  summary.peak_memory_source = source;
  StatusOr<std::string> out = config.GetString("output_dir", "");
  if (out.ok() && !out->empty() && MakeDirs(*out).ok()) {
    Status w = WriteFileAtomically(*out + "/summary.json", SummaryJson(summary).dump(2) + "\n");
    if (!w.ok() && s.ok()) s = w;
  }
  if (s.ok() && context.out != nullptr) {
    *context.out << "Finished: " << summary.losses.size() << " steps, first loss " << summary.losses.front()
                 << ", last loss " << summary.losses.back() << ", peak memory "
                 << static_cast<double>(*summary.peak_memory_bytes) / (1 << 30) << " GiB (" << source << ")\n";
  }
  return s;
}

}  // namespace

int64_t PeakMemoryBytes(const DeviceInfo& device, std::string* source) {
#ifdef TUNE_MATRIX_HAS_CUDA
  if (device.type == DeviceType::kCuda) {
    *source = "cuda_allocator";
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(std::max(0, device.index)));
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  (void)device;
  *source = "process_rss";
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

Status RunFullFinetune(const Config& config, const RunContext& context) { return RunRecipe(config, context, false); }
Status RunLoraFinetune(const Config& config, const RunContext& context) { return RunRecipe(config, context, true); }

}  // namespace tmx::recipes
