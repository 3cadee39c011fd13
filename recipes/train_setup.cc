#include "recipes/train_setup.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <random>
#include <set>

#include <ATen/Parallel.h>
#include <c10/core/TensorOptions.h>

#include "base/cpu_usage.h"
#include "base/file_util.h"
#include "base/output_folder.h"
#include "base/text.h"
#include "recipes/checkpointers.h"
#include "recipes/data/config_options.h"
#include "recipes/data/datasets.h"
#include "recipes/data/samples.h"
#include "recipes/data/sources.h"
#include "recipes/models/lora.h"

namespace tmx::recipes {
namespace {

// Reads each (key, destination) pair, stopping at the first error.
template <typename T, typename Getter>
Status ReadAll(std::initializer_list<std::pair<const char*, T*>> fields, Getter get) {
  for (const auto& [key, dest] : fields) {
    StatusOr<T> v = get(key);
    TM_RETURN_IF_ERROR(v.status());
    *dest = *v;
  }
  return Status::OK();
}

}  // namespace

StatusOr<uint64_t> ReadSeed(const Config& config) {
  if (config.IsNull("seed")) return static_cast<uint64_t>(std::random_device{}());
  StatusOr<int64_t> seed = config.GetInt("seed");
  TM_RETURN_IF_ERROR(seed.status());
  return static_cast<uint64_t>(*seed);
}

namespace {

// ac_mode and ac_option (only the full distributed recipes' schemas have them; SelectiveCheckpointingChecks
// refuses them beside enable_activation_checkpointing=True): torchtune's apply_selective_activation_checkpointing
// wraps every layer (full), or the nth, 2nth, ... (selective, ac_option=n; 0 wraps every layer).
Status ReadSelectiveCheckpointing(const Config& config, TrainingSettings* s) {
  if (!config.Find("ac_mode").IsDefined() || config.IsNull("ac_mode")) return Status::OK();
  StatusOr<std::string> mode = config.GetString("ac_mode");
  TM_RETURN_IF_ERROR(mode.status());
  s->activation_checkpointing = true;
  if (*mode != "selective") return Status::OK();
  StatusOr<int64_t> every = config.GetInt("ac_option");
  TM_RETURN_IF_ERROR(every.status());
  s->activation_checkpointing_every = std::max<int64_t>(*every, 1);
  return Status::OK();
}

}  // namespace

StatusOr<TrainingSettings> ReadTrainingSettings(const Config& config, TrainKind kind) {
  TrainingSettings s;
  StatusOr<std::string> out = config.GetString("output_dir");
  TM_RETURN_IF_ERROR(out.status());
  s.output_dir = *out;
  StatusOr<std::string> ckpt = config.GetString("checkpointer.output_dir", s.output_dir);
  StatusOr<std::string> log_dir = config.GetString("metric_logger.log_dir", s.output_dir + "/logs");
  StatusOr<std::string> log_file = config.GetString("metric_logger.filename", "metrics.jsonl");
  StatusOr<std::string> dtype = config.GetString("dtype");
  for (const Status& st : {ckpt.status(), log_dir.status(), log_file.status(), dtype.status()}) TM_RETURN_IF_ERROR(st);
  s.checkpoint_dir = *ckpt;
  s.metrics_path = *log_dir + "/" + *log_file;
  s.dtype = DtypeNamed(*dtype);

  auto get_int = [&](const char* key) { return config.GetInt(key); };
  TM_RETURN_IF_ERROR(ReadAll<int64_t>({{"batch_size", &s.batch_size},
                                       {"epochs", &s.epochs},
                                       {"gradient_accumulation_steps", &s.gradient_accumulation_steps},
                                       {"log_every_n_steps", &s.log_every_n_steps}},
                                      get_int));
  auto get_bool = [&](const char* key) { return config.GetBool(key); };
  TM_RETURN_IF_ERROR(ReadAll<bool>({{"shuffle", &s.shuffle},
                                    {"save_checkpoints", &s.save_checkpoints},
                                    {"log_peak_memory_stats", &s.log_peak_memory},
                                    {"enable_activation_checkpointing", &s.activation_checkpointing},
                                    {"enable_activation_offloading", &s.activation_offloading},
                                    {"resume_from_checkpoint", &s.resume},
                                    {"optimizer_in_bwd", &s.optimizer_in_bwd}},
                                   get_bool));
  if (kind == TrainKind::kLora) {
    TM_RETURN_IF_ERROR(ReadAll<bool>({{"save_adapter_weights_only", &s.save_adapter_weights_only}}, get_bool));
  }
  if (!config.IsNull("max_steps_per_epoch")) {
    StatusOr<int64_t> max_steps = config.GetInt("max_steps_per_epoch");
    TM_RETURN_IF_ERROR(max_steps.status());
    s.max_steps_per_epoch = *max_steps;
  }
  if (!config.IsNull("clip_grad_norm")) {
    StatusOr<double> clip = config.GetDouble("clip_grad_norm");
    TM_RETURN_IF_ERROR(clip.status());
    s.clip_grad_norm = *clip;
  }
  s.has_schedule = !config.IsNull("lr_scheduler");
  if (s.has_schedule) {
    StatusOr<int64_t> warmup = config.GetInt("lr_scheduler.num_warmup_steps");
    StatusOr<double> cycles = config.GetDouble("lr_scheduler.num_cycles");
    TM_RETURN_IF_ERROR(warmup.status());
    TM_RETURN_IF_ERROR(cycles.status());
    s.warmup_steps = *warmup;
    s.num_cycles = *cycles;
  }
  if (!config.IsNull("quantizer")) {  // only the QAT recipes' schemas have the key
    StatusOr<int64_t> group = config.GetInt("quantizer.groupsize");
    TM_RETURN_IF_ERROR(group.status());
    s.fake_quant_group_size = *group;
    if (!config.IsNull("fake_quant_after_n_steps")) {
      StatusOr<int64_t> after = config.GetInt("fake_quant_after_n_steps");
      TM_RETURN_IF_ERROR(after.status());
      s.fake_quant_after_n_steps = *after;
    }
  }
  TM_RETURN_IF_ERROR(ReadSelectiveCheckpointing(config, &s));
  StatusOr<uint64_t> seed = ReadSeed(config);
  TM_RETURN_IF_ERROR(seed.status());
  s.seed = *seed;
  return s;
}

StatusOr<TrainableModel> SetupModel(const Config& config, const Registry& registry, TrainKind kind,
                                    const TrainingSettings& settings, const c10::Device& device, bool allow_stand_ins,
                                    std::vector<std::string>* stand_ins, RunProgress* progress) {
  TrainableModel m;
  StatusOr<ModelChoice> choice = ModelFromConfig(config, registry);
  TM_RETURN_IF_ERROR(choice.status());
  bool lora = kind == TrainKind::kLora;
  if (choice->lora.has_value() != lora) {
    return Status::InvalidArgument(config.OriginOf("model._component_").ToString() + ": model '" + choice->component +
                                   "' " +
                                   (lora ? "has no LoRA adapters; lora_finetune_single_device needs a lora_ model"
                                         : "has LoRA adapters; use lora_finetune_single_device"));
  }
  m.choice = *choice;
  if (progress != nullptr) {
    const int64_t total = CountModelParameters(m.choice).total;  // on the meta device: no memory, no time
    progress->Begin("Building model " + m.choice.component + " (" + FormatCount(total) + " parameters, " +
                    DtypeConfigName(settings.dtype) + ")");
  }
  m.model = models::Decoder(choice->args, choice->lora, c10::TensorOptions().dtype(settings.dtype).device(device));
  m.model->set_activation_checkpointing(settings.activation_checkpointing);
  m.model->set_activation_checkpointing_every(settings.activation_checkpointing_every);
  m.model->set_activation_offloading(settings.activation_offloading);
  if (settings.int4_group_size > 0) {
    StatusOr<int64_t> quantized = models::QuantizeInt4Linears(*m.model, settings.int4_group_size);
    if (!quantized.ok()) {
      return Status::InvalidArgument(config.OriginOf("quantizer").ToString() + ": " + quantized.status().message());
    }
  }
  if (progress != nullptr) progress->End("Built the model");
  // The load's first report (its header read) begins the phase, so a run from the seed or a stand-in says
  // nothing of loading.
  bool loading = false;
  checkpoint::ReadProgress bytes;
  if (progress != nullptr) {
    bytes = [&](int64_t done, int64_t total) {
      if (!loading) {
        StatusOr<std::string> dir = config.GetString("checkpointer.checkpoint_dir");
        progress->Begin("Loading weights from " + (dir.ok() ? *dir : std::string("the checkpoint")) + " (" +
                        FormatBytes(total) + ")");
        loading = true;
      }
      progress->Bytes("  loaded", done, total);
    };
  }
  TM_RETURN_IF_ERROR(LoadStartingWeights(config, registry, m.choice, *m.model, allow_stand_ins, stand_ins, bytes));
  if (loading) progress->End("Loaded the weights");
  // DoRA's magnitude starts from the loaded base weights' row norms, as torchtune sets it after loading.
  models::InitializeDoraMagnitudes(*m.model);
  if (lora) models::FreezeBaseParameters(*m.model);
  if (settings.fake_quant_group_size > 0) {
    StatusOr<int64_t> attached = models::AttachFakeQuantization(
        *m.model, settings.fake_quant_group_size,
        lora ? models::FakeQuantScope::kAdaptedLinears : models::FakeQuantScope::kEveryLinear);
    if (!attached.ok()) return Status::InvalidArgument(config.OriginOf("quantizer").ToString() + ": " + attached.status().message());
    m.fake_quantized_linears = *attached;
  }
  for (const auto& p : m.model->named_parameters()) {
    m.total_parameters += p.value().numel();
    if (p.value().requires_grad()) {
      m.trained.emplace_back(p.key(), p.value());
      m.trained_tensors.push_back(p.value());
      m.trainable_parameters += p.value().numel();
    }
  }
  return m;
}

namespace {

// The file option that a missing-file NotFound of `component` is about, for the note.
std::string MissingFile(const data::TokenizerOptions& o) {
  for (const std::string* f : {&o.path, &o.merges_file, &o.tokenizer_json_path}) {
    if (!f->empty() && !IsRegularFile(*f)) return *f;
  }
  return "a tokenizer file";
}

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The folder a Hub repo holding the tokenizer file `path` is downloaded into: the file's folder, or the one
// above for a file in the repo's original/ (Meta's tokenizer.model).
std::string RepoFolderOf(const std::string& path) {
  std::string dir = ParentDir(path);
  return Basename(dir) == "original" ? ParentDir(dir) : dir;
}

// The loader of `settings`' batches, seeded order and data-parallel shard, padding with `pad_id`.
data::DataLoaderOptions LoaderOptions(const TrainingSettings& settings, int64_t pad_id) {
  data::DataLoaderOptions loader;
  loader.batch_size = settings.batch_size;
  loader.shuffle = settings.shuffle;
  loader.seed = settings.seed;
  loader.pad_id = pad_id;
  loader.num_shards = settings.world_size;
  loader.shard = settings.rank;
  return loader;
}

const char* kStandInHint = "; to train on the shipped sample of the same kind instead, run with --allow-stand-ins";

}  // namespace

std::vector<Problem> MissingModelInputs(const Config& config, const Registry& registry) {
  std::vector<Problem> problems = MissingCheckpointFiles(config, registry);
  StatusOr<data::TokenizerConfig> tokenizer = data::TokenizerFromConfig(config);
  StatusOr<data::TokenizerComponent> component =
      tokenizer.ok() ? data::FindTokenizerComponent(tokenizer->component) : tokenizer.status();
  if (component.ok()) {
    StatusOr<ModelChoice> model = ModelFromConfig(config, registry);
    const std::string hub = model.ok() && !model->preset->hf_checkpoint.empty() ? model->preset->hf_checkpoint
                                                                                : "<the model's hub id>";
    for (const auto& [option, path] : data::TokenizerFiles(*component, tokenizer->options)) {
      if (IsRegularFile(path)) continue;
      const std::string key = "tokenizer." + option;
      problems.push_back({config.OriginOf(key).ToString(), key,
                          key + " " + path + " does not exist; fix: put the tokenizer's file there (e.g. `tune download " +
                              hub + " --output-dir " + RepoFolderOf(path) + "`), or set " + key + " to where it is"});
    }
  }
  return problems;
}

std::vector<Problem> MissingInputs(const Config& config, const Registry& registry) {
  std::vector<Problem> problems = MissingModelInputs(config, registry);
  std::vector<std::string> datasets = {"dataset"};
  if (!config.IsNull("run_val_every_n_steps") && !config.IsNull("dataset_val")) datasets.push_back("dataset_val");
  for (const std::string& key : datasets) {
    StatusOr<data::DatasetConfig> dataset = data::DatasetFromConfig(config, key);
    if (!dataset.ok()) continue;  // validation reports a malformed dataset
    Status present = data::CheckDatasetSource(dataset->component, dataset->options);
    if (present.code() == Status::Code::kNotFound) {
      problems.push_back({config.OriginOf(key).ToString(), key, present.message()});
    }
  }
  return problems;
}

std::optional<Problem> DiskSpaceProblem(const Config& config, const std::string& key, const std::string& folder,
                                        const CheckpointBytes& need, int64_t free_bytes) {
  if (need.total() <= free_bytes) return std::nullopt;
  const std::string where = key == "output_dir" ? "pass another output_dir=..." : "set " + key + "=... to a folder";
  std::string fix = where + " on a filesystem with " + FormatBytes(need.total()) + " free, or free space there";
  if (need.weights > 0 && need.adapters > 0) {
    fix += ", save_adapter_weights_only=True (" + FormatBytes((need.adapters + need.train_state) * need.epochs) + ")";
  }
  fix += ", or save_checkpoints=False";
  return Problem{config.OriginOf(key).ToString(), key,
                 key + " " + folder + ": the checkpoints this run writes need about " + FormatBytes(need.total()) +
                     " (" + need.Describe() + ") and its filesystem has " + FormatBytes(free_bytes) +
                     " free, so a checkpoint would fail (No space left on device); fix: " + fix};
}

std::vector<Problem> OutputDirProblems(const Config& config) {
  StatusOr<std::string> out = config.GetString("output_dir");
  if (!out.ok()) return {};
  const std::string cause = FolderWriteProblem(*out);
  if (cause.empty()) return {};
  return {{config.OriginOf("output_dir").ToString(), "output_dir",
           "output_dir " + *out + " cannot be created or written: " + cause +
               "; fix: pass another output_dir=... (a folder this user may write)"}};
}

std::vector<Problem> OutputProblems(const Config& config, const Registry& registry, TrainKind kind) {
  StatusOr<TrainingSettings> settings = ReadTrainingSettings(config, kind);
  if (!settings.ok()) return {};  // validation reports it
  const TrainingSettings& s = *settings;
  struct Folder {
    std::string key, path, what;
  };
  std::vector<Folder> folders = {{"output_dir", s.output_dir, ""},
                                 {"metric_logger.log_dir", ParentDir(s.metrics_path), " (where the metrics log goes)"}};
  if (s.save_checkpoints) folders.push_back({"checkpointer.output_dir", s.checkpoint_dir, " (where checkpoints go)"});
  std::vector<Problem> problems;
  std::set<std::string> causes;  // one problem per cause: the folders are usually one inside another
  for (const Folder& f : folders) {
    const std::string cause = FolderWriteProblem(f.path);
    if (cause.empty() || !causes.insert(cause).second) continue;
    const std::string fix = f.key == "output_dir" ? "pass another output_dir=... (a folder this user may write)"
                                                  : "set " + f.key + "=... to a folder this user may write, or "
                                                                     "leave it out to write under output_dir";
    problems.push_back({config.OriginOf(f.key).ToString(), f.key,
                        f.key + " " + f.path + f.what + " cannot be created or written: " + cause + "; fix: " + fix});
  }
  if (!s.save_checkpoints || !FolderWriteProblem(s.checkpoint_dir).empty()) return problems;
  StatusOr<CheckpointBytes> need = EstimateCheckpointBytes(config, registry);
  StatusOr<int64_t> free_bytes = FreeBytes(s.checkpoint_dir);
  if (!need.ok() || !free_bytes.ok()) return problems;  // validation reports a config that cannot be estimated
  const std::string key = s.checkpoint_dir == s.output_dir ? "output_dir" : "checkpointer.output_dir";
  if (std::optional<Problem> p = DiskSpaceProblem(config, key, s.checkpoint_dir, *need, *free_bytes)) {
    problems.push_back(std::move(*p));
  }
  return problems;
}

StatusOr<std::unique_ptr<data::ModelTokenizer>> SetupTokenizer(const Config& config, const models::DecoderArgs& model,
                                                                bool allow_stand_ins,
                                                                std::vector<std::string>* stand_ins) {
  StatusOr<data::TokenizerConfig> tokenizer_config = data::TokenizerFromConfig(config);
  TM_RETURN_IF_ERROR(tokenizer_config.status());
  data::TokenizerOptions options = tokenizer_config->options;
  if (!options.max_seq_len) options.max_seq_len = std::min<int64_t>(model.max_seq_len, 2048);
  const std::string& component = tokenizer_config->component;
  StatusOr<std::unique_ptr<data::ModelTokenizer>> tokenizer = data::BuildTokenizer(component, options);
  if (tokenizer.status().code() == Status::Code::kNotFound) {
    if (!allow_stand_ins) return Status::NotFound(tokenizer.status().message() + kStandInHint);
    StatusOr<data::TokenizerOptions> sample = data::SampleTokenizerOptions(component, options);
    TM_RETURN_IF_ERROR(sample.status());
    std::string missing = MissingFile(options);
    tokenizer = data::BuildTokenizer(component, *sample);
    TM_RETURN_IF_ERROR(tokenizer.status());
    std::string file = sample->path.empty() ? sample->tokenizer_json_path : sample->path;
    stand_ins->push_back(data::SampleNote("tokenizer", (*tokenizer)->name(), Basename(file), missing));
  }
  return tokenizer;
}

Status IdOutsideVocabulary(const Config& config, const data::ModelTokenizer& tokenizer, int64_t id,
                           const std::string& where, int64_t vocab_size) {
  return Status::InvalidArgument(config.OriginOf("tokenizer").ToString() + ": tokenizer " + tokenizer.name() +
                                 " gives " + where + " id " + std::to_string(id) + " (" + tokenizer.base().Piece(id) +
                                 "), outside the model's vocabulary of " + std::to_string(vocab_size) +
                                 " ids; fix: use the model family's own tokenizer");
}

int64_t FoldIntoVocabulary(int64_t id, const models::DecoderArgs& model) {
  return model.vocab_cut_from > 0 && id >= 0 ? id % model.vocab_size : id;
}

namespace {

void FoldSample(data::Sample* sample, const models::DecoderArgs& model) {
  if (model.vocab_cut_from <= 0) return;
  for (int64_t& id : sample->tokens) id = FoldIntoVocabulary(id, model);
  for (int64_t& id : sample->labels) id = FoldIntoVocabulary(id, model);
}

}  // namespace

namespace {

// `dataset_key`'s data loaded by `load` from the config's options; a dataset this machine lacks is NotFound
// naming it, unless `allow_stand_ins`: then the shipped sample of the same kind is loaded and a line saying so
// is added to `stand_ins`.
template <typename Data>
StatusOr<Data> LoadOrStandIn(const data::DatasetConfig& dataset, const std::string& dataset_key,
                             bool allow_stand_ins, std::vector<std::string>* stand_ins,
                             const std::function<StatusOr<Data>(const data::DatasetOptions&)>& load) {
  StatusOr<Data> loaded = load(dataset.options);
  if (loaded.status().code() != Status::Code::kNotFound) return loaded;
  if (!allow_stand_ins) return Status::NotFound(loaded.status().message() + kStandInHint);
  StatusOr<data::DatasetOptions> sample = data::SampleDatasetOptions(dataset.component, dataset.options);
  TM_RETURN_IF_ERROR(sample.status());
  std::string missing = data::DescribeSource(
      {dataset.options.source, dataset.options.data_files, dataset.options.data_dir, dataset.options.split});
  loaded = load(*sample);
  TM_RETURN_IF_ERROR(loaded.status());
  std::string file = sample->data_files.empty() ? sample->source : Basename(sample->data_files.front());
  stand_ins->push_back(data::SampleNote(dataset_key, dataset.component, file, missing));
  return loaded;
}

// What the model is fed must index its embedding. A tokenizer may know ids the model lacks and never emit them
// for text (torchtune's Llama 3 tokenizer has <|image|> at 128256 beside Llama 3.2's 128256-row embedding), so
// the ids the data holds are checked, and the padding id. Each of `samples` is folded into a cut vocabulary
// first (FoldSample); `what` names sample i in the error ("sample 3 the").
Status FoldAndCheckIds(const Config& config, const data::ModelTokenizer& tokenizer, const models::DecoderArgs& model,
                       const std::vector<data::Sample*>& samples,
                       const std::function<std::string(size_t)>& what, int64_t* pad_id) {
  auto outside = [&](int64_t id, const std::string& where) {
    return IdOutsideVocabulary(config, tokenizer, id, where, model.vocab_size);
  };
  *pad_id = FoldIntoVocabulary(data::CollatePadId(tokenizer.base()), model);
  if (*pad_id < 0 || *pad_id >= model.vocab_size) return outside(*pad_id, "its padding");
  for (size_t i = 0; i < samples.size(); ++i) {
    FoldSample(samples[i], model);
    for (int64_t id : samples[i]->tokens) {
      if (id < 0 || id >= model.vocab_size) return outside(id, what(i));
    }
  }
  return Status::OK();
}

}  // namespace

StatusOr<data::DataLoader> SetupData(const Config& config, const TrainingSettings& settings,
                                     const models::DecoderArgs& model, bool allow_stand_ins,
                                     std::vector<std::string>* stand_ins, const std::string& dataset_key) {
  StatusOr<std::unique_ptr<data::ModelTokenizer>> tokenizer = SetupTokenizer(config, model, allow_stand_ins, stand_ins);
  TM_RETURN_IF_ERROR(tokenizer.status());
  StatusOr<data::DatasetConfig> dataset_config = data::DatasetFromConfig(config, dataset_key);
  TM_RETURN_IF_ERROR(dataset_config.status());
  dataset_config->options.vocab_size = model.vocab_size;  // what random_tokens_dataset draws from
  StatusOr<data::TokenizerConfig> transform = data::TokenizerFromConfig(config);
  StatusOr<data::TokenizerComponent> component =
      transform.ok() ? data::FindTokenizerComponent(transform->component) : transform.status();
  if (component.ok() && component->images) dataset_config->options.image_size = transform->options.image_size;
  StatusOr<data::SftDataset> dataset = LoadOrStandIn<data::SftDataset>(
      *dataset_config, dataset_key, allow_stand_ins, stand_ins, [&](const data::DatasetOptions& options) {
        return data::LoadSftDataset(dataset_config->component, options, **tokenizer);
      });
  TM_RETURN_IF_ERROR(dataset.status());
  std::vector<data::Sample*> samples;
  for (data::Sample& sample : dataset->samples) samples.push_back(&sample);
  int64_t pad_id = 0;
  TM_RETURN_IF_ERROR(FoldAndCheckIds(
      config, **tokenizer, model, samples, [](size_t i) { return "sample " + std::to_string(i) + " the"; }, &pad_id));
  return data::DataLoader::Create(std::move(dataset->samples), LoaderOptions(settings, pad_id));
}

StatusOr<OptimizerPtr> SetupOptimizer(const Config& config, const Registry& registry,
                                      const std::vector<at::Tensor>& tensors) {
  StatusOr<const OptimizerComponent*> optimizer = OptimizerOf(config, registry);
  TM_RETURN_IF_ERROR(optimizer.status());
  return (*optimizer)->Build(config, tensors);
}

StatusOr<data::DataLoader> SetupPreferenceData(const Config& config, const TrainingSettings& settings,
                                               const models::DecoderArgs& model, bool allow_stand_ins,
                                               std::vector<std::string>* stand_ins) {
  StatusOr<std::unique_ptr<data::ModelTokenizer>> tokenizer = SetupTokenizer(config, model, allow_stand_ins, stand_ins);
  TM_RETURN_IF_ERROR(tokenizer.status());
  StatusOr<data::DatasetConfig> dataset_config = data::DatasetFromConfig(config, "dataset");
  TM_RETURN_IF_ERROR(dataset_config.status());
  using Pairs = std::vector<data::PreferenceSample>;
  StatusOr<Pairs> pairs = LoadOrStandIn<Pairs>(
      *dataset_config, "dataset", allow_stand_ins, stand_ins, [&](const data::DatasetOptions& options) {
        return data::LoadPreferenceDataset(dataset_config->component, options, **tokenizer);
      });
  if (!pairs.ok()) return pairs.status().WithContext(config.OriginOf("dataset._component_").ToString() + ": dataset");
  std::vector<data::Sample*> samples;  // each pair's chosen, then rejected
  for (data::PreferenceSample& pair : *pairs) {
    samples.push_back(&pair.chosen);
    samples.push_back(&pair.rejected);
  }
  int64_t pad_id = 0;
  TM_RETURN_IF_ERROR(FoldAndCheckIds(
      config, **tokenizer, model, samples, [](size_t i) { return "pair " + std::to_string(i / 2) + " the"; },
      &pad_id));
  return data::DataLoader::CreatePreference(std::move(pairs).value(), LoaderOptions(settings, pad_id));
}

}  // namespace tmx::recipes
