#include "recipes/builtin.h"

#include <cstdlib>

#include "harness/config_store.h"
#include "recipes/finetune.h"

namespace tmx::recipes {
namespace {

FieldSpec Field(std::string name, FieldType type, std::string default_yaml, std::string doc) {
  FieldSpec f;
  f.name = std::move(name);
  f.type = type;
  f.default_yaml = std::move(default_yaml);
  f.doc = std::move(doc);
  return f;
}

FieldSpec Nullable(FieldSpec f) {
  f.nullable = true;
  return f;
}

FieldSpec Required(FieldSpec f) {
  f.required = true;
  return f;
}

FieldSpec Choices(FieldSpec f, std::vector<std::string> choices) {
  f.choices = std::move(choices);
  return f;
}

FieldSpec ComponentField(std::string name, std::string kind, std::string doc, bool required = true) {
  FieldSpec f = Field(std::move(name), FieldType::kComponent, "", std::move(doc));
  f.component_kind = std::move(kind);
  f.required = required;
  f.nullable = !required;
  return f;
}

FieldSpec WithCheck(FieldSpec f, DeviceCheck check) {
  f.device_check = std::move(check);
  return f;
}

bool IsTrue(const YAML::Node& v) {
  try {
    return v.IsScalar() && v.as<bool>();
  } catch (const YAML::Exception&) {
    return false;
  }
}

// ----- Components -----

std::vector<FieldSpec> LoraParams() {
  return {
      Required(Field("lora_attn_modules", FieldType::kStringList, "",
                     "attention projections that get LoRA adapters: any of q_proj, k_proj, v_proj, output_proj")),
      Field("apply_lora_to_mlp", FieldType::kBool, "False", "also adapt the MLP projections w1, w2, w3"),
      Field("apply_lora_to_output", FieldType::kBool, "False", "also adapt the final output projection"),
      Field("lora_rank", FieldType::kInt, "8", "rank of the low-rank update"),
      Field("lora_alpha", FieldType::kFloat, "16", "scale of the update is lora_alpha / lora_rank"),
      Field("lora_dropout", FieldType::kFloat, "0.0", "dropout on the adapter input"),
      Field("use_dora", FieldType::kBool, "False", "DoRA (weight-decomposed LoRA); only False is implemented"),
      Field("quantize_base", FieldType::kBool, "False", "QLoRA base quantisation; only False is implemented"),
  };
}

void AddModels(std::vector<ComponentSpec>* out) {
  struct Model {
    std::string family, name, doc;
  } models[] = {
      {"llama3_2", "llama3_2_1b", "Llama 3.2 1B (1,235,814,400 parameters, tied embeddings)"},
      {"llama3_2", "llama3_2_3b", "Llama 3.2 3B (3,212,749,824 parameters, tied embeddings)"},
      {"llama3_1", "llama3_1_8b", "Llama 3.1 8B (8,030,261,248 parameters)"},
  };
  for (const Model& m : models) {
    ComponentSpec full;
    full.name = "tune_matrix.models." + m.family + "." + m.name;
    full.aliases = {"torchtune.models." + m.family + "." + m.name};
    full.kind = "model";
    full.doc = m.doc;
    out->push_back(full);
    ComponentSpec lora;
    lora.name = "tune_matrix.models." + m.family + ".lora_" + m.name;
    lora.aliases = {"torchtune.models." + m.family + ".lora_" + m.name};
    lora.kind = "model";
    lora.doc = m.doc + " with LoRA adapters";
    lora.params = LoraParams();
    out->push_back(lora);
  }
  ComponentSpec tiny;
  tiny.name = "tune_matrix.models.llama_tiny";
  tiny.kind = "model";
  tiny.doc = "a Llama 3.2-shaped model with 2 layers and dim 64, for tests and quick runs";
  out->push_back(tiny);
  ComponentSpec tiny_lora = tiny;
  tiny_lora.name = "tune_matrix.models.lora_llama_tiny";
  tiny_lora.doc += ", with LoRA adapters";
  tiny_lora.params = LoraParams();
  out->push_back(tiny_lora);

  const std::string other = "only the Llama 3.x architectures are implemented in tune-matrix";
  for (const char* name : {"torchtune.models.qwen2_5.qwen2_5_0_5b", "torchtune.models.mistral.lora_mistral_7b",
                           "torchtune.models.gemma.lora_gemma_2b", "torchtune.models.gemma.gemma_2b",
                           "torchtune.models.mistral.mistral_7b"}) {
    ComponentSpec c;
    c.name = name;
    c.kind = "model";
    c.unsupported_reason = other;
    out->push_back(c);
  }
}

void AddData(std::vector<ComponentSpec>* out) {
  ComponentSpec byte;
  byte.name = "tune_matrix.data.byte_tokenizer";
  byte.kind = "tokenizer";
  byte.doc = "byte-level tokenizer: ids 0-255 are bytes, then BOS, EOS and PAD (lossless, needs no file)";
  byte.params = {Nullable(Field("max_seq_len", FieldType::kInt, "null", "truncate samples to this many tokens"))};
  out->push_back(byte);
  for (const char* name : {"torchtune.models.llama3.llama3_tokenizer", "torchtune.models.qwen2_5.qwen2_5_tokenizer",
                           "torchtune.models.mistral.mistral_tokenizer", "torchtune.models.gemma.gemma_tokenizer"}) {
    ComponentSpec c;
    c.name = name;
    c.kind = "tokenizer";
    c.unsupported_reason =
        "BPE/SentencePiece tokenizer files are not implemented; use tune_matrix.data.byte_tokenizer";
    out->push_back(c);
  }

  ComponentSpec alpaca;
  alpaca.name = "tune_matrix.datasets.alpaca_dataset";
  alpaca.aliases = {"torchtune.datasets.alpaca_dataset"};
  alpaca.kind = "dataset";
  alpaca.doc = "instruction data in Alpaca form (instruction, input, output) from a local .json or .jsonl file";
  alpaca.params = {
      Nullable(Field("source", FieldType::kString, "null",
                     "local .json/.jsonl file; null uses the dataset shipped with tune-matrix")),
      Field("train_on_input", FieldType::kBool, "False", "include prompt tokens in the loss"),
      Field("packed", FieldType::kBool, "False", "sample packing; only False is implemented"),
      Field("split", FieldType::kString, "train", "accepted for torchtune compatibility; the whole file is used"),
  };
  out->push_back(alpaca);
  ComponentSpec cleaned;
  cleaned.name = "torchtune.datasets.alpaca_cleaned_dataset";
  cleaned.kind = "dataset";
  cleaned.unsupported_reason =
      "it downloads yahma/alpaca-cleaned from the Hugging Face hub; use tune_matrix.datasets.alpaca_dataset with "
      "source=<local file>";
  out->push_back(cleaned);
}

DeviceCheck NeedsCuda(std::string what) {
  return [what](const YAML::Node&, const Config&, const DeviceInfo& d) -> std::string {
    if (d.type == DeviceType::kCuda) return "";
    return what + " needs a cuda device (it is built on CUDA unified memory), not " + d.id;
  };
}

void AddTraining(std::vector<ComponentSpec>* out) {
  ComponentSpec adamw;
  adamw.name = "tune_matrix.optim.AdamW";
  adamw.aliases = {"torch.optim.AdamW"};
  adamw.kind = "optimizer";
  adamw.doc = "AdamW with decoupled weight decay";
  adamw.params = {
      Field("lr", FieldType::kFloat, "1e-3", "learning rate"),
      Field("weight_decay", FieldType::kFloat, "0.01", "decoupled weight decay"),
      Field("eps", FieldType::kFloat, "1e-8", "denominator epsilon"),
      Field("betas", FieldType::kAny, "[0.9, 0.999]", "moment decay rates"),
      Field("amsgrad", FieldType::kBool, "False", "AMSGrad variant"),
      Field("fused", FieldType::kBool, "False", "accepted for torchtune compatibility; LibTorch has one AdamW kernel"),
      Field("foreach", FieldType::kAny, "null", "accepted for torchtune compatibility"),
  };
  out->push_back(adamw);
  ComponentSpec sgd;
  sgd.name = "tune_matrix.optim.SGD";
  sgd.aliases = {"torch.optim.SGD"};
  sgd.kind = "optimizer";
  sgd.doc = "stochastic gradient descent with optional momentum";
  sgd.params = {
      Field("lr", FieldType::kFloat, "1e-2", "learning rate"),
      Field("momentum", FieldType::kFloat, "0", "momentum factor"),
      Field("weight_decay", FieldType::kFloat, "0", "L2 penalty"),
      Field("dampening", FieldType::kFloat, "0", "dampening for momentum"),
      Field("nesterov", FieldType::kBool, "False", "Nesterov momentum"),
  };
  out->push_back(sgd);
  for (const char* name : {"bitsandbytes.optim.PagedAdamW8bit", "bitsandbytes.optim.PagedAdamW",
                           "bitsandbytes.optim.AdamW8bit"}) {
    ComponentSpec c;
    c.name = name;
    c.kind = "optimizer";
    c.unsupported_reason = "bitsandbytes is a Python CUDA extension with no LibTorch C++ API; use torch.optim.AdamW";
    if (std::string(name).find("Paged") != std::string::npos) c.device_check = NeedsCuda(std::string("a paged optimizer"));
    c.params = {Field("lr", FieldType::kFloat, "1e-3", "learning rate")};
    out->push_back(c);
  }

  ComponentSpec cosine;
  cosine.name = "tune_matrix.training.lr_schedulers.get_cosine_schedule_with_warmup";
  cosine.aliases = {"torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup",
                    "torchtune.modules.get_cosine_schedule_with_warmup"};
  cosine.kind = "lr_scheduler";
  cosine.doc = "linear warm-up, then cosine decay to zero over the run's optimizer steps";
  cosine.params = {Field("num_warmup_steps", FieldType::kInt, "0", "optimizer steps of linear warm-up"),
                   Field("num_cycles", FieldType::kFloat, "0.5", "cosine cycles over the run (0.5 = decay to zero)")};
  out->push_back(cosine);

  ComponentSpec ce;
  ce.name = "tune_matrix.modules.loss.CrossEntropyLoss";
  ce.aliases = {"torchtune.modules.loss.CEWithChunkedOutputLoss", "torchtune.modules.loss.LinearCrossEntropyLoss",
                "torch.nn.CrossEntropyLoss"};
  ce.kind = "loss";
  ce.doc = "token-level cross entropy over the logits, ignoring masked (-100) labels";
  ce.params = {Field("num_output_chunks", FieldType::kInt, "8", "accepted for torchtune compatibility"),
               Field("ignore_index", FieldType::kInt, "-100", "label value excluded from the loss")};
  out->push_back(ce);

  ComponentSpec disk;
  disk.name = "tune_matrix.training.metric_logging.DiskLogger";
  disk.aliases = {"torchtune.training.metric_logging.DiskLogger", "torchtune.training.metric_logging.StdoutLogger"};
  disk.kind = "metric_logger";
  disk.doc = "metrics as JSON lines in <log_dir>/metrics.jsonl, and one line per logged step on stdout";
  disk.params = {Nullable(Field("log_dir", FieldType::kString, "${output_dir}/logs", "folder of metrics.jsonl")),
                 Field("filename", FieldType::kString, "metrics.jsonl", "file name in log_dir")};
  out->push_back(disk);

  ComponentSpec ckpt;
  ckpt.name = "tune_matrix.training.FullModelCheckpointer";
  ckpt.aliases = {"torchtune.training.FullModelHFCheckpointer", "torchtune.training.FullModelMetaCheckpointer",
                  "torchtune.training.FullModelTorchTuneCheckpointer"};
  ckpt.kind = "checkpointer";
  ckpt.doc = "safetensors checkpoints: loads weights from checkpoint_dir (or initialises them from the seed when it "
             "is null) and saves to output_dir";
  ckpt.params = {
      Nullable(Field("checkpoint_dir", FieldType::kString, "null", "folder with the weights to start from")),
      Field("checkpoint_files", FieldType::kAny, "[model.safetensors]", "weight files in checkpoint_dir"),
      Nullable(Field("recipe_checkpoint", FieldType::kString, "null", "optimizer/progress state to resume from")),
      Nullable(Field("adapter_checkpoint", FieldType::kString, "null", "LoRA adapter weights to start from")),
      Field("output_dir", FieldType::kString, "${output_dir}", "where checkpoints are written"),
      Field("model_type", FieldType::kString, "LLAMA3_2", "model family, for torchtune compatibility"),
      Nullable(Field("keep_last_n_checkpoints", FieldType::kInt, "null", "accepted for torchtune compatibility")),
      Field("safe_serialization", FieldType::kBool, "True", "always safetensors"),
  };
  out->push_back(ckpt);

  ComponentSpec profiler;
  profiler.name = "tune_matrix.training.setup_torch_profiler";
  profiler.aliases = {"torchtune.training.setup_torch_profiler"};
  profiler.kind = "profiler";
  profiler.doc = "accepted for torchtune compatibility; only enabled=False is supported (no profiler in LibTorch C++)";
  for (const char* b : {"cpu", "cuda", "xpu", "profile_memory", "with_stack", "record_shapes", "with_flops"}) {
    profiler.params.push_back(Field(b, FieldType::kBool, "False", "torch.profiler option"));
  }
  for (const char* i : {"wait_steps", "warmup_steps", "active_steps", "num_cycles"}) {
    profiler.params.push_back(Field(i, FieldType::kInt, "0", "torch.profiler schedule option"));
  }
  profiler.params.push_back(Field("enabled", FieldType::kBool, "False", "must be False"));
  profiler.params.push_back(Field("output_dir", FieldType::kString, "", "trace folder"));
  out->push_back(profiler);
}

// ----- Recipe fields -----

std::string DtypeCheck(const YAML::Node& v, const Config&, const DeviceInfo& d) {
  if (!v.IsScalar() || v.Scalar() != "bf16") return "";
  if (d.bf16_matmul_backward) return "";
  return "dtype bf16 needs a device where bf16 matmul and backward work; on " + d.id +
         " they did not (" + (d.notes.empty() ? "probe failed" : d.notes.front()) + "); use dtype=fp32";
}

std::string OffloadCheck(const YAML::Node& v, const Config&, const DeviceInfo& d) {
  if (!IsTrue(v)) return "";
  if (d.type != DeviceType::kCuda && d.type != DeviceType::kXpu) {
    return std::string("activation offloading needs a cuda or xpu device (it overlaps copies to pinned host memory "
                       "with compute on a side stream), not ") + d.id + "; set enable_activation_offloading=False";
  }
  return "";
}

std::vector<FieldSpec> CommonFields(bool lora) {
  std::vector<FieldSpec> f = {
      Required(Field("output_dir", FieldType::kString, "", "folder for checkpoints, metrics and the run summary")),
      ComponentField("model", "model", "the model to fine-tune"),
      ComponentField("tokenizer", "tokenizer", "the tokenizer"),
      ComponentField("checkpointer", "checkpointer", "where weights are loaded from and saved to", false),
      Field("resume_from_checkpoint", FieldType::kBool, "False", "continue the run saved in output_dir"),
      ComponentField("dataset", "dataset", "the training data"),
      Nullable(Field("seed", FieldType::kInt, "null", "random seed; null picks one and logs it")),
      Field("shuffle", FieldType::kBool, "True", "shuffle the data each epoch"),
      Field("batch_size", FieldType::kInt, "2", "samples per micro-batch"),
      ComponentField("optimizer", "optimizer", "the optimizer"),
      ComponentField("lr_scheduler", "lr_scheduler", "learning-rate schedule", false),
      ComponentField("loss", "loss", "the loss"),
      Field("epochs", FieldType::kInt, "1", "passes over the data"),
      Nullable(Field("max_steps_per_epoch", FieldType::kInt, "null", "stop each epoch after this many optimizer steps")),
      Field("gradient_accumulation_steps", FieldType::kInt, "1", "micro-batches per optimizer step"),
      Nullable(Field("clip_grad_norm", FieldType::kFloat, "null", "clip the global gradient norm to this value")),
      Field("compile", FieldType::kBool, "False", "torch.compile; only False (eager) exists in LibTorch C++"),
      ComponentField("metric_logger", "metric_logger", "where metrics go", false),
      Field("log_every_n_steps", FieldType::kInt, "1", "log every this many optimizer steps"),
      Field("log_peak_memory_stats", FieldType::kBool, "True",
            "log peak memory (allocator statistics on accelerators, peak resident memory on cpu)"),
      Choices(Field("log_level", FieldType::kString, "INFO", "verbosity"),
              {"DEBUG", "INFO", "WARN", "WARNING", "ERROR"}),
      Field("device", FieldType::kString, "cuda", "cpu, cuda, cuda:N, mps, xpu or auto"),
      WithCheck(Choices(Field("dtype", FieldType::kString, "bf16", "training dtype: fp32 or bf16"),
                        {"fp32", "bf16", "fp16"}),
                DtypeCheck),
      Field("enable_activation_checkpointing", FieldType::kBool, "False", "recompute activations in backward"),
      WithCheck(Field("enable_activation_offloading", FieldType::kBool, "False", "move activations to host memory"),
                OffloadCheck),
      ComponentField("profiler", "profiler", "profiler settings", false),
      Field("save_checkpoints", FieldType::kBool, "True",
            "write checkpoints at the end of each epoch (tune-matrix turns this off for its short runs)"),
  };
  if (lora) {
    f.push_back(Field("save_adapter_weights_only", FieldType::kBool, "False",
                      "save only the adapters, not the merged model"));
  } else {
    f.push_back(Field("optimizer_in_bwd", FieldType::kBool, "False",
                      "step the optimizer inside backward; only False is implemented"));
  }
  return f;
}

std::vector<Problem> CommonChecks(const Config& config, const DeviceInfo* device) {
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
  if (is_true("optimizer_in_bwd")) add("optimizer_in_bwd", "optimizer_in_bwd is not implemented; set optimizer_in_bwd=False");
  if (is_true("enable_activation_offloading")) {
    if (!is_true("enable_activation_checkpointing")) {
      add("enable_activation_offloading",
          "activation offloading needs enable_activation_checkpointing=True");
    }
    if (device != nullptr && (device->type == DeviceType::kCuda || device->type == DeviceType::kXpu)) {
      add("enable_activation_offloading", "activation offloading is not implemented yet in the C++ recipes; set "
                                          "enable_activation_offloading=False", true);
    }
  }
  if (is_true("profiler.enabled")) add("profiler.enabled", "the torch profiler is not available in LibTorch C++; set profiler.enabled=False");
  if (is_true("dataset.packed")) add("dataset.packed", "sample packing is not implemented; set dataset.packed=False");
  if (is_true("model.use_dora")) add("model.use_dora", "DoRA is not implemented; set model.use_dora=False");
  if (is_true("model.quantize_base")) add("model.quantize_base", "QLoRA base quantisation is not implemented; set model.quantize_base=False");
  for (const char* key : {"batch_size", "epochs", "gradient_accumulation_steps", "log_every_n_steps", "max_steps_per_epoch"}) {
    YAML::Node v = config.Find(key);
    if (v.IsDefined() && v.IsScalar()) {
      try {
        if (v.as<int64_t>() < 1) add(key, std::string(key) + " must be at least 1, got " + v.Scalar());
      } catch (const YAML::Exception&) {
      }
    }
  }
  YAML::Node accum = config.Find("gradient_accumulation_steps");
  if (is_true("optimizer_in_bwd") && accum.IsScalar() && accum.Scalar() != "1") {
    add("optimizer_in_bwd", "optimizer_in_bwd needs gradient_accumulation_steps=1");
  }
  return problems;
}

}  // namespace

Status RegisterBuiltins(Registry* registry) {
  std::vector<ComponentSpec> components;
  AddModels(&components);
  AddData(&components);
  AddTraining(&components);
  for (ComponentSpec& c : components) TM_RETURN_IF_ERROR(registry->AddComponent(std::move(c)));

  RecipeSpec full;
  full.name = "full_finetune_single_device";
  full.doc = "full fine-tuning of every weight on one device";
  full.configs = {"llama3_2/1B_full_single_device", "llama3_2/3B_full_single_device",
                  "llama3_1/8B_full_single_device", "tiny/full_single_device"};
  full.fields = CommonFields(false);
  full.checks = {CommonChecks};
  full.run = RunFullFinetune;
  TM_RETURN_IF_ERROR(registry->AddRecipe(std::move(full)));

  RecipeSpec lora;
  lora.name = "lora_finetune_single_device";
  lora.doc = "LoRA fine-tuning on one device: base weights frozen, low-rank adapters trained";
  lora.configs = {"llama3_2/1B_lora_single_device", "llama3_2/3B_lora_single_device",
                  "llama3_1/8B_lora_single_device", "tiny/lora_single_device"};
  lora.fields = CommonFields(true);
  lora.checks = {CommonChecks};
  lora.run = RunLoraFinetune;
  TM_RETURN_IF_ERROR(registry->AddRecipe(std::move(lora)));
  return Status::OK();
}

const Registry& BuiltinRegistry() {
  static const Registry registry = [] {
    Registry r;
    Status s = RegisterBuiltins(&r);
    if (!s.ok()) throw std::logic_error("built-in registry is inconsistent: " + s.message());
    return r;
  }();
  return registry;
}

std::string DefaultDatasetPath() {
  if (const char* env = std::getenv("TUNE_MATRIX_DATA_DIR"); env != nullptr && *env) {
    return std::string(env) + "/tiny_instruct.jsonl";
  }
  return CheckoutConfigDir() + "/../recipes/data/datasets/tiny_instruct.jsonl";
}

}  // namespace tmx::recipes
