#include "recipes/checkpoint/hf_checkpoint.h"

#include <dirent.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/file_util.h"
#include "base/input_file.h"
#include "base/json_io.h"
#include "recipes/checkpoint/hf_config.h"
#include "recipes/checkpoint/hf_convert.h"
#include "harness/torch_dtypes.h"

namespace tmx::checkpoint {
namespace {

using nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

std::string ShardName(size_t i, size_t n) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return name;
}

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

// model.safetensors, the index and model-NNNNN-of-NNNNN.safetensors: what a save replaces.
bool IsHfWeightFile(const std::string& name) {
  if (name == kSingleFile || name == kIndexFile) return true;
  unsigned a = 0, b = 0;
  char tail[32] = {};
  return std::sscanf(name.c_str(), "model-%5u-of-%5u.%31s", &a, &b, tail) == 3 && std::string(tail) == "safetensors";
}

Status RemoveStaleWeights(const std::string& dir, const std::set<std::string>& keep) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Status::IoError(dir + ": cannot list the folder");
  std::vector<std::string> stale;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (IsHfWeightFile(name) && keep.count(name) == 0) stale.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : stale) {
    if (::unlink((dir + "/" + name).c_str()) != 0) {
      return Status::IoError(dir + "/" + name + ": cannot remove the weight file of an earlier save");
    }
  }
  return Status::OK();
}

int64_t Bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// config.json's torch_dtype of `type` (the dtype table's); float32 for one no config names.
std::string DtypeName(c10::ScalarType type) {
  const DtypeInfo* d = DtypeOfScalarType(type);
  return d != nullptr ? d->hf_name : "float32";
}

StatusOr<NamedTensors> ReadSharded(const std::string& dir, const ReadProgress& progress) {
  const std::string index_path = dir + "/" + kIndexFile;
  StatusOr<std::string> text = ReadFile(index_path, CheckpointIndexInput());
  if (!text.ok()) return text.status();
  StatusOr<json> parsed = ParseJsonText(index_path, *text);
  if (!parsed.ok()) return parsed.status();
  json& index = *parsed;
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return Status::InvalidArgument(index_path +
                                   ": expected a JSON object with a \"weight_map\" object of tensor "
                                   "name -> shard file; fix: rewrite the index (save_pretrained writes one)");
  }
  // Shards in first-mentioned order, each with the tensors the index puts there.
  std::vector<std::string> shards;
  std::map<std::string, std::vector<std::string>> names_in;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string() || !IsPlainFileName(file.get<std::string>())) {
      return Status::InvalidArgument(index_path + ": weight_map[\"" + name + "\"] = " + JsonForMessage(file) +
                                     " is not a file name in the checkpoint folder");
    }
    const std::string shard = file.get<std::string>();
    if (names_in.count(shard) == 0) shards.push_back(shard);
    names_in[shard].push_back(name);
  }
  std::vector<std::string> paths;
  for (const std::string& shard : shards) paths.push_back(dir + "/" + shard);
  SafetensorsLoad load(paths, progress);
  NamedTensors out;
  for (const std::string& shard : shards) {
    StatusOr<LoadedSafetensors> loaded = load.Load(dir + "/" + shard);
    if (!loaded.ok()) return Status(loaded.status()).WithContext(index_path + " lists " + shard);
    std::map<std::string, at::Tensor> by_name(loaded->tensors.begin(), loaded->tensors.end());
    for (const std::string& name : names_in[shard]) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        return Status::InvalidArgument(index_path + ": places " + name + " in " + shard +
                                       ", which does not hold it; fix: re-download the checkpoint");
      }
      out.emplace_back(name, it->second);
    }
  }
  return out;
}

}  // namespace

Status CheckHfWeightsPresent(const std::string& dir) {
  if (PathExists(dir + "/" + kIndexFile) || PathExists(dir + "/" + kSingleFile)) return Status::OK();
  return Status::NotFound(dir + ": no " + kSingleFile + " or " + kIndexFile +
                          " in the folder; fix: point to a Hugging Face checkpoint saved as safetensors (.bin "
                          "checkpoints are not read)");
}

StatusOr<NamedTensors> ReadHfSafetensors(const std::string& dir, const ReadProgress& progress) {
  if (PathExists(dir + "/" + kIndexFile)) return ReadSharded(dir, progress);
  if (PathExists(dir + "/" + kSingleFile)) {
    const std::string path = dir + "/" + kSingleFile;
    StatusOr<LoadedSafetensors> loaded = SafetensorsLoad({path}, progress).Load(path);
    if (!loaded.ok()) return loaded.status();
    return std::move(loaded->tensors);
  }
  return CheckHfWeightsPresent(dir);
}

