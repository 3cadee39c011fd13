#include "recipes/train_schema.h"

#include <algorithm>
#include <cstdlib>

#include "base/text.h"
#include "recipes/distributed/collective_backends.h"
#include "recipes/distributed/process_group.h"
#include "recipes/optimizers.h"

namespace tmx::recipes {
namespace {

bool IsTrue(const YAML::Node& v) {
  try {
    return v.IsScalar() && v.as<bool>();
  } catch (const YAML::Exception&) {
    return false;
  }
}

DeviceRefusal DtypeCheck(const YAML::Node& v, const Config&, const DeviceInfo& d) {
  if (!v.IsScalar() || v.Scalar() != "bf16") return {};
  if (d.bf16_matmul_backward) return {};
  return {"dtype bf16 needs a device where bf16 matmul and backward work; on " + d.id + " they did not (" +
              (d.notes.empty() ? "probe failed" : d.notes.front()) + ")",
          {"dtype=fp32"}};
}

DeviceRefusal OffloadCheck(const YAML::Node& v, const Config&, const DeviceInfo& d) {
  if (!IsTrue(v) || d.traits().activation_offloading) return {};
  std::vector<std::string> able;
  for (const DeviceTypeTraits& t : DeviceTypes()) {
    if (t.activation_offloading) able.push_back(t.name);
  }
  return {"activation offloading moves activations from an accelerator's memory to page-locked host memory (" +
              JoinStrings(able, ", ") + "); on " + d.id + " they are in host memory already",
          {"enable_activation_offloading=False"}};
}

// An output_dir that is the file system's root, a system folder or the home folder itself: a run writes
// checkpoints, metrics and summary.json straight into it (and resuming reads them back from there).
std::string OutputDirCheck(const YAML::Node& v) {
  std::string dir = v.Scalar();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  static const std::vector<std::string> kSystem = {"/",     "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc",
                                                   "/root", "/run", "/sbin", "/sys", "/usr", "/var", "/home"};
  const char* home = std::getenv("HOME");
  const bool is_home = (home != nullptr && *home && dir == home) || dir == "~";
  if (std::find(kSystem.begin(), kSystem.end(), dir) == kSystem.end() && !is_home) return "";
  return "'" + v.Scalar() + "' is " + (is_home ? "the home folder" : "a system folder") +
         ", and a run writes its checkpoints, metrics and summary.json straight into output_dir; use a folder of "
         "its own, e.g. output_dir=/tmp/torchtune/my_run";
}

DeviceRefusal TrainsCheck(const YAML::Node&, const Config&, const DeviceInfo& d) {
  if (d.traits().trains) return {};
  return {"device " + d.id + " cannot train (" + d.traits().doc + "); use device=cpu or a GPU", {}};
}

}  // namespace

FieldSpec OutputDirField(std::string doc) {
  return WithValueCheck(Required(NonEmpty(Field("output_dir", FieldType::kString, "", std::move(doc)))),
                        OutputDirCheck);
}

FieldSpec SeedField() {
  return Nullable(AtLeast(Field("seed", FieldType::kInt, "null", "random seed; null picks one and logs it"), 0));
}

FieldSpec LogLevelField() {
  return Choices(Field("log_level", FieldType::kString, "INFO", "verbosity"), {"DEBUG", "INFO", "WARN", "WARNING", "ERROR"});
}

FieldSpec DeviceField() {
  return WithCheck(Field("device", FieldType::kString, "cuda", "cpu, cuda, cuda:N, xpu, xpu:N, mps or auto"),
                   TrainsCheck);
}

FieldSpec DtypeField() {
  return WithCheck(Choices(Field("dtype", FieldType::kString, "bf16", "the model's dtype: fp32 or bf16"),
                           DtypeNames()),
                   DtypeCheck);
}

std::vector<FieldSpec> TrainingFields(TrainKind kind, TrainingData data) {
  const bool pairs = data == TrainingData::kPreferencePairs;
  const bool prompts = data == TrainingData::kPrompts;
  std::vector<FieldSpec> f = {
      OutputDirField("folder for checkpoints, metrics and the run summary"),
      prompts ? ComponentField("policy_model", "model", "the policy: it answers the prompts and is trained")
              : ComponentField("model", "model", "the model to fine-tune"),
      ComponentField("tokenizer", "tokenizer", "the tokenizer"),
      ComponentField("checkpointer", "checkpointer", "where weights are loaded from and saved to", false),
      Field("resume_from_checkpoint", FieldType::kBool, "False", "continue the run saved in output_dir"),
      pairs     ? ComponentField("dataset", "preference_dataset",
                                 "the preference data: chosen and rejected responses to each prompt "
                                 "(hh_rlhf_helpful_dataset, stack_exchange_paired_dataset)")
      : prompts ? ComponentField("dataset", "dataset", "the prompts (a text_completion_dataset), which the policy answers")
                : ComponentField("dataset", "dataset", "the training data"),
      SeedField(),
      Field("shuffle", FieldType::kBool, "True", "shuffle the data each epoch"),
      AtLeast(Field("batch_size", FieldType::kInt, "2",
                    pairs     ? "preference pairs per micro-batch (each pair is two rows: chosen and rejected)"
                    : prompts ? "prompts per PPO step (each answered by the policy, then trained on)"
                              : "samples per micro-batch"),
              1),
      ComponentField("optimizer", "optimizer", "the optimizer"),
      ComponentField("lr_scheduler", "lr_scheduler", "learning-rate schedule", false),
      pairs     ? ComponentField("loss", "preference_loss", "the preference loss (torchtune's rlhf.loss.DPOLoss)")
      : prompts ? ComponentField("loss", "ppo_loss", "the PPO loss (torchtune's rlhf.loss.PPOLoss)")
                : ComponentField("loss", "loss", "the loss"),
      prompts ? AtLeast(Field("num_steps", FieldType::kInt, "100",
                              "prompts to train on; num_steps / batch_size PPO steps"),
                        1)
              : AtLeast(Field("epochs", FieldType::kInt, "1", "passes over the data"), 1),
      Nullable(AtLeast(Field("max_steps_per_epoch", FieldType::kInt, "null",
                             prompts ? "stop after this many PPO steps (tune-matrix's cells set it); null: "
                                       "num_steps / batch_size"
                                     : "stop each epoch after this many optimizer steps"),
                       1)),
      AtLeast(Field("gradient_accumulation_steps", FieldType::kInt, "1",
                    prompts ? "backward passes per PPO mini-batch (ppo_batch_size / this rows each)"
                            : "micro-batches per optimizer step"),
              1),
      Nullable(Above(
          Field("clip_grad_norm", FieldType::kFloat, "null", "clip the global gradient norm to this value"), 0)),
      Field("compile", FieldType::kBool, "False", "torch.compile; only False (eager) exists in LibTorch C++"),
      ComponentField("metric_logger", "metric_logger", "where metrics go", false),
      AtLeast(Field("log_every_n_steps", FieldType::kInt, "1", "log every this many optimizer steps"), 1),
      Field("log_peak_memory_stats", FieldType::kBool, "True",
            "log peak memory (allocator statistics on accelerators, peak resident memory on cpu)"),
      LogLevelField(),
      DeviceField(),
      DtypeField(),
      Field("enable_activation_checkpointing", FieldType::kBool, "False", "recompute activations in backward"),
      WithCheck(Field("enable_activation_offloading", FieldType::kBool, "False", "move activations to host memory"),
                OffloadCheck),
      ComponentField("profiler", "profiler", "profiler settings", false),
      Field("save_checkpoints", FieldType::kBool, "True",
            "write checkpoints at the end of each epoch (tune-matrix turns this off for its short runs)"),
  };
  if (kind == TrainKind::kLora) {
    f.push_back(Field("save_adapter_weights_only", FieldType::kBool, "False",
                      "save only the adapters, not the merged model"));
    // torchtune's QLoRA configs carry it.
    f.push_back(Field("low_cpu_ram", FieldType::kBool, "False",
                      "torchtune writes a QLoRA model's dequantised base through an mmap'ed file (for Colab); no "
                      "effect here"));
  }
  // torchtune's SFT recipes read it (its DPO and PPO recipes do not).
  if (data == TrainingData::kSamples) {
    f.push_back(Choices(Field("collate_fn", FieldType::kString, "torchtune.data.padded_collate_sft",
                      "how samples become a batch: padded_collate_sft (tokens and labels padded to the longest), or "
                      "padded_collate_tiled_images_and_mask for an image transform's samples (their image tiles, "
                      "aspect ratios and cross-attention masks padded too)"),
                {"torchtune.data.padded_collate_sft", "torchtune.data.padded_collate_tiled_images_and_mask"}));
  }
  // torchtune's full recipe reads it; its Qwen3 LoRA configs carry it too (as False).
  f.push_back(Field("optimizer_in_bwd", FieldType::kBool, "False",
                    "step each trained tensor inside backward and free its gradient at once (less memory); needs "
                    "gradient_accumulation_steps=1 and clip_grad_norm=null; single device only"));
  return f;
}

std::vector<FieldSpec> DistributedFields(TrainingData data) {
  std::vector<FieldSpec> f = {
      Field("data_parallel_shard_dim", FieldType::kInt, "-1",
            "ranks the gradients and optimizer state are sharded over: -1 all of them, 1 none (plain data parallel)"),
      AtLeast(Field("data_parallel_replicate_dim", FieldType::kInt, "1",
                    "replica groups (hybrid sharding); only 1 with sharding, or every rank without it"), 1),
      AtLeast(Field("tensor_parallel_dim", FieldType::kInt, "1", "tensor parallelism; only 1 (none) is implemented"), 1),
      Field("tensor_parallel_plan", FieldType::kAny, "", "how layers split across ranks (unused at dim 1)"),
      Field("fsdp_cpu_offload", FieldType::kBool, "False",
            "keep each rank's shard and its optimizer state in CPU memory and step it there"),
      Field("fsdp", FieldType::kAny, "",
            "torchtune's older place for FSDP options ({cpu_offload: False} in its QLoRA configs), which its recipe "
            "does not read; accepted when it changes nothing (fsdp_cpu_offload is the switch)"),
      Field("fsdp_reshard_after_forward", FieldType::kBool, "True",
            "accepted; parameters stay whole on every rank here, so there is nothing to reshard"),
      Nullable(ElementsFrom(Field("custom_sharded_layers", FieldType::kStringList, "null",
                                  "layers sharded as units of their own; every trained parameter's gradient and "
                                  "optimizer state is sharded here already"),
                            // A fusion model's (Llama 3.2 Vision's) decoder names them under decoder.
                            {"tok_embeddings", "output", "decoder.tok_embeddings", "decoder.output"})),
  };
  if (data == TrainingData::kPreferencePairs) return f;  // torchtune's DPO recipes validate nothing
  f.push_back(ComponentField("dataset_val", "dataset", "validation data (used with run_val_every_n_steps)", false));
  f.push_back(Nullable(AtLeast(Field("run_val_every_n_steps", FieldType::kInt, "null",
                                     "every this many optimizer steps, the mean loss over dataset_val; null: never"),
                               1)));
  f.push_back(AtLeast(Field("batch_size_val", FieldType::kInt, "${batch_size}", "samples per validation batch"), 1));
  return f;
}

std::vector<Problem> DistributedChecks(const Config& config, const Registry& registry, const DeviceInfo* device) {
  std::vector<Problem> problems;
  auto add = [&](const std::string& key, const std::string& message, bool device_related = false) {
    problems.push_back({config.OriginOf(key).ToString(), key, message, device_related});
  };
  auto int_of = [&](const std::string& key, int64_t fallback) {
    try {
      YAML::Node v = config.Find(key);
      return v.IsScalar() ? v.as<int64_t>() : fallback;
    } catch (const YAML::Exception&) {
      return fallback;
    }
  };
  // `fsdp: {cpu_offload: ...}`: torchtune's recipes read fsdp_cpu_offload and ignore this block; rather than
  // ignore a request silently, refuse what it would change.
  if (YAML::Node fsdp = config.Find("fsdp"); fsdp && !fsdp.IsNull()) {
    if (!fsdp.IsMap()) {
      add("fsdp", "must be a mapping such as {cpu_offload: False} (torchtune's older place for FSDP options)");
    } else {
      for (const auto& item : fsdp) {
        const std::string key = item.first.as<std::string>("");
        if (key != "cpu_offload") {
          add("fsdp." + key, "unknown FSDP option; the recipe's FSDP settings are fsdp_cpu_offload and "
                             "fsdp_reshard_after_forward");
        } else if (IsTrue(item.second) && !IsTrue(config.Find("fsdp_cpu_offload"))) {
          add("fsdp.cpu_offload", "fsdp.cpu_offload is not read (torchtune's recipe ignores it too); set "
                                  "fsdp_cpu_offload=True to keep the shards and their optimizer state in CPU memory");
        }
      }
    }
  }
  if (IsTrue(config.Find("enable_activation_offloading"))) {
    // The fully sharded layers recompute through their own runner, which keeps its inputs on the device.
    add("enable_activation_offloading", "activation offloading is implemented in the single-device recipes only; set "
                                        "enable_activation_offloading=False");
  }
  if (int_of("tensor_parallel_dim", 1) > 1) {
    add("tensor_parallel_dim", "tensor parallelism is not implemented; set tensor_parallel_dim=1 (data parallel only)");
  }
  const int64_t shard = int_of("data_parallel_shard_dim", -1);
  if (shard == 0 || shard < -1) add("data_parallel_shard_dim", "must be -1 (every rank), 1 (no sharding) or the rank count");
  StatusOr<const OptimizerComponent*> optimizer = OptimizerOf(config, registry);
  if (shard != 1 && optimizer.ok() && !(*optimizer)->shardable()) {
    add("data_parallel_shard_dim",
        "optimizer " + config.Find("optimizer._component_").Scalar() +
            " quantises its state in blocks of each parameter, which sharded data parallelism cannot cut into its "
            "flat shards; set data_parallel_shard_dim=1 (replicate), or use optimizer._component_=torch.optim.AdamW");
  }
  if (shard != 1 && int_of("data_parallel_replicate_dim", 1) > 1) {
    add("data_parallel_replicate_dim",
        "hybrid sharding (replicas of sharded groups) is not implemented; set data_parallel_replicate_dim=1 to shard "
        "over every rank, or data_parallel_shard_dim=1 to replicate");
  }
  if (IsTrue(config.Find("optimizer_in_bwd"))) {
    add("optimizer_in_bwd", "optimizer_in_bwd across ranks is not implemented (gradients are reduced over the ranks "
                            "after backward); set optimizer_in_bwd=False");
  }
  if (config.Find("run_val_every_n_steps").IsScalar() && !config.IsNull("run_val_every_n_steps") &&
      config.IsNull("dataset_val")) {
    add("run_val_every_n_steps", "validation needs dataset_val; add it, or set run_val_every_n_steps=null");
  }
  if (device != nullptr) {
    const std::string& backend = device->traits().distributed_backend;
    std::string why_not;
    if (backend.empty()) {
      add("device", "device type " + device->type + " has no collective backend for distributed training; use "
                    "device=cpu (gloo) or a GPU (nccl)", true);
    } else if (!BackendBuilt(backend, &why_not)) {
      add("device", "distributed training on " + device->id + " needs " + backend + " process groups: " + why_not, true);
    } else if (const CollectiveBackend* entry = FindCollectiveBackend(backend); !entry->Serves(device->type)) {
      add("device", "the " + backend + " collectives here move " + JoinStrings(entry->device_types, " and ") +
                        " tensors only, not " + device->type + " ones; use device=" + entry->device_types.front(),
          true);
    }
  }
  return problems;
}

std::vector<FieldSpec> SelectiveCheckpointingFields() {
  return {
      Nullable(Choices(Field("ac_mode", FieldType::kString, "null",
                             "activation checkpointing by layer, used when enable_activation_checkpointing=False: "
                             "full recomputes every transformer layer in backward, selective every ac_option-th; "
                             "null: off"),
                       {"full", "selective"})),
      Nullable(AtLeast(Field("ac_option", FieldType::kInt, "null",
                             "with ac_mode=selective, recompute layers ac_option, 2 x ac_option, ... (counted from "
                             "1); 1 or 0: every layer"),
                       0)),
      Field("memory_efficient_fsdp_wrap", FieldType::kBool, "False",
            "torchtune's older switch for sharding tok_embeddings and output as units of their own (now "
            "custom_sharded_layers), which its recipe no longer reads; every trained parameter's gradient and "
            "optimizer state is sharded here already"),
  };
}

std::vector<Problem> SelectiveCheckpointingChecks(const Config& config, const Registry&, const DeviceInfo*) {
  std::vector<Problem> problems;
  const YAML::Node mode = config.Find("ac_mode");
  if (!mode.IsScalar() || config.IsNull("ac_mode")) return problems;
  if (IsTrue(config.Find("enable_activation_checkpointing"))) {
    problems.push_back({config.OriginOf("ac_mode").ToString(), "ac_mode",
                        "ac_mode=" + mode.Scalar() + " beside enable_activation_checkpointing=True: torchtune's "
                        "recipe then checkpoints no layer at all; set enable_activation_checkpointing=False to "
                        "checkpoint by ac_mode, or ac_mode=null to recompute every layer"});
  }
  if (mode.Scalar() == "selective" && config.IsNull("ac_option")) {
    problems.push_back({config.OriginOf("ac_mode").ToString(), "ac_option",
                        "ac_mode=selective needs ac_option, how often a layer is recomputed (2: every second "
                        "layer); set ac_option, or ac_mode=full"});
  }
  return problems;
}

std::vector<Problem> TrainingChecks(const Config& config, const Registry&, const DeviceInfo* device) {
  std::vector<Problem> problems;
  auto add = [&](const std::string& key, const std::string& message, bool device_related = false) {
    problems.push_back({config.OriginOf(key).ToString(), key, message, device_related});
  };
  auto is_true = [&](const std::string& key) { return IsTrue(config.Find(key)); };
  if (config.Find("dtype").IsScalar() && config.Find("dtype").Scalar() == "fp16") {
    add("dtype", "fp16 training is not supported: without loss scaling its gradients underflow; use dtype=bf16 or "
                 "dtype=fp32");
  }
  if (is_true("compile")) add("compile", "torch.compile exists only in Python; the C++ recipes run eagerly; set compile=False");
  if (is_true("optimizer_in_bwd")) {
    // As torchtune's recipes refuse them: a gradient freed inside backward can be neither accumulated nor clipped.
    int64_t accumulate = 1;
    try {
      accumulate = config.Find("gradient_accumulation_steps").as<int64_t>(1);
    } catch (const YAML::Exception&) {  // a wrong type is the field's own error
    }
    if (accumulate != 1) {
      add("optimizer_in_bwd", "gradient accumulation is not supported with optimizer_in_bwd=True (each gradient is "
                              "applied and freed inside backward); set gradient_accumulation_steps=1 or "
                              "optimizer_in_bwd=False");
    }
    if (config.Find("clip_grad_norm").IsScalar() && !config.IsNull("clip_grad_norm")) {
      add("optimizer_in_bwd", "gradient clipping is not supported with optimizer_in_bwd=True (no step sees every "
                              "gradient at once); set clip_grad_norm=null or optimizer_in_bwd=False");
    }
  }
  if (is_true("enable_activation_offloading")) {
    if (!is_true("enable_activation_checkpointing")) {
      add("enable_activation_offloading", "activation offloading needs enable_activation_checkpointing=True");
    }
  }
  if (is_true("profiler.enabled")) {
    // recipes/op_profile.h times operations; it keeps no memory timeline, stacks or FLOP counts.
    for (const char* key : {"profiler.profile_memory", "profiler.with_stack", "profiler.with_flops"}) {
      if (is_true(key)) {
        add(key, std::string(key) + "=True is not recorded by tune's operation profiler (it times each ATen operation "
                 "and writes op_profile.txt); set " + key + "=False");
      }
    }
    StatusOr<int64_t> active = config.GetInt("profiler.active_steps", 2);
    if (active.ok() && *active < 1) {
      add("profiler.active_steps", "profiler.enabled=True records active_steps steps of each cycle; set "
                                   "profiler.active_steps to 1 or more");
    }
  }
  return problems;
}

}  // namespace tmx::recipes
