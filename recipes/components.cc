#include "recipes/components.h"

namespace tmx::recipes {

void AddDataComponents(std::vector<ComponentSpec>* out) {
  ComponentSpec byte;
  byte.name = "tune_matrix.data.byte_tokenizer";
  byte.kind = "tokenizer";
  byte.doc = "byte-level tokenizer: ids 0-255 are bytes, then BOS, EOS and PAD (lossless, needs no file)";
  byte.params = {
      Nullable(AtLeast(Field("max_seq_len", FieldType::kInt, "null", "truncate samples to this many tokens"), 1))};
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

void AddTrainingComponents(std::vector<ComponentSpec>* out) {
  ComponentSpec cosine;
  cosine.name = "tune_matrix.training.lr_schedulers.get_cosine_schedule_with_warmup";
  cosine.aliases = {"torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup",
                    "torchtune.modules.get_cosine_schedule_with_warmup"};
  cosine.kind = "lr_scheduler";
  cosine.doc = "linear warm-up, then cosine decay to zero over the run's optimizer steps";
  cosine.params = {
      AtLeast(Field("num_warmup_steps", FieldType::kInt, "0", "optimizer steps of linear warm-up"), 0),
      AtLeast(Field("num_cycles", FieldType::kFloat, "0.5", "cosine cycles over the run (0.5 = decay to zero)"), 0)};
  out->push_back(cosine);

  ComponentSpec ce;
  ce.name = "tune_matrix.modules.loss.CrossEntropyLoss";
  ce.aliases = {"torchtune.modules.loss.CEWithChunkedOutputLoss", "torchtune.modules.loss.LinearCrossEntropyLoss",
                "torch.nn.CrossEntropyLoss"};
  ce.kind = "loss";
  ce.doc = "token-level cross entropy over the logits, ignoring masked (-100) labels";
  ce.params = {AtLeast(Field("num_output_chunks", FieldType::kInt, "8", "accepted for torchtune compatibility"), 1),
               Field("ignore_index", FieldType::kInt, "-100", "label value excluded from the loss")};
  out->push_back(ce);

  ComponentSpec disk;
  disk.name = "tune_matrix.training.metric_logging.DiskLogger";
  disk.aliases = {"torchtune.training.metric_logging.DiskLogger", "torchtune.training.metric_logging.StdoutLogger"};
  disk.kind = "metric_logger";
  disk.doc = "metrics as JSON lines in <log_dir>/metrics.jsonl, and one line per logged step on stdout";
  disk.params = {NonEmpty(Field("log_dir", FieldType::kString, "${output_dir}/logs", "folder of metrics.jsonl")),
                 NonEmpty(Field("filename", FieldType::kString, "metrics.jsonl", "file name in log_dir"))};
  out->push_back(disk);

  ComponentSpec ckpt;
  ckpt.name = "tune_matrix.training.FullModelCheckpointer";
  ckpt.aliases = {"torchtune.training.FullModelHFCheckpointer", "torchtune.training.FullModelMetaCheckpointer",
                  "torchtune.training.FullModelTorchTuneCheckpointer"};
  ckpt.kind = "checkpointer";
  ckpt.doc = "safetensors checkpoints: loads weights from checkpoint_dir (or initialises them from the seed when it "
             "is null) and saves to output_dir";
  ckpt.params = {
      Nullable(NonEmpty(Field("checkpoint_dir", FieldType::kString, "null", "folder with the weights to start from"))),
      Field("checkpoint_files", FieldType::kAny, "[model.safetensors]",
            "weight files in checkpoint_dir (a list, or torchtune's filename_format/max_filename)"),
      Nullable(Field("recipe_checkpoint", FieldType::kString, "null", "optimizer/progress state to resume from")),
      Nullable(Field("adapter_checkpoint", FieldType::kString, "null", "LoRA adapter weights to start from")),
      NonEmpty(Field("output_dir", FieldType::kString, "${output_dir}", "where checkpoints are written")),
      Field("model_type", FieldType::kString, "LLAMA3_2", "model family, for torchtune compatibility"),
      Nullable(AtLeast(Field("keep_last_n_checkpoints", FieldType::kInt, "null", "accepted for torchtune compatibility"),
                       1)),
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
    profiler.params.push_back(AtLeast(Field(i, FieldType::kInt, "0", "torch.profiler schedule option"), 0));
  }
  profiler.params.push_back(Field("enabled", FieldType::kBool, "False", "must be False"));
  profiler.params.push_back(Field("output_dir", FieldType::kString, "", "trace folder"));
  out->push_back(profiler);
}

}  // namespace tmx::recipes
