#include "recipes/eleuther_eval.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>

#include "base/file_util.h"
#include "base/json_io.h"
#include "base/text.h"
#include "harness/config_manifest.h"
#include "harness/device_hooks.h"
#include "harness/run_summary.h"
#include "recipes/data/samples.h"
#include "recipes/estimate.h"
#include "recipes/eval_tasks.h"
#include "recipes/model_components.h"
#include "recipes/parallelism.h"
#include "recipes/run_progress.h"
#include "recipes/train_schema.h"
#include "recipes/train_setup.h"

namespace tmx::recipes {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The fewest documents a matrix cell scores: the first batch is the warm-up, the rest are timed.
constexpr int kCellDocuments = 4;

// `tasks`: a non-empty list of the shipped tasks, each once.
std::string TasksCheck(const YAML::Node& v) {
  if (v.size() == 0) return "is empty; fix: name at least one task, e.g. [\"truthfulqa_mc2\"]";
  std::vector<std::string> seen;
  for (const auto& item : v) {
    const std::string name = item.Scalar();
    if (FindEvalTask(name) == nullptr) {
      return "task '" + name + "' is not one tune-matrix scores (it has: " + EvalTaskNames() +
             "); fix: choose among those, or evaluate other tasks with torchtune and lm-evaluation-harness";
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) return "task '" + name + "' is listed twice";
    seen.push_back(name);
  }
  return "";
}

std::string ChatTemplateCheck(const YAML::Node& v) {
  if (!v.as<bool>()) return "";
  return "True is not supported: tune-matrix scores the harness's plain prompts; fix: set it to False";
}

std::vector<FieldSpec> EvalFields() {
  return {
      OutputDirField("folder for summary.json and eval_results.json"),
      ComponentField("model", "model", "the model to evaluate"),
      ComponentField("checkpointer", "checkpointer", "where the weights are loaded from", false),
      ComponentField("tokenizer", "tokenizer", "the tokenizer (texts are encoded without BOS and EOS, as torchtune's)"),
      DeviceField(),
      DtypeField(),
      SeedField(),
      LogLevelField(),
      WithValueCheck(
          Required(Field("tasks", FieldType::kStringList, "", "the harness's tasks to score: " + EvalTaskNames())),
          TasksCheck),
      Nullable(Above(Field("limit", FieldType::kFloat, "null",
                           "documents per task: a count, or a fraction below 1 of them; null: all"),
                     0)),
      AtLeast(Field("max_seq_length", FieldType::kInt, "4096",
                    "input tokens per request at most (the harness's max_length; the model's max_seq_len caps it)"),
              1),
      AtLeast(Field("batch_size", FieldType::kInt, "8", "requests per forward pass"), 1),
      Field("enable_kv_cache", FieldType::kBool, "True", "for generation tasks (none of the shipped tasks generates)"),
      ComponentField("quantizer", "quantizer",
                     "null, or the quantizer the quantize recipe wrote the checkpoint with (8da4w)", false),
      Nullable(Field("include_path", FieldType::kString, "null",
                     "a folder holding a task's whole data file (truthfulqa_mc.json, wikitext.json: the harness's "
                     "evaluation split as a JSON list) in place of the shipped sample; null: the shipped sample")),
      WithValueCheck(Field("apply_chat_template", FieldType::kBool, "False", "must be False"), ChatTemplateCheck),
      WithValueCheck(Field("chat_template", FieldType::kBool, "False", "must be False (torchtune's spelling)"),
                     ChatTemplateCheck),
      Field("resume_from_checkpoint", FieldType::kBool, "False", "ignored: an evaluation resumes nothing"),
  };
}

// One task's documents and where their requests start in the run's list.
struct TaskRun {
  const EvalTask* task = nullptr;
  std::string source;  // the data file read
  std::vector<EvalDoc> docs;
  size_t first_request = 0;
  std::vector<size_t> requests_of_doc;  // a continuation each (multiple choice), or a window each (rolling)
};

// A row of the harness's table.
struct TableRow {
  std::string task, metric, arrow;
  double value = 0;
  std::optional<double> stderr_of_value;
};

class Evaluator {
 public:
  Evaluator(const Config& config, const RunContext& context)
      : config_(config), context_(context), hooks_(HooksFor(context.device.type)), progress_(context.out) {}

