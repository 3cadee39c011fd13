#include "recipes/components.h"

#include "recipes/data/datasets.h"
#include "recipes/data/prompt_templates.h"
#include "recipes/data/tokenizer_builders.h"

namespace tmx::recipes {

namespace {

FieldSpec Path(const char* name, const char* doc) { return Nullable(Field(name, FieldType::kString, "", doc)); }

// torchtune's prompt_template: null, a template's dotpath, or {role: [prepend, append]}.
std::string PromptTemplateProblem(const YAML::Node& v) {
  if (v.IsScalar()) {
    StatusOr<data::PromptTemplate> t = data::PromptTemplate::FromName(v.Scalar());
    return t.ok() ? "" : t.status().message();
  }
  if (v.IsMap()) {
    for (const auto& role : v) {
      const YAML::Node& tags = role.second;
      if (!tags.IsSequence() || tags.size() != 2 || !tags[0].IsScalar() || !tags[1].IsScalar()) {
        return "role " + role.first.as<std::string>("?") + " must map to [prepend, append]";
      }
    }
    return "";
  }
  return "expected null, a template's dotpath or {role: [prepend, append]}";
}

std::string StringOrStringsProblem(const YAML::Node& v) {
  if (v.IsScalar()) return "";
  if (v.IsSequence()) {
    for (const auto& item : v) {
      if (!item.IsScalar()) return "expected a list of file names";
    }
    return "";
  }
  return "expected a file name or a list of them";
}

std::string StringMapProblem(const YAML::Node& v) {
  if (!v.IsMap()) return "expected a mapping of column names, e.g. {input: question, output: answer}";
  for (const auto& kv : v) {
    if (!kv.second.IsScalar()) return "column " + kv.first.as<std::string>("?") + " must map to a column name";
  }
  return "";
}

std::vector<FieldSpec> TokenizerParams(const data::TokenizerComponent& c) {
  using K = data::TokenizerFileKind;
  std::vector<FieldSpec> p;
  if (c.kind == K::kHfTokenizerJson) {
    p.push_back(Required(Path("tokenizer_json_path", "the model's tokenizer.json")));
    p.push_back(Path("tokenizer_config_json_path", "the model's tokenizer_config.json (bos/eos)"));
    p.push_back(Path("generation_config_path", "the model's generation_config.json (bos/eos)"));
    return p;
  }
  if (c.kind != K::kNone) {
    p.push_back(Required(Path("path", c.kind == K::kTiktoken        ? "the tiktoken ranks file (original/tokenizer.model)"
                                      : c.kind == K::kSentencePiece ? "the SentencePiece model (tokenizer.model)"
                                                                    : "vocab.json")));
  }
  if (c.kind == K::kByteBpe) p.push_back(Required(Path("merges_file", "merges.txt")));
  if (c.kind == K::kTiktoken || c.kind == K::kByteBpe || c.name == "phi3_mini_tokenizer") {
    p.push_back(Path("special_tokens_path", "a tokenizer.json whose added tokens replace the family's"));
  }
  p.push_back(Nullable(AtLeast(Field("max_seq_len", FieldType::kInt, "null", "cut samples to this many tokens"), 1)));
  p.push_back(WithValueCheck(Nullable(Field("prompt_template", FieldType::kAny, "",
                                            "null, a template's dotpath or {role: [prepend, append]}; absent: the "
                                            "builder's default")),
                             PromptTemplateProblem));
  p.push_back(Choices(Field("truncation_type", FieldType::kString, "right", "keep the first (right) or last (left) "
                                                                         "tokens"),
                      {"right", "left"}));
  return p;
}

std::vector<FieldSpec> DatasetParams(const data::DatasetComponent& c) {
  using K = data::DatasetKind;
  std::vector<FieldSpec> p;
  if (c.kind == K::kRandomTokens) {
    p.push_back(AtLeast(Field("num_samples", FieldType::kInt, "64", "how many samples"), 1));
    p.push_back(AtLeast(Field("seq_len", FieldType::kInt, "256", "tokens in every sample"), 2));
    p.push_back(Field("seed", FieldType::kInt, "0", "seed of the token ids"));
    return p;
  }
  FieldSpec source = Field("source", FieldType::kString, c.default_source,
                           "a hub id (read from $TUNE_MATRIX_DATA), a local folder, or json/jsonl/csv/text with "
                           "data_files");
  p.push_back(c.default_source.empty() ? Required(source) : source);
  p.push_back(Field("split", FieldType::kString, "train", "the split, or a slice such as train[:10%]"));
  p.push_back(WithValueCheck(Nullable(Field("data_files", FieldType::kAny, "null", "local files for json/jsonl/csv/text")),
                             StringOrStringsProblem));
  p.push_back(Nullable(Field("data_dir", FieldType::kString, "", "folder inside the source")));
  p.push_back(WithValueCheck(Nullable(Field("filter_fn", FieldType::kAny, "null", "not supported")),
                             [](const YAML::Node&) {
                               return std::string("a Python callable cannot run in tune-matrix; remove it and filter "
                                                  "the data files instead");
                             }));
  if (c.kind == K::kText) {
    p.push_back(Field("column", FieldType::kString, "text", "the column holding the text"));
    p.push_back(Field("add_eos", FieldType::kBool, "True", "end each sample with EOS"));
  } else if (c.name == "chat_dataset") {
    p.push_back(Required(Field("conversation_column", FieldType::kString, "", "the column holding the conversation")));
    p.push_back(Required(Choices(Field("conversation_style", FieldType::kString, "", "how turns are written"),
                                 {"sharegpt", "openai"})));
  } else {
    p.push_back(WithValueCheck(Nullable(Field("column_map", FieldType::kAny, "null", "expected column -> the data's")),
                               StringMapProblem));
  }
  if (c.kind != K::kText) {
    p.push_back(Field("train_on_input", FieldType::kBool, c.default_train_on_input ? "True" : "False",
                      "take loss on the prompt too"));
    p.push_back(Nullable(Choices(Field("masking_strategy", FieldType::kString, "null",
                                       "which messages get loss; wins over train_on_input"),
                                 {"train_on_all", "train_on_assistant", "train_on_last"})));
    bool system_prompt = c.name == "chat_dataset" || (c.style != data::MessageStyle::kAlpaca &&
                                                      c.style != data::MessageStyle::kStackExchangePaired);
    if (system_prompt) {
      p.push_back(Nullable(Field("new_system_prompt", FieldType::kString, "null", "a system message to prepend")));
    }
  }
  if (c.kind != K::kPreference) {
    p.push_back(Field("packed", FieldType::kBool, "False", "pack samples into max_seq_len-long sequences"));
  }
  if (c.kind == K::kText) {
    p.push_back(Nullable(Field("split_across_pack", FieldType::kBool, "null", "let a sample continue in the next pack")));
  }
  return p;
}

}  // namespace

void AddDataComponents(std::vector<ComponentSpec>* out) {
  for (const data::TokenizerComponent& t : data::TokenizerComponents()) {
    ComponentSpec c;
    c.name = t.dotpath;
    c.kind = "tokenizer";
    c.doc = t.name + " (tokenizer)";
    c.params = TokenizerParams(t);
    out->push_back(c);
  }
  // Recognised, so a Phi-4 config is told what is missing rather than offered a near name.
  ComponentSpec phi4;
  phi4.name = "torchtune.models.phi4.phi4_tokenizer";
  phi4.kind = "tokenizer";
  phi4.unsupported_reason =
      "Phi-4's tokenizer (GPT-2 byte-level BPE from vocab.json and merges.txt, Phi-4's special tokens, "
      "<|im_sep|> turns) is not implemented yet; use torchtune.modules.transforms.tokenizers."
      "HuggingFaceBaseTokenizer with the model's tokenizer.json (no chat format)";
  out->push_back(phi4);
  for (const data::DatasetComponent& d : data::DatasetComponents()) {
    ComponentSpec c;
    c.name = "tune_matrix.datasets." + d.name;
    if (d.dotpath != c.name) c.aliases = {d.dotpath};
    c.kind = d.kind == data::DatasetKind::kPreference ? "preference_dataset" : "dataset";
    c.doc = d.name + (d.default_source.empty() ? "" : " (default source " + d.default_source + ")");
    c.params = DatasetParams(d);
    out->push_back(c);
  }
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
