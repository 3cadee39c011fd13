#include "recipes/checkpointers.h"

#include "base/file_util.h"
#include "recipes/checkpoint/hf_checkpoint.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/models/lora.h"
#include "recipes/train_state.h"

namespace tmx::recipes {
namespace {

const std::string& ModelType(const ModelChoice& choice) { return choice.preset->hf_model_type; }

// The weight files of a torchtune-format checkpoint: checkpointer.checkpoint_files (a list), or
// model.safetensors.
StatusOr<std::vector<std::string>> TorchtuneFiles(const Config& config, const std::string& key) {
  YAML::Node listed = config.Find(key + ".checkpoint_files");
  if (!listed.IsDefined() || listed.IsNull()) return std::vector<std::string>{"model.safetensors"};
  if (!listed.IsSequence()) {
    return Status::InvalidArgument(config.OriginOf(key + ".checkpoint_files").ToString() + ": " + key +
                                   ".checkpoint_files: a torchtune-format checkpoint lists its files, "
                                   "e.g. [model.safetensors]");
  }
  std::vector<std::string> files;
  for (const auto& f : listed) files.push_back(f.as<std::string>());
  return files;
}

Status LoadTorchtune(const std::string& dir, const std::vector<std::string>& files, models::DecoderImpl& model,
                     bool lora, const checkpoint::ReadProgress& progress = {}) {
  std::vector<std::string> paths;
  for (const std::string& f : files) paths.push_back(dir + "/" + f);
  checkpoint::SafetensorsLoad load(paths, progress);
  checkpoint::NamedTensors all;
  for (const std::string& path : paths) {
    StatusOr<checkpoint::LoadedSafetensors> loaded = load.Load(path);
    TM_RETURN_IF_ERROR(loaded.status());
    for (auto& t : loaded->tensors) all.push_back(std::move(t));
  }
  Status loaded = LoadBaseWeights(model, all, lora);
  return paths.size() == 1 ? loaded.WithContext(paths[0]) : loaded;  // a tensor's problem names its file
}

}  // namespace

void AddCheckpointerComponents(std::vector<ComponentSpec>* out) {
  std::vector<FieldSpec> params = {
      Nullable(NonEmpty(Field("checkpoint_dir", FieldType::kString, "null",
                              "folder with the weights to start from; null: initialise them from the seed"))),
      Field("checkpoint_files", FieldType::kAny, "[model.safetensors]",
            "weight files in checkpoint_dir (a list, or torchtune's filename_format/max_filename; the Hugging Face "
            "checkpointer reads the folder's index instead)"),
      Nullable(Field("recipe_checkpoint", FieldType::kString, "null", "optimizer/progress state to resume from")),
      Nullable(Field("adapter_checkpoint", FieldType::kString, "null", "LoRA adapter weights to start from")),
      NonEmpty(Field("output_dir", FieldType::kString, "${output_dir}", "where checkpoints are written")),
      Field("model_type", FieldType::kString, "LLAMA3_2", "torchtune's model type; the model component decides here"),
      Nullable(AtLeast(Field("keep_last_n_checkpoints", FieldType::kInt, "null", "accepted for torchtune compatibility"),
                       1)),
      Field("safe_serialization", FieldType::kBool, "True", "always safetensors"),
  };
  struct Entry {
    const char* name;
    std::vector<std::string> aliases;
    CheckpointFormat format;
    const char* doc;
  } entries[] = {
      {"tune_matrix.training.FullModelHFCheckpointer",
       {"torchtune.training.FullModelHFCheckpointer"},
       CheckpointFormat::kHuggingFace,
       "Hugging Face checkpoints in and out: safetensors (sharded with an index), config.json, PEFT adapters"},
      {"tune_matrix.training.FullModelCheckpointer",
       {"torchtune.training.FullModelTorchTuneCheckpointer"},
       CheckpointFormat::kTorchtune,
       "safetensors with torchtune's parameter names"},
  };
  for (const Entry& e : entries) {
    ComponentSpec c;
    c.name = e.name;
    c.aliases = e.aliases;
    c.kind = "checkpointer";
    c.doc = e.doc;
    c.params = params;
    c.impl = std::make_shared<CheckpointerComponent>(e.format);
    out->push_back(c);
  }
  ComponentSpec meta;
  meta.name = "torchtune.training.FullModelMetaCheckpointer";
  meta.kind = "checkpointer";
  meta.unsupported_reason =
      "Meta's consolidated.00.pth is a Python pickle, which LibTorch's C++ API does not read; use the model's "
      "Hugging Face checkpoint with torchtune.training.FullModelHFCheckpointer";
  out->push_back(meta);
}

CheckpointFormat CheckpointFormatOf(const Config& config, const Registry& registry, const std::string& key) {
  YAML::Node node = config.Find(key + "._component_");
  const ComponentSpec* spec = registry.FindComponent(node.IsScalar() ? node.Scalar() : "");
  const auto* impl = spec == nullptr ? nullptr : dynamic_cast<const CheckpointerComponent*>(spec->impl.get());
  return impl == nullptr ? CheckpointFormat::kTorchtune : impl->format();
}

namespace {

// <key>.checkpoint_dir `dir` is missing: what to do.
std::string MissingDirMessage(const std::string& key, const std::string& dir, const ModelChoice& choice) {
  const std::string& hub = choice.preset->hf_checkpoint;
  const std::string fetch = hub.empty() ? "put the model's weights there (e.g. `tune download <its hub id> --output-dir " + dir + "`)"
                                        : "put the weights of " + hub + " there (e.g. `tune download " + hub +
                                              " --output-dir " + dir + "`)";
  return key + ".checkpoint_dir " + dir + " does not exist; fix: " + fetch + ", set " + key +
         ".checkpoint_dir to where they are, or to null to start from the seed";
}

}  // namespace

std::vector<Problem> MissingCheckpointFiles(const Config& config, const Registry& registry, const std::string& key,
                                            const std::string& model_key) {
  if (config.IsNull(key + ".checkpoint_dir")) return {};
  StatusOr<std::string> dir = config.GetString(key + ".checkpoint_dir");
  StatusOr<ModelChoice> choice = ModelFromConfig(config, registry, model_key);
  if (!dir.ok() || !choice.ok()) return {};  // validation reports those
  auto problem = [&](const std::string& key, const std::string& message) {
    return Problem{config.OriginOf(key).ToString(), key, message};
  };
  if (!IsDirectory(*dir)) return {problem(key + ".checkpoint_dir", MissingDirMessage(key, *dir, *choice))};
  if (CheckpointFormatOf(config, registry, key) == CheckpointFormat::kHuggingFace) {
    Status present = checkpoint::CheckHfWeightsPresent(*dir);
    if (present.ok()) return {};
    return {problem(key + ".checkpoint_dir", present.message())};
  }
  StatusOr<std::vector<std::string>> files = TorchtuneFiles(config, key);
  if (!files.ok()) return {};
  std::vector<Problem> problems;
  for (const std::string& f : *files) {
    if (!IsRegularFile(*dir + "/" + f)) {
      problems.push_back(problem(key + ".checkpoint_files",
                                 "checkpoint file " + *dir + "/" + f + " does not exist; fix: put it there, or list "
                                 "the files the folder holds in " + key + ".checkpoint_files"));
    }
  }
  return problems;
}

Status LoadStartingWeights(const Config& config, const Registry& registry, const ModelChoice& choice,
                           models::DecoderImpl& model, bool allow_stand_ins, std::vector<std::string>* stand_ins,
                           const checkpoint::ReadProgress& progress, const std::string& key) {
  if (config.IsNull(key + ".checkpoint_dir")) return Status::OK();
  StatusOr<std::string> dir = config.GetString(key + ".checkpoint_dir");
  TM_RETURN_IF_ERROR(dir.status());
  if (!IsDirectory(*dir)) {
    if (allow_stand_ins) {
      stand_ins->push_back("weights of " + choice.component + " initialised from the seed (checkpoint_dir " + *dir +
                           " is absent)");
      return Status::OK();
    }
    return Status::NotFound(config.OriginOf(key + ".checkpoint_dir").ToString() + ": " +
                            MissingDirMessage(key, *dir, choice) + "; to train from the seed instead, run with "
                            "--allow-stand-ins");
  }
  bool lora = choice.lora.has_value();
  Status loaded;
  if (CheckpointFormatOf(config, registry, key) == CheckpointFormat::kHuggingFace) {
    loaded = checkpoint::LoadHfCheckpoint(*dir, ModelType(choice), model, progress);
  } else {
    StatusOr<std::vector<std::string>> files = TorchtuneFiles(config, key);
    TM_RETURN_IF_ERROR(files.status());
    loaded = LoadTorchtune(*dir, *files, model, lora, progress);
  }
  return loaded.ok() ? loaded : loaded.WithContext(key + ".checkpoint_dir " + *dir);
}

Status SaveEpochWeights(const std::string& dir, CheckpointFormat format, const ModelChoice& choice,
                        const models::DecoderImpl& model, bool adapter_only) {
  bool lora = choice.lora.has_value();
  if (format == CheckpointFormat::kTorchtune) {
    if (lora) {
      TM_RETURN_IF_ERROR(checkpoint::SaveSafetensors(dir + "/adapter_model.safetensors", models::AdapterParameters(model)));
      if (adapter_only) return Status::OK();
      return checkpoint::SaveSafetensors(dir + "/model.safetensors", models::MergedStateDict(model));
    }
    return checkpoint::SaveSafetensors(dir + "/model.safetensors", checkpoint::ModuleTensors(model));
  }
  if (lora) {
    TM_RETURN_IF_ERROR(checkpoint::SavePeftAdapter(dir, models::AdapterParameters(model), ModelType(choice), choice.args,
                                                   *choice.lora, choice.preset->hf_checkpoint,
                                                   checkpoint::ModuleTensors(model)));
    if (adapter_only) return Status::OK();
    return checkpoint::SaveHfCheckpoint(dir, models::MergedStateDict(model), ModelType(choice), choice.args);
  }
  return checkpoint::SaveHfCheckpoint(dir, checkpoint::ModuleTensors(model), ModelType(choice), choice.args);
}

Status LoadEpochWeights(const std::string& dir, CheckpointFormat format, const ModelChoice& choice,
                        models::DecoderImpl& model) {
  if (format == CheckpointFormat::kHuggingFace) return checkpoint::LoadHfCheckpoint(dir, ModelType(choice), model);
  return LoadTorchtune(dir, {"model.safetensors"}, model, /*lora=*/false);
}

}  // namespace tmx::recipes