Status LoadHfCheckpoint(const std::string& dir, const std::string& model_type, models::DecoderImpl& model,
                        const ReadProgress& progress) {
  StatusOr<NamedTensors> hf = ReadHfSafetensors(dir, progress);
  if (!hf.ok()) return hf.status();
  StatusOr<NamedTensors> tune = HfToTune(*hf, model_type, model.args(), dir);
  if (!tune.ok()) return tune.status();
  // Adapters are not in a base checkpoint: they keep the values they have.
  for (auto& adapter : models::AdapterParameters(model)) tune->push_back(std::move(adapter));
  return LoadIntoModule(model, *tune, /*strict=*/true).WithContext(dir);
}

Status SaveHfCheckpoint(const std::string& dir, const NamedTensors& state, const std::string& model_type,
                        const models::DecoderArgs& args, const HfSaveOptions& options) {
  StatusOr<NamedTensors> hf = TuneToHf(state, model_type, args);
  if (!hf.ok()) return hf.status();
  StatusOr<std::string> config =
      HfConfigJson(model_type, args, hf->empty() ? "float32" : DtypeName(hf->front().second.scalar_type()));
  if (!config.ok()) return config.status();
  TM_RETURN_IF_ERROR(MakeDirs(dir));

  // Greedy shards in tensor order, as transformers splits them.
  std::vector<NamedTensors> shards(1);
  int64_t shard_bytes = 0, total = 0;
  for (auto& [name, tensor] : *hf) {
    const int64_t bytes = Bytes(tensor);
    if (!shards.back().empty() && shard_bytes + bytes > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace_back(name, tensor);
    shard_bytes += bytes;
    total += bytes;
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  std::set<std::string> written;
  if (shards.size() == 1) {
    TM_RETURN_IF_ERROR(SaveSafetensors(dir + "/" + kSingleFile, shards[0], metadata));
    written.insert(kSingleFile);
  } else {
    json weight_map = json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string file = ShardName(i, shards.size());
      TM_RETURN_IF_ERROR(SaveSafetensors(dir + "/" + file, shards[i], metadata));
      written.insert(file);
      for (const auto& [name, tensor] : shards[i]) weight_map[name] = file;
    }
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    TM_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + kIndexFile, DumpJson(index, 2) + "\n"));
    written.insert(kIndexFile);
  }
  TM_RETURN_IF_ERROR(RemoveStaleWeights(dir, written));
  if (options.write_config) TM_RETURN_IF_ERROR(WriteFileAtomically(dir + "/config.json", *config));
  return Status::OK();
}

Status SavePeftAdapter(const std::string& dir, const NamedTensors& adapters, const std::string& model_type,
                       const models::DecoderArgs& args, const models::LoraArgs& lora,
                       const std::string& base_model_name_or_path, const NamedTensors& base) {
  StatusOr<PeftAdapterTensors> peft = TuneAdaptersToPeft(adapters, model_type, args, base);
  if (!peft.ok()) return peft.status();
  if (peft->tensors.empty()) {
    return Status::InvalidArgument(
        "SavePeftAdapter: no LoRA adapter to save; fix: pass AdapterParameters(model) "
        "of a model built with LoRA");
  }
  json rank_pattern = json::object(), alpha_pattern = json::object();
  for (const auto& [module, k] : peft->rank_multiple) {
    rank_pattern[module] = lora.rank * k;
    alpha_pattern[module] = lora.alpha * static_cast<double>(k);
  }
  const json config = {
      {"peft_type", "LORA"},
      {"task_type", args.num_classes > 0 ? "SEQ_CLS" : "CAUSAL_LM"},
      {"base_model_name_or_path", base_model_name_or_path},
      {"r", lora.rank},
      {"lora_alpha", lora.alpha},
      {"lora_dropout", lora.dropout},
      {"target_modules", peft->target_modules},
      {"rank_pattern", rank_pattern},
      {"alpha_pattern", alpha_pattern},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"modules_to_save", nullptr},
      {"use_dora", lora.use_dora},
      {"use_rslora", false},
  };
  TM_RETURN_IF_ERROR(MakeDirs(dir));
  TM_RETURN_IF_ERROR(SaveSafetensors(dir + "/adapter_model.safetensors", peft->tensors, {{"format", "pt"}}));
  return WriteFileAtomically(dir + "/adapter_config.json", DumpJson(config, 2) + "\n");
}

}  // namespace tmx::checkpoint