  Status Run(RunSummary* summary);

 private:
  StatusOr<std::vector<TaskRun>> LoadTasks() const;
  StatusOr<models::Decoder> SetupDecoder(RunSummary* summary);
  StatusOr<std::vector<LoglikelihoodRequest>> Encode(std::vector<TaskRun>& tasks, const data::ModelTokenizer& tok,
                                                     const models::DecoderArgs& args, int64_t max_length) const;
  Status Report(const std::vector<TaskRun>& tasks, const std::vector<Loglikelihood>& results,
                RunSummary* summary) const;

  const Config& config_;
  const RunContext& context_;
  const DeviceHooks& hooks_;
  RunProgress progress_;
};

StatusOr<std::vector<TaskRun>> Evaluator::LoadTasks() const {
  StatusOr<std::vector<std::string>> names = config_.GetStringList("tasks");
  TM_RETURN_IF_ERROR(names.status());
  std::optional<std::string> folder;
  if (!config_.IsNull("include_path")) {
    StatusOr<std::string> path = config_.GetString("include_path");
    TM_RETURN_IF_ERROR(path.status());
    folder = *path;
  }
  std::optional<double> limit;
  if (!config_.IsNull("limit")) {
    StatusOr<double> l = config_.GetDouble("limit");
    TM_RETURN_IF_ERROR(l.status());
    limit = *l;
  }
  std::vector<TaskRun> runs;
  for (const std::string& name : *names) {
    TaskRun run;
    run.task = FindEvalTask(name);
    if (run.task == nullptr)
      return Status::InvalidArgument(config_.OriginOf("tasks").ToString() +
                                     ": tasks: " + TasksCheck(config_.Find("tasks")));
    run.source = (folder ? *folder : data::SamplesDir() + "/eval") + "/" + run.task->data_file;
    if (folder && !PathExists(run.source)) {
      return Status::NotFound(config_.OriginOf("include_path").ToString() + ": include_path: " + run.source +
                              " does not exist; fix: put the harness's " + name + " data (" + run.task->data_file +
                              ") there, or set include_path: null to score the shipped sample");
    }
    StatusOr<std::vector<EvalDoc>> all = LoadEvalDocs(*run.task, run.source);
    TM_RETURN_IF_ERROR(all.status());
    const std::optional<int64_t> n = DocumentLimit(limit, static_cast<int64_t>(all->size()));
    run.docs = std::move(*all);
    if (n && *n < static_cast<int64_t>(run.docs.size())) run.docs.resize(static_cast<size_t>(*n));
    runs.push_back(std::move(run));
  }
  return runs;
}

StatusOr<models::Decoder> Evaluator::SetupDecoder(RunSummary* summary) {
  StatusOr<std::string> dtype = config_.GetString("dtype");
  StatusOr<uint64_t> seed = ReadSeed(config_);
  StatusOr<ModelChoice> choice = ModelFromConfig(config_, *context_.registry);
  for (const Status& s : {dtype.status(), seed.status(), choice.status()}) TM_RETURN_IF_ERROR(s);
  TrainingSettings settings;
  settings.dtype = DtypeNamed(*dtype);
  settings.seed = *seed;
  if (!config_.IsNull("quantizer")) {
    StatusOr<int64_t> group = config_.GetInt("quantizer.groupsize");
    TM_RETURN_IF_ERROR(group.status());
    settings.int4_group_size = *group;
  }
  summary->seed = settings.seed;
  summary->dtype = *dtype;
  torch::manual_seed(settings.seed);
  StatusOr<TrainableModel> model =
      SetupModel(config_, *context_.registry, choice->lora ? TrainKind::kLora : TrainKind::kFull, settings,
                 torch::Device(context_.device.id), context_.allow_stand_ins, &summary->stand_ins, &progress_);
  TM_RETURN_IF_ERROR(model.status());
  summary->total_parameters = model->total_parameters;
  model->model->eval();
  return model->model;
}

// The requests of one document: a context and continuation per choice, or the rolling windows of its text.
std::vector<LoglikelihoodRequest> DocRequests(const EvalTask& task, const EvalDoc& doc, const data::ModelTokenizer& tok,
                                              int64_t prefix, int64_t max_length) {
  std::vector<LoglikelihoodRequest> out;
  if (!IsRolling(task)) {
    for (const std::string& continuation : doc.continuations)
      out.push_back(EncodePair(tok, doc.context, continuation, prefix));
    return out;
  }
  for (auto& [context, continuation] : RollingWindows(tok.Encode(doc.text, false, false), prefix, max_length)) {
    out.push_back({std::move(context), std::move(continuation)});
  }
  return out;
}

StatusOr<std::vector<LoglikelihoodRequest>> Evaluator::Encode(std::vector<TaskRun>& tasks,
                                                              const data::ModelTokenizer& tok,
                                                              const models::DecoderArgs& args,
                                                              int64_t max_length) const {
  // The harness's prefix_token_id with the model's own tokenizer: BOS where it has one, else EOS.
  const int64_t prefix = tok.bos_id() >= 0 ? tok.bos_id() : tok.eos_id();
  std::vector<LoglikelihoodRequest> requests;
  for (TaskRun& run : tasks) {
    run.first_request = requests.size();
    for (const EvalDoc& doc : run.docs) {
      std::vector<LoglikelihoodRequest> own;
      try {
        own = DocRequests(*run.task, doc, tok, prefix, max_length);
      } catch (const data::TokenizeError& e) {  // a pattern that hit PCRE2's match limit: the tokenizer's file named
        return e.status();
      }
      run.requests_of_doc.push_back(own.size());
      for (LoglikelihoodRequest& r : own) {
        for (std::vector<int64_t>* ids : {&r.context, &r.continuation}) {
          for (int64_t& id : *ids) {
            id = FoldIntoVocabulary(id, args);
            if (id < 0 || id >= args.vocab_size) {
              return IdOutsideVocabulary(config_, tok, id, "task " + run.task->name, args.vocab_size);
            }
          }
        }
        requests.push_back(std::move(r));
      }
    }
  }
  return requests;
}

// The harness's table: a row per task and metric.
void PrintTable(std::ostream& out, const std::vector<TableRow>& rows) {
  out << "|Tasks|Version|Filter|n-shot|Metric| |Value| |Stderr|\n|---|--:|---|--:|---|---|--:|---|--:|\n";
  char row[320];
  for (const TableRow& r : rows) {
    char error[64] = "N/A";
    if (r.stderr_of_value) std::snprintf(error, sizeof(error), "%.4f", *r.stderr_of_value);
    std::snprintf(row, sizeof(row), "|%s|2|none|0|%s|%s|%.4f|±|%s|\n", r.task.c_str(), r.metric.c_str(),
                  r.arrow.c_str(), r.value, error);
    out << row;
  }
}

// The results of each of the run's documents, in order.
std::vector<std::vector<Loglikelihood>> ResultsByDoc(const TaskRun& run, const std::vector<Loglikelihood>& results) {
  std::vector<std::vector<Loglikelihood>> out;
  auto next = results.begin() + static_cast<std::ptrdiff_t>(run.first_request);
  for (size_t count : run.requests_of_doc) {
    out.emplace_back(next, next + static_cast<std::ptrdiff_t>(count));
    next += static_cast<std::ptrdiff_t>(count);
  }
  return out;
}

nlohmann::json ReportChoices(const TaskRun& run, const std::vector<Loglikelihood>& results, RunSummary* summary,
                             std::vector<TableRow>* rows) {
  nlohmann::json docs = nlohmann::json::array();
  std::vector<double> scores;
  const std::vector<std::vector<Loglikelihood>> by_doc = ResultsByDoc(run, results);
  for (size_t d = 0; d < run.docs.size(); ++d) {
    std::vector<double> lls;
    std::vector<bool> greedy;
    for (const Loglikelihood& r : by_doc[d]) {
      lls.push_back(r.value);
      greedy.push_back(r.is_greedy);
    }
    scores.push_back(ScoreEvalDoc(*run.task, run.docs[d], lls));
    docs.push_back({{"loglikelihoods", lls}, {"is_greedy", greedy}, {"acc", NumberToJson(scores.back())}});
  }
  const EvalMetric m = MeanWithStderr(scores);
  summary->scores[run.task->name + "/acc"] = m.mean;
  summary->scores[run.task->name + "/acc_stderr"] = m.stderr_of_mean;
  rows->push_back({run.task->name, "acc", "↑", m.mean, m.stderr_of_mean});
  return {{"acc", NumberToJson(m.mean)}, {"acc_stderr", NumberToJson(m.stderr_of_mean)}, {"docs", docs}};
}

nlohmann::json ReportRolling(const TaskRun& run, const std::vector<Loglikelihood>& results, RunSummary* summary,
                             std::vector<TableRow>* rows) {
  nlohmann::json docs = nlohmann::json::array();
  std::vector<double> lls;
  const std::vector<std::vector<Loglikelihood>> by_doc = ResultsByDoc(run, results);
  for (size_t d = 0; d < run.docs.size(); ++d) {
    double ll = 0;
    for (const Loglikelihood& r : by_doc[d]) ll += r.value;
    lls.push_back(ll);
    docs.push_back({{"loglikelihood", NumberToJson(ll)},
                    {"windows", by_doc[d].size()},
                    {"words", run.docs[d].words},
                    {"bytes", run.docs[d].bytes}});
  }
  const Perplexities p = PerplexitiesOf(lls, run.docs);
  nlohmann::json out = {{"docs", docs}};
  for (const auto& [metric, value] :
       std::vector<std::pair<std::string, double>>{{"bits_per_byte", p.bits_per_byte},
                                                   {"byte_perplexity", p.byte_perplexity},
                                                   {"word_perplexity", p.word_perplexity}}) {
    summary->scores[run.task->name + "/" + metric] = value;
    rows->push_back({run.task->name, metric, "↓", value, std::nullopt});
    out[metric] = NumberToJson(value);
  }
  return out;
}

Status Evaluator::Report(const std::vector<TaskRun>& tasks, const std::vector<Loglikelihood>& results,
                         RunSummary* summary) const {
  nlohmann::json file = {{"scored_as", "lm-evaluation-harness 0.4.8"}, {"tasks", nlohmann::json::object()}};
  std::vector<TableRow> rows;
  for (const TaskRun& run : tasks) {
    nlohmann::json task = IsRolling(*run.task) ? ReportRolling(run, results, summary, &rows)
                                               : ReportChoices(run, results, summary, &rows);
    task["documents"] = run.docs.size();
    task["split_documents"] = run.task->full_size;
    task["source"] = run.source;
    file["tasks"][run.task->name] = std::move(task);
    *context_.out << run.task->name << ": " << run.docs.size() << " of the split's " << run.task->full_size
                  << " documents, from " << run.source << "\n";
  }
  PrintTable(*context_.out, rows);
  StatusOr<std::string> output_dir = config_.GetString("output_dir");
  TM_RETURN_IF_ERROR(output_dir.status());
  return WriteFileAtomically(*output_dir + "/eval_results.json", DumpJson(file, 1) + "\n");
}

Status Evaluator::Run(RunSummary* summary) {
  const Clock::time_point start = Clock::now();
  *context_.out << ChooseThreads() << "\n";
  summary->threads = at::get_num_threads();
  StatusOr<std::string> output_dir = config_.GetString("output_dir");
  StatusOr<int64_t> batch_size = config_.GetInt("batch_size");
  StatusOr<int64_t> max_length = config_.GetInt("max_seq_length");
  for (const Status& s : {output_dir.status(), batch_size.status(), max_length.status()}) TM_RETURN_IF_ERROR(s);
  std::vector<Problem> problems = OutputDirProblems(config_);
  if (!problems.empty()) return Status::InvalidArgument(problems.front().ToString());
  TM_RETURN_IF_ERROR(MakeDirs(*output_dir));
  StatusOr<std::vector<TaskRun>> tasks = LoadTasks();  // before the model: a bad task file fails at once
  TM_RETURN_IF_ERROR(tasks.status());

  torch::InferenceMode inference;
  StatusOr<models::Decoder> model = SetupDecoder(summary);
  TM_RETURN_IF_ERROR(model.status());
  const models::DecoderArgs& args = (*model)->args();
  StatusOr<std::unique_ptr<data::ModelTokenizer>> tokenizer =
      SetupTokenizer(config_, args, context_.allow_stand_ins, &summary->stand_ins);
  TM_RETURN_IF_ERROR(tokenizer.status());
  const int64_t length = std::min(*max_length, args.max_seq_len);
  StatusOr<std::vector<LoglikelihoodRequest>> requests = Encode(*tasks, **tokenizer, args, length);
  TM_RETURN_IF_ERROR(requests.status());
  // Scores of weights nobody trained are a random model's: said first, so they are not taken for the model's.
  if (config_.IsNull("checkpointer.checkpoint_dir") || !summary->stand_ins.empty()) {
    *context_.out << "note: the weights are "
                  << (summary->stand_ins.empty() ? "seed-initialised (checkpointer.checkpoint_dir is null)"
                                                 : "stand-ins (" + JoinStrings(summary->stand_ins, "; ") + ")")
                  << ", not trained ones: the scores below are a random model's; its speed is the model's\n";
  }

  LoglikelihoodOptions options;
  options.batch_size = *batch_size;
  options.max_length = length;
  if (options.max_length < *max_length) {
    *context_.out << "note: max_seq_length " << *max_length << " is over the model's max_seq_len; requests keep their "
                  << "last " << options.max_length << " tokens\n";
  }
  const int index = context_.device.index;
  options.synchronize = [this, index] { hooks_.Synchronize(index); };
  *context_.out << "Scoring " << requests->size() << " log-likelihood requests, " << options.batch_size << " a batch\n";
  summary->init_time_s = Seconds(start, Clock::now());
  LoglikelihoodBatches batches;
  const std::vector<Loglikelihood> results = ComputeLoglikelihoods(**model, *requests, options, &batches);
  summary->step_times_s = batches.seconds;
  summary->step_tokens = batches.tokens;
  summary->warmup_steps = 1;
  return Report(*tasks, results, summary);
}

Status RunEval(const Config& config, const RunContext& context) {
  auto work = [&](Parallelism&, RunSummary* summary) {
    Evaluator evaluator(config, context);
    return evaluator.Run(summary);
  };
  auto report = [&](const RunSummary& summary) {
    *context.out << "Finished: " << summary.step_times_s.size() << " batches";
    if (summary.tokens_per_second) {
      char line[64];
      std::snprintf(line, sizeof(line), ", %.1f tokens/s", *summary.tokens_per_second);
      *context.out << line;
    }
    if (summary.peak_memory_bytes) {
      *context.out << ", peak memory " << FormatBytes(*summary.peak_memory_bytes) << " (" << summary.peak_memory_source
                   << ")";
    }
    *context.out << "\n";
  };
  return RunInProcessOrRanks(config, context, "eleuther_eval", /*distributed=*/false,
                             "lower batch_size or max_seq_length, or use a smaller dtype", work, report);
}

// Peak memory: the weights, one batch's activations of one layer at a time, and the continuations' logits in
// float32 twice (logits, log-softmax) at about a tenth of the positions; work of a step: the parameters over a
// batch of typical requests.
StatusOr<CellEstimate> EstimateEval(const Config& config, const Registry& registry, const DeviceInfo& device) {
  StatusOr<ModelChoice> choice = ModelFromConfig(config, registry);
  StatusOr<std::string> dtype = config.GetString("dtype");
  StatusOr<int64_t> batch = config.GetInt("batch_size");
  StatusOr<int64_t> max_length = config.GetInt("max_seq_length");
  for (const Status& s : {choice.status(), dtype.status(), batch.status(), max_length.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  const models::DecoderArgs& args = choice->args;
  CellEstimate e;
  e.parameters = CountModelParameters(*choice).total;
  const double bytes = static_cast<double>(c10::elementSize(DtypeNamed(*dtype)));
  const double positions = static_cast<double>(*batch) * static_cast<double>(std::min(*max_length, kTypicalSeqLen));
  const double layer =
      positions *
      (4 * static_cast<double>(args.embed_dim) + 4 * static_cast<double>(args.num_heads * args.resolved_head_dim()) +
       3 * static_cast<double>(args.intermediate_dim)) *
      bytes;
  const double logits = positions / 10 * static_cast<double>(args.vocab_size) * (bytes + 8);
  const double peak =
      static_cast<double>(e.parameters) * bytes + layer + logits + static_cast<double>(device.traits().RuntimeBytes());
  e.peak_memory_bytes = peak < 0x1p62 ? static_cast<int64_t>(peak) : int64_t{1} << 62;
  e.work = static_cast<double>(e.parameters) * positions;
  return e;
}

}  // namespace

LoglikelihoodRequest EncodePair(const data::ModelTokenizer& tokenizer, const std::string& context,
                                const std::string& continuation, int64_t prefix_id) {
  std::string ctx = context;
  std::string cont = continuation;
  const size_t kept = ctx.find_last_not_of(" \t\n\r\f\v");
  const size_t end = kept == std::string::npos ? 0 : kept + 1;
  cont = ctx.substr(end) + cont;
  ctx.resize(end);
  LoglikelihoodRequest r;
  if (ctx.empty()) {
    r.context = {prefix_id};
    r.continuation = tokenizer.Encode(cont, false, false);
    return r;
  }
  const std::vector<int64_t> whole = tokenizer.Encode(ctx + cont, false, false);
  r.context = tokenizer.Encode(ctx, false, false);
  const size_t split = std::min(r.context.size(), whole.size());
  r.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(split), whole.end());
  return r;
}

namespace {

// One batch of requests (indices into `requests`): their inputs right-padded with 0, one forward to the final norm,
// the output projection only at each continuation's positions, then float32 log-softmax.
void ScoreBatch(models::DecoderImpl& model, const std::vector<LoglikelihoodRequest>& requests,
                const std::vector<size_t>& rows, int64_t max_length, std::vector<Loglikelihood>* out, int64_t* tokens) {
  std::vector<std::vector<int64_t>> inputs;
  int64_t longest = 1;
  for (size_t r : rows) {
    std::vector<int64_t> all = requests[r].context;
    all.insert(all.end(), requests[r].continuation.begin(), requests[r].continuation.end());
    const size_t keep = std::min(all.size(), static_cast<size_t>(max_length) + 1);
    inputs.emplace_back(all.end() - static_cast<std::ptrdiff_t>(keep), all.end() - 1);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(inputs.back().size()));
    *tokens += static_cast<int64_t>(inputs.back().size());
  }
  torch::Tensor ids = torch::zeros({static_cast<int64_t>(rows.size()), longest}, torch::kLong);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t n = static_cast<int64_t>(inputs[i].size());
    if (n > 0) ids[static_cast<int64_t>(i)].narrow(0, 0, n).copy_(torch::tensor(inputs[i], torch::kLong));
  }
  const torch::Device device = model.parameters().front().device();
  const torch::Tensor hidden = model.Hidden(ids.to(device));
  std::vector<torch::Tensor> positions;
  std::vector<int64_t> targets;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t length = static_cast<int64_t>(inputs[i].size());
    const int64_t count = std::min<int64_t>(static_cast<int64_t>(requests[rows[i]].continuation.size()), length);
    positions.push_back(hidden[static_cast<int64_t>(i)].narrow(0, length - count, count));
    const std::vector<int64_t>& c = requests[rows[i]].continuation;
    targets.insert(targets.end(), c.end() - count, c.end());
  }
  const torch::Tensor logp = torch::log_softmax(model.OutputLogits(torch::cat(positions)).to(torch::kFloat), -1);
  const torch::Tensor target = torch::tensor(targets, torch::kLong).to(device);
  const torch::Tensor picked = logp.gather(1, target.unsqueeze(1)).squeeze(1).to(torch::kCPU).contiguous();
  const torch::Tensor greedy = logp.argmax(-1).eq(target).to(torch::kCPU);
  const float* values = picked.data_ptr<float>();
  int64_t at = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t count = positions[i].size(0);
    Loglikelihood& result = (*out)[rows[i]];
    // Summed in double in token order, as the harness's float(logits.sum()) of float32 values within rounding.
    for (int64_t k = 0; k < count; ++k) result.value += values[at + k];
    result.is_greedy = count == 0 || greedy.narrow(0, at, count).all().item<bool>();
    at += count;
  }
}

}  // namespace

std::vector<Loglikelihood> ComputeLoglikelihoods(models::DecoderImpl& model,
                                                 const std::vector<LoglikelihoodRequest>& requests,
                                                 const LoglikelihoodOptions& options, LoglikelihoodBatches* batches) {
  std::vector<Loglikelihood> out(requests.size());
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  auto length = [&](size_t r) { return requests[r].context.size() + requests[r].continuation.size(); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return length(a) > length(b); });
  const size_t batch = static_cast<size_t>(std::max<int64_t>(1, options.batch_size));
  for (size_t start = 0; start < order.size(); start += batch) {
    const std::vector<size_t> rows(order.begin() + static_cast<std::ptrdiff_t>(start),
                                   order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), start + batch)));
    const Clock::time_point t0 = Clock::now();
    int64_t tokens = 0;
    ScoreBatch(model, requests, rows, options.max_length, &out, &tokens);
    if (options.synchronize) options.synchronize();
    batches->seconds.push_back(Seconds(t0, Clock::now()));
    batches->tokens.push_back(tokens);
  }
  return out;
}

RecipeSpec EleutherEvalRecipe() {
  RecipeSpec r;
  r.name = "eleuther_eval";
  r.task = RecipeTask::kEvaluate;
  r.doc =
      "a model scored on EleutherAI's harness tasks (truthfulqa_mc1, truthfulqa_mc2 by log-likelihood; wikitext's "
      "rolling perplexity) as lm-evaluation-harness 0.4.8 scores them, on shipped task samples: scores and tokens/s";
  r.launch = RecipeLaunch::kOneProcess;
  r.configs = ManifestConfigsOf(BuiltinConfigManifest(), r.name);
  r.fields = EvalFields();
  r.run = RunEval;
  r.estimate = EstimateEval;
  r.missing_inputs = [](const Config& config, const Registry& registry) {
    std::vector<Problem> problems = MissingModelInputs(config, registry);
    for (Problem& p : OutputDirProblems(config)) problems.push_back(std::move(p));
    return problems;
  };
  // A cell: the first documents of each task, at least kCellDocuments (about one batch each for truthfulqa_mc2).
  r.cell_overrides = [](int steps) -> std::vector<std::string> {
    return {"limit=" + std::to_string(std::max(steps + 1, kCellDocuments))};
  };
  return r;
}

}  // namespace tmx::recipes
