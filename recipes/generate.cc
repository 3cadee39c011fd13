#include "recipes/generate.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "base/file_util.h"
#include "base/output_folder.h"
#include "base/text.h"
#include "harness/config_manifest.h"
#include "harness/device_hooks.h"
#include "harness/run_summary.h"
#include "harness/numeric_probe.h"
#include "recipes/estimate.h"
#include "recipes/first_step_probe.h"
#include "recipes/flops.h"
#include "recipes/model_components.h"
#include "recipes/models/generation.h"
#include "recipes/parallelism.h"
#include "recipes/run_progress.h"
#include "recipes/train_schema.h"
#include "recipes/data/image_collate.h"
#include "recipes/data/image_transform.h"
#include "recipes/data/samples.h"
#include "recipes/data/sources.h"
#include "recipes/train_setup.h"
#include "recipes/vision_components.h"
#include "recipes/vision_training.h"

namespace tmx::recipes {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }


constexpr const char* kNoVisionTensorParallel =
    ": tensor-parallel generation of a Llama 3.2 Vision model is not built; fix: use dev/generate_v2 on one device";

// The fewest decode steps a matrix cell makes.
constexpr int kCellDecodeSteps = 32;

// `prompt`: a mapping of system (a string or null) and user (a string, or {text: ...}); nothing else.
std::string PromptCheck(const YAML::Node& v) {
  const std::string shape =
      "; fix: write prompt: {system: <text or null>, user: <text>} (or user: {text: <text>, image: <file.png>})";
  if (!v.IsMap()) return "must be a mapping of system and user" + shape;
  for (const auto& item : v) {
    const std::string role = item.first.Scalar();
    const YAML::Node& content = item.second;
    if (role != "system" && role != "user") return "has role '" + role + "', not system or user" + shape;
    if (content.IsNull()) {
      if (role == "user") return "user is null: there is nothing to answer" + shape;
      continue;
    }
    if (content.IsScalar()) continue;
    if (!content.IsMap() || !content["text"] || !content["text"].IsScalar()) {
      return role + " must be a text, or a mapping with a text" + shape;
    }
    for (const auto& part : content) {
      const std::string name = part.first.Scalar();
      if (name == "image" && role == "user" && part.second.IsScalar()) continue;  // a file (a vision model's)
      if (name != "text") {
        return role + "." + name + ": " +
               (name == "image" ? "an image is the user's, a path to a PNG or PPM file" : "is not a part of a prompt") +
               " (a prompt has a text and, for a Llama 3.2 Vision model, the user's image)" + shape;
      }
    }
  }
  if (!v["user"]) return "has no user message" + shape;
  return "";
}

// Between 0 (greedy) and kMinSamplingTemperature a temperature would divide the logits into infinities (a
// subnormal one is 0 in float32): torchtune divides by 1e-5 there, which is greedy in all but ties.
std::string TemperatureCheck(const YAML::Node& value) {
  const double t = value.as<double>();
  if (!(t > 0 && t < models::kMinSamplingTemperature)) return "";
  return "'" + value.Scalar() +
         "' is above 0 but below 1e-5, where dividing the logits by it overflows (torchtune divides by 1e-5 "
         "instead); use 0 for greedy decoding, or a temperature of at least 1e-5";
}

// The bytes the model's weights take as stored: its parameters and a quantised linear's codes and scales (buffers
// named weight or scales), not its RoPE tables or caches.
double StoredWeightBytes(models::DecoderImpl& decoder) {
  double bytes = 0;
  for (const auto& p : decoder.named_parameters()) bytes += static_cast<double>(p.value().nbytes());
  for (const auto& b : decoder.named_buffers()) {
    if (EndsWith(b.key(), "weight") || EndsWith(b.key(), "scales")) bytes += static_cast<double>(b.value().nbytes());
  }
  return bytes;
}

// What the run's steps and prefill did, for their shares of the device's limits (recipes/flops.h): each decode
// step's bytes (DecodeStepBytes: step i of decode_step_s writes token i + 1, its cache then holding the prompt
// and i + 1 tokens; without the cache a step reruns the sequence and reads the weights once, and is counted as
// the weights alone), and the prefill's FLOPs. One process only: tensor-parallel ranks read their shares each.
void RecordWork(models::DecoderImpl& decoder, const torch::Tensor& ids, const models::Generated& generated,
                bool kv_cache, c10::ScalarType dtype, RunSummary* summary) {
  if (summary->world_size != 1) return;
  const models::DecoderArgs& args = decoder.args();
  const int element = static_cast<int>(c10::elementSize(dtype));
  const double weights = DecodeWeightBytes(args, StoredWeightBytes(decoder), element);
  const int64_t rows = ids.size(0), length = ids.size(1);
  for (size_t i = 0; i < generated.decode_step_s.size(); ++i) {
    summary->step_bytes.push_back(kv_cache ? DecodeStepBytes(args, weights, rows, length + static_cast<int64_t>(i) + 1,
                                                             element)
                                           : weights);
  }
  summary->prefill_flops = PrefillFlops(FlopModel{args, std::nullopt}, rows, length);
}

// The numeric probe of a generation (harness/numeric_probe.h), for the numeric check against its float32
// reference (matrix/tensor_check.h): the prompt, the first token's logits, and kGreedyProbeTokens greedy tokens
// from the prompt with each step's top-2 margin. Greedy whatever the config's temperature, after the timed run:
// sampled tokens of two dtypes part at the first draw that rounding moves, greedy ones only at a near tie. An
// empty `output_dir`: a tensor-parallel rank that takes part in the forwards and writes nothing. `generate` runs
// the model (a text decoder, or a vision model on the prompt's image) with the options it is given.
Status WriteGenerationProbe(const std::function<models::Generated(const models::GenerationOptions&)>& generate,
                            int64_t max_seq_len, const torch::Tensor& ids, models::GenerationOptions options,
                            NumericProbe probe, const std::string& output_dir) {
  options.sampling = models::SamplingOptions{};
  options.sampling.temperature = 0;
  options.stop_tokens.clear();
  options.max_new_tokens = std::min(kGreedyProbeTokens, max_seq_len - ids.size(1));
  std::vector<float> first, margins;
  options.on_logits = [&](const at::Tensor& logits) {
    const torch::Tensor row = logits[0].to(torch::kFloat);
    if (first.empty()) first = FirstStepProbe::Sample(row);
    const torch::Tensor top = std::get<0>(row.topk(2));
    margins.push_back((top[0] - top[1]).item<float>());
  };
  const models::Generated greedy = generate(options);
  if (output_dir.empty()) return Status::OK();  // a rank that only took part
  probe.tensors = {{"batch", "batch", FirstStepProbe::Sample(ids[0])},
                   {"logits", "logits", first},
                   {"greedy", "tokens", FirstStepProbe::Sample(greedy.tokens[0])},
                   {"greedy", "margins", margins}};
  return WriteNumericProbe(output_dir + "/" + kNumericProbeFile, probe);
}

// An image in the prompt needs a vision model (the registry's; an unknown model is the model field's problem).
std::vector<Problem> PromptImageCheck(const Config& config, const Registry& registry, const DeviceInfo*) {
  if (PromptImage(config).empty() || VisionComponentOf(config, registry) != nullptr) return {};
  if (registry.FindComponent(config.Find("model")["_component_"].Scalar()) == nullptr) return {};
  return {{config.OriginOf("prompt").ToString(), "prompt",
           "user.image: an image prompt needs a Llama 3.2 Vision model, and model is a text model; fix: remove the "
           "image, or generate with a llama3_2_vision model"}};
}

enum class Flavor { kGenerate, kV2, kV2Distributed };

Flavor FlavorOf(const std::string& name) {
  return name == "generate" ? Flavor::kGenerate : name == "dev/generate_v2" ? Flavor::kV2 : Flavor::kV2Distributed;
}

std::vector<FieldSpec> GenerateFields(Flavor flavor) {
  const bool v2 = flavor != Flavor::kGenerate;
  std::vector<FieldSpec> f = {
      OutputDirField("folder for the run summary (summary.json)"),
      ComponentField("model", "model", "the model to generate with"),
      ComponentField("checkpointer", "checkpointer", "where the weights are loaded from", false),
      ComponentField("tokenizer", "tokenizer", "the tokenizer, with its chat format and prompt template"),
      DeviceField(),
      DtypeField(),
      SeedField(),
      LogLevelField(),
      WithValueCheck(Required(Field("prompt", FieldType::kAny, "",
                                    "the prompt: {system: <text or null>, user: <text or {text: <text>, image: "
                                    "<a PNG or PPM file, for a Llama 3.2 Vision model; relative: also under the shipped "
                                    "datasets, e.g. tune-matrix/tiny_vision/images/red_wide.ppm>}>}")),
                     PromptCheck),
      AtLeast(Field("max_new_tokens", FieldType::kInt, "300", "tokens to generate at most"), 1),
      WithValueCheck(AtLeast(Field("temperature", FieldType::kFloat, "0.6",
                                   "logits are divided by it before sampling; 0 picks the most likely token (greedy)"),
                             0),
                     TemperatureCheck),
      Nullable(AtLeast(Field("top_k", FieldType::kInt, "null", "sample only among the k most likely tokens; null: all"),
                       1)),
  };
  if (flavor == Flavor::kV2Distributed) {
    f.push_back(ComponentField("tensor_parallel_plan", "tensor_parallel_plan",
                               "how each layer splits over the ranks (every rank takes an equal share)", false));
  }
  if (!v2) {
    f.push_back(Field("enable_kv_cache", FieldType::kBool, "True",
                      "keep each position's keys and values (False: recompute the whole sequence for each token)"));
    f.push_back(ComponentField("quantizer", "quantizer",
                               "null, or the quantizer the quantize recipe wrote the checkpoint with (8da4w)", false));
  }
  return f;
}

// The tokenizer and the prompt's ids.
struct PromptTokens {
  std::unique_ptr<data::ModelTokenizer> tokenizer;
  std::vector<int64_t> ids;
};

class Generator {
 public:
  Generator(const Config& config, const RunContext& context, const Parallelism& parallel)
      : config_(config),
        context_(context),
        parallel_(parallel),
        hooks_(HooksFor(context.device.type)),
        device_(parallel.LocalDevice(torch::Device(context.device.id))),
        out_(parallel.lead() ? context.out : &null_out_),
        progress_(out_) {}

  Status Run(RunSummary* summary);

 private:
  void Synchronize() const { hooks_.Synchronize(device_.has_index() ? device_.index() : context_.device.index); }
  // The tokenizer and the prompt's ids, each below `ids_end` (a text model's folded into its vocabulary first).
  StatusOr<PromptTokens> Tokenize(const models::DecoderArgs& args, int64_t ids_end, bool fold,
                                  RunSummary* summary) const;
  // max_new_tokens, temperature, top_k and the KV cache (stop tokens and padding come from the tokenizer).
  StatusOr<models::GenerationOptions> ReadOptions() const;
  // InvalidArgument naming max_new_tokens when the prompt's `length` and it pass max_seq_len.
  Status CheckLength(int64_t length, int64_t max_new_tokens, int64_t max_seq_len) const;
  // Takes the tokenizer's stop tokens and padding into `options` and says what is generated (`image`: how the
  // prompt's image is described, "" for none).
  void Announce(const data::ModelTokenizer& tok, int64_t length, models::GenerationOptions* options,
                const RunSummary& summary, const std::string& image) const;
  // Prints the answer and records the times.
  void Finish(const models::Generated& generated, const data::ModelTokenizer& tok, const torch::Tensor& ids,
              RunSummary* summary) const;
  // A text model's work (RecordWork) into `summary`, and its numeric probe when asked for.
  Status Record(models::DecoderImpl& decoder, const torch::Tensor& ids, const models::Generated& generated,
                const models::GenerationOptions& options, const std::string& output_dir, RunSummary* summary);
  // A Llama 3.2 Vision model: the prompt's image (prompt.user.image) through its encoder, then the decoder with
  // its fusion layers reading it (models/generation.h).
  Status RunVision(const TrainingSettings& settings, models::GenerationOptions options, RunSummary* summary);
  // prompt.user.image's file; with stand-ins, a shipped sample where it is a URL or absent (said in `stand_ins`).
  StatusOr<std::string> ImageFile(std::vector<std::string>* stand_ins) const;
  // The model, whole, or this rank's share of each layer over several ranks (tensor parallelism).
  StatusOr<models::Decoder> SetupDecoder(const TrainingSettings& settings, RunSummary* summary);

  const Config& config_;
  const RunContext& context_;
  const Parallelism& parallel_;
  const DeviceHooks& hooks_;
  torch::Device device_;
  NullStream null_out_;
  std::ostream* out_;
  RunProgress progress_;
  Clock::time_point start_;
};

StatusOr<models::Decoder> Generator::SetupDecoder(const TrainingSettings& settings, RunSummary* summary) {
  const Registry& registry = *context_.registry;
  StatusOr<ModelChoice> choice = ModelFromConfig(config_, registry);
  TM_RETURN_IF_ERROR(choice.status());
  const TrainKind kind = choice->lora ? TrainKind::kLora : TrainKind::kFull;
  const int ranks = parallel_.world_size();
  if (ranks == 1) {
    StatusOr<TrainableModel> model = SetupModel(config_, registry, kind, settings, device_, context_.allow_stand_ins,
                                                &summary->stand_ins, &progress_);
    TM_RETURN_IF_ERROR(model.status());
    summary->total_parameters = model->total_parameters;
    return model->model;
  }
  if (choice->lora) {
    return Status::InvalidArgument(config_.OriginOf("model._component_").ToString() + ": model '" + choice->component +
                                   "' has LoRA adapters, which tensor parallelism does not split; generate from the "
                                   "merged model a LoRA run saves (model.safetensors) with the plain model builder");
  }
  StatusOr<models::DecoderArgs> local = models::TensorParallelArgs(choice->args, ranks);
  if (!local.ok()) return Status::InvalidArgument(config_.OriginOf("model").ToString() + ": " + local.status().message());
  // As torchtune's recipe, every rank reads the whole checkpoint (into host memory), then keeps its share.
  StatusOr<TrainableModel> whole = SetupModel(config_, registry, kind, settings, torch::Device(torch::kCPU),
                                              context_.allow_stand_ins, &summary->stand_ins, &progress_);
  TM_RETURN_IF_ERROR(whole.status());
  summary->total_parameters = whole->total_parameters;
  models::Decoder shard(*local, std::nullopt, c10::TensorOptions().dtype(settings.dtype).device(device_));
  models::CopyTensorParallelShard(*whole->model, parallel_.rank(), ranks, *shard);
  const Parallelism* parallel = &parallel_;
  shard->set_partial_sum([parallel](const torch::Tensor& part) {
    torch::Tensor sum = part.contiguous();
    parallel->AllReduce(sum);
    return sum;
  });
  progress_.Line("Tensor parallel over " + std::to_string(ranks) + " ranks: each holds " +
                 std::to_string(local->num_heads) + " of " + std::to_string(choice->args.num_heads) +
                 " heads and " + std::to_string(local->intermediate_dim) + " of " +
                 std::to_string(choice->args.intermediate_dim) + " MLP units of every layer");
  return shard;
}

StatusOr<models::GenerationOptions> Generator::ReadOptions() const {
  StatusOr<int64_t> max_new_tokens = config_.GetInt("max_new_tokens");
  StatusOr<double> temperature = config_.GetDouble("temperature");
  StatusOr<bool> kv_cache = config_.GetBool("enable_kv_cache", true);
  for (const Status& s : {max_new_tokens.status(), temperature.status(), kv_cache.status()}) TM_RETURN_IF_ERROR(s);
  models::GenerationOptions options;
  options.max_new_tokens = *max_new_tokens;
  options.sampling.temperature = *temperature;
  if (!config_.IsNull("top_k")) {
    StatusOr<int64_t> top_k = config_.GetInt("top_k");
    TM_RETURN_IF_ERROR(top_k.status());
    options.sampling.top_k = *top_k;
  }
  options.kv_cache = *kv_cache;
  options.synchronize = [this] { Synchronize(); };
  return options;
}

Status Generator::CheckLength(int64_t length, int64_t max_new_tokens, int64_t max_seq_len) const {
  if (max_new_tokens <= max_seq_len - length) return Status::OK();  // length + max_new_tokens may overflow int64
  return Status::InvalidArgument(config_.OriginOf("max_new_tokens").ToString() + ": max_new_tokens: the prompt's " +
                                 std::to_string(length) + " tokens and max_new_tokens=" +
                                 std::to_string(max_new_tokens) + " pass the model's max_seq_len of " +
                                 std::to_string(max_seq_len) + "; fix: lower max_new_tokens to " +
                                 std::to_string(std::max<int64_t>(1, max_seq_len - length)));
}

void Generator::Announce(const data::ModelTokenizer& tok, int64_t length, models::GenerationOptions* options,
                         const RunSummary& summary, const std::string& image) const {
  options->stop_tokens = tok.StopTokens();
  options->pad_id = std::max<int64_t>(0, tok.pad_id());
  std::ostream& out = *out_;
  // Text from weights nobody trained reads as garbage (`<|unk:478|>`): said before it, so it is not taken for a bug.
  if (config_.IsNull("checkpointer.checkpoint_dir") || !summary.stand_ins.empty()) {
    out << "note: the weights are "
        << (summary.stand_ins.empty() ? "seed-initialised (checkpointer.checkpoint_dir is null)"
                                      : "stand-ins (" + JoinStrings(summary.stand_ins, "; ") + ")")
        << ", not trained ones: the text below is noise; its speed is the model's\n";
  }
  out << "Prompt: " << length << " tokens (" << tok.name() << ")" << image << "; generating up to "
      << options->max_new_tokens << " tokens, temperature " << options->sampling.temperature
      << (options->sampling.top_k ? ", top_k " + std::to_string(*options->sampling.top_k) : std::string()) << ", "
      << (options->kv_cache ? "with" : "without") << " the KV cache\n";
}

void Generator::Finish(const models::Generated& generated, const data::ModelTokenizer& tok, const torch::Tensor& ids,
                       RunSummary* summary) const {
  std::vector<int64_t> tokens(generated.tokens.size(1));
  torch::Tensor row = generated.tokens[0].to(torch::kCPU);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = row[static_cast<int64_t>(i)].item<int64_t>();
  *out_ << tok.base().Decode(tokens, /*skip_special=*/true) << "\n";
  summary->step_times_s = generated.decode_step_s;
  summary->step_tokens.assign(generated.decode_step_s.size(), ids.size(0));
  summary->warmup_steps = 1;
  summary->time_to_first_token_s = generated.prefill_s;
  summary->prefill_tokens_per_second = static_cast<double>(ids.numel()) / std::max(generated.prefill_s, 1e-9);
}

StatusOr<PromptTokens> Generator::Tokenize(const models::DecoderArgs& args, int64_t ids_end, bool fold,
                                           RunSummary* summary) const {
  PromptTokens out;
  StatusOr<std::unique_ptr<data::ModelTokenizer>> tokenizer =
      SetupTokenizer(config_, args, context_.allow_stand_ins, &summary->stand_ins);
  TM_RETURN_IF_ERROR(tokenizer.status());
  out.tokenizer = std::move(tokenizer).value();
  StatusOr<std::vector<data::Message>> messages = PromptMessages(config_);
  TM_RETURN_IF_ERROR(messages.status());
  StatusOr<data::TokenizedMessages> prompt = out.tokenizer->TokenizeMessages(*messages, /*add_end_tokens=*/false);
  TM_RETURN_IF_ERROR(prompt.status());
  out.ids = std::move(prompt->tokens);
  for (int64_t& id : out.ids) {
    if (fold) id = FoldIntoVocabulary(id, args);
    if (id < 0 || id >= ids_end) return IdOutsideVocabulary(config_, *out.tokenizer, id, "the prompt", ids_end);
  }
  return out;
}

Status Generator::Run(RunSummary* summary) {
  start_ = Clock::now();
  *out_ << ChooseThreads() << "\n";
  summary->world_size = parallel_.world_size();
  summary->threads = at::get_num_threads();
  StatusOr<std::string> output_dir = config_.GetString("output_dir");
  StatusOr<std::string> dtype = config_.GetString("dtype");
  StatusOr<models::GenerationOptions> options = ReadOptions();
  for (const Status& s : {output_dir.status(), dtype.status(), options.status()}) TM_RETURN_IF_ERROR(s);
  std::vector<Problem> problems = OutputDirProblems(config_);
  if (!problems.empty()) return Status::InvalidArgument(problems.front().ToString());
  TM_RETURN_IF_ERROR(MakeDirs(*output_dir));

  summary->dtype = *dtype;
  TrainingSettings settings;
  settings.dtype = DtypeNamed(*dtype);
  if (!config_.IsNull("quantizer")) {  // only generate's schema has the key
    StatusOr<int64_t> group = config_.GetInt("quantizer.groupsize");
    TM_RETURN_IF_ERROR(group.status());
    settings.int4_group_size = *group;
  }
  StatusOr<uint64_t> seed = ReadSeed(config_);
  TM_RETURN_IF_ERROR(seed.status());
  settings.seed = *seed;
  summary->seed = settings.seed;
  torch::manual_seed(settings.seed);
  if (VisionComponentOf(config_, *context_.registry) != nullptr) {
    if (parallel_.world_size() > 1) {
      return Status::InvalidArgument(config_.OriginOf("model").ToString() + kNoVisionTensorParallel);
    }
    return RunVision(settings, *options, summary);
  }
  for (const Problem& p : PromptImageCheck(config_, *context_.registry, nullptr)) {
    return Status::InvalidArgument(p.ToString());
  }

  StatusOr<models::Decoder> model = SetupDecoder(settings, summary);
  TM_RETURN_IF_ERROR(model.status());
  models::DecoderImpl& decoder = **model;
  StatusOr<PromptTokens> prompt = Tokenize(decoder.args(), decoder.args().vocab_size, /*fold=*/true, summary);
  TM_RETURN_IF_ERROR(prompt.status());
  const data::ModelTokenizer& tok = *prompt->tokenizer;
  const int64_t length = static_cast<int64_t>(prompt->ids.size());
  TM_RETURN_IF_ERROR(CheckLength(length, options->max_new_tokens, decoder.args().max_seq_len));
  Announce(tok, length, &*options, *summary, "");
  torch::Tensor ids = torch::tensor(prompt->ids, torch::TensorOptions().dtype(torch::kLong)).unsqueeze(0).to(device_);
  summary->init_time_s = Seconds(start_, Clock::now());
  const models::Generated generated = models::Generate(decoder, ids, *options);
  Finish(generated, tok, ids, summary);
  return Record(decoder, ids, generated, *options, *output_dir, summary);
}

Status Generator::Record(models::DecoderImpl& decoder, const torch::Tensor& ids, const models::Generated& generated,
                         const models::GenerationOptions& options, const std::string& output_dir,
                         RunSummary* summary) {
  RecordWork(decoder, ids, generated, options.kv_cache, DtypeNamed(summary->dtype), summary);
  // Every rank generates the probe's tokens (tensor-parallel ranks sum each layer's parts together); the lead
  // writes them.
  if (!NumericProbeRequested()) return Status::OK();
  NumericProbe probe;
  probe.dtype = summary->dtype;
  // Quantised weights and expert routing make discrete choices that rounding moves (NumericProbe::quantized).
  probe.quantized = !config_.IsNull("quantizer") || decoder.args().num_experts > 0;
  return WriteGenerationProbe([&](const models::GenerationOptions& o) { return models::Generate(decoder, ids, o); },
                              decoder.args().max_seq_len, ids, options, std::move(probe),
                              parallel_.lead() ? output_dir : "");
}

StatusOr<std::string> Generator::ImageFile(std::vector<std::string>* stand_ins) const {
  const std::string image = PromptImage(config_);
  if (image.find("://") == std::string::npos && IsRegularFile(image)) return image;
  // A relative path this folder lacks may name an image of a dataset shipped with tune-matrix.
  const std::string shipped = data::ShippedDatasetsDir() + "/" + image;
  if (!image.empty() && image[0] != '/' && image.find("://") == std::string::npos && IsRegularFile(shipped)) {
    return shipped;
  }
  const std::string why = image.find("://") != std::string::npos ? " is a URL (runs never download)" : " is absent";
  if (!context_.allow_stand_ins) {
    return Status::NotFound(config_.OriginOf("prompt").ToString() + ": prompt.user.image " + image + why +
                            "; fix: save the image as a PNG or PPM file (e.g. `convert in.jpg out.png`) and give its path, "
                            "or run with --allow-stand-ins to use a shipped sample image");
  }
  const std::string sample = data::SamplesDir() + "/datasets/images/red_square.ppm";
  stand_ins->push_back("prompt.user.image ran on the shipped sample red_square.ppm (" + image + why + ")");
  return sample;
}

Status Generator::RunVision(const TrainingSettings& settings, models::GenerationOptions options,
                            RunSummary* summary) {
  StatusOr<VisionModelChoice> choice = VisionModelFromConfig(config_, *context_.registry);
  TM_RETURN_IF_ERROR(choice.status());
  const models::VisionModelArgs& args = choice->args;
  StatusOr<models::VisionModel> model = LoadVisionModel(
      config_, context_, *choice, c10::TensorOptions().dtype(settings.dtype).device(device_), &summary->stand_ins);
  TM_RETURN_IF_ERROR(model.status());
  summary->total_parameters = models::CountParameters(**model);
  // The fusion tokens (<|image|> first) follow the text's.
  StatusOr<PromptTokens> prompt =
      Tokenize(args.decoder, args.decoder.vocab_size + args.num_special_tokens, /*fold=*/false, summary);
  TM_RETURN_IF_ERROR(prompt.status());
  const data::ModelTokenizer& tok = *prompt->tokenizer;
  const int64_t length = static_cast<int64_t>(prompt->ids.size());
  TM_RETURN_IF_ERROR(CheckLength(length, options.max_new_tokens, args.decoder.max_seq_len));
  data::SampleImages sample{prompt->ids, {}};
  std::string described;
  if (!PromptImage(config_).empty()) {
    StatusOr<std::string> file = ImageFile(&summary->stand_ins);
    TM_RETURN_IF_ERROR(file.status());
    StatusOr<data::Image> image = data::ReadImage(*file);
    TM_RETURN_IF_ERROR(image.status());
    data::ImageTransformOptions transform;
    transform.tile_size = args.encoder.tile_size;
    transform.max_num_tiles = args.encoder.max_num_tiles;
    sample.images.push_back(data::TileImage(*image, transform));
    described = " and a " + std::to_string(sample.images[0].rows) + " x " + std::to_string(sample.images[0].cols) +
                "-tile image";
  }
  Announce(tok, length, &options, *summary, described);
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::tensor(prompt->ids, torch::TensorOptions().dtype(torch::kLong)).unsqueeze(0).to(device_);
  const data::ImageBatch batch = data::CollateImages({sample}, args.image_token_id(), args.encoder.tokens_per_tile(),
                                                     length);
  torch::Tensor encoded, mask;
  if (batch.images.defined()) {
    encoded = (*model)->encoder().forward(batch.images.to(device_, settings.dtype), batch.aspect_ratio.to(device_));
    mask = batch.encoder_mask.to(device_);
  }
  summary->init_time_s = Seconds(start_, Clock::now());
  Finish(models::Generate(**model, ids, encoded, mask, options), tok, ids, summary);
  if (!NumericProbeRequested()) return Status::OK();
  NumericProbe probe;
  probe.dtype = summary->dtype;
  StatusOr<std::string> output_dir = config_.GetString("output_dir");
  TM_RETURN_IF_ERROR(output_dir.status());
  return WriteGenerationProbe(
      [&](const models::GenerationOptions& o) { return models::Generate(**model, ids, encoded, mask, o); },
      args.decoder.max_seq_len, ids, options, std::move(probe), *output_dir);
}

Status RunGenerate(const Config& config, const RunContext& context, const std::string& recipe) {
  auto generate = [&](Parallelism& parallel, RunSummary* summary) {
    Generator generator(config, context, parallel);
    return generator.Run(summary);
  };
  auto report = [&](const RunSummary& summary) {
    // The decode rate is Finish's: the median over the steps after the first (a step: one token per sequence).
    char line[160];
    std::snprintf(line, sizeof(line), "Generated %zu tokens: time to first token %.3f s (prefill %.1f tokens/s)",
                  summary.step_times_s.size() + 1, summary.time_to_first_token_s.value_or(0),
                  summary.prefill_tokens_per_second.value_or(0));
    *context.out << line;
    if (summary.tokens_per_second) {
      std::snprintf(line, sizeof(line), ", decode %.2f tokens/s", *summary.tokens_per_second);
      *context.out << line;
    }
    if (summary.bytes_per_second) *context.out << " reading " << FormatBandwidth(*summary.bytes_per_second);
    if (summary.peak_memory_bytes) {
      *context.out << ", peak memory " << FormatBytes(*summary.peak_memory_bytes) << " (" << summary.peak_memory_source
                   << (summary.world_size > 1 ? ", all ranks" : "") << ")";
    }
    *context.out << "\n";
  };
  return RunInProcessOrRanks(config, context, recipe, FlavorOf(recipe) == Flavor::kV2Distributed,
                             "lower max_new_tokens or use a smaller dtype", generate, report);
}

}  // namespace

StatusOr<std::vector<data::Message>> PromptMessages(const Config& config) {
  const YAML::Node prompt = config.Find("prompt");
  const std::string problem = PromptCheck(prompt);
  if (!problem.empty()) {
    return Status::InvalidArgument(config.OriginOf("prompt").ToString() + ": prompt " + problem);
  }
  std::vector<data::Message> messages;
  for (const char* role : {"system", "user"}) {
    const YAML::Node content = prompt[role];
    if (!content || content.IsNull()) continue;
    messages.emplace_back(role, content.IsScalar() ? content.Scalar() : content["text"].Scalar());
    if (content.IsMap() && content["image"]) messages.back().images = 1;
  }
  messages.emplace_back("assistant", "");
  return messages;
}

namespace {

// What an estimate of generating reads of the config: bytes per weight, and the positions a sequence reaches (the
// prompt: tokenizer.max_seq_len at most kTypicalSeqLen, and max_new_tokens). In double, as EstimateFinetune:
// hostile sizes give an enormous prediction, never an overflow.
struct GenerateSizes {
  double bytes = 0, positions = 0;
};

StatusOr<GenerateSizes> GenerateSizesOf(const Config& config) {
  StatusOr<std::string> dtype = config.GetString("dtype");
  StatusOr<int64_t> max_new_tokens = config.GetInt("max_new_tokens");
  StatusOr<int64_t> prompt = config.GetInt("tokenizer.max_seq_len", kTypicalSeqLen);
  for (const Status& s : {dtype.status(), max_new_tokens.status(), prompt.status()}) TM_RETURN_IF_ERROR(s);
  return GenerateSizes{static_cast<double>(c10::elementSize(DtypeNamed(*dtype))),
                       static_cast<double>(std::min(*prompt, kTypicalSeqLen)) + static_cast<double>(*max_new_tokens)};
}

// EstimateGenerate of a vision model on one device: its weights (encoder, projection and fusion layers included),
// the decoder layers' KV cache, the fusion layers' keys and values of one image (every tile it may have), the
// encoder's work on it one layer at a time (its activations and padding mask, boolean and in the weights' dtype),
// and the logits. Work of a step: one pass over the decoder's parameters.
StatusOr<CellEstimate> EstimateVisionGenerate(const Config& config, const Registry& registry,
                                              const DeviceInfo& device) {
  StatusOr<VisionModelChoice> choice = VisionModelFromConfig(config, registry);
  StatusOr<GenerateSizes> sizes = GenerateSizesOf(config);
  for (const Status& s : {choice.status(), sizes.status()}) TM_RETURN_IF_ERROR(s);
  const models::VisionModelArgs& a = choice->args;
  const VisionParameterCounts counts = CountVisionParameters(*choice);
  const double bytes = sizes->bytes, positions = sizes->positions;
  const double kv = static_cast<double>(a.decoder.num_kv_heads * a.decoder.resolved_head_dim());
  const double image = static_cast<double>(a.encoder.max_num_tiles * ((a.encoder.tokens_per_tile() + 7) / 8 * 8));
  const double e = static_cast<double>(a.encoder.embed_dim), d = static_cast<double>(a.decoder.embed_dim);
  const double cache = 2 * kv * bytes *
                       (static_cast<double>(a.decoder.num_layers) * positions +
                        static_cast<double>(a.fusion_layers().size()) * image);
  const double hidden = static_cast<double>(a.encoder.hidden_states.size());
  const double encoder = image * (4 * e + 4 * e + 3 * 4 * e + (2 * hidden + 1) * e + d) * bytes + image * image * (1 + bytes);
  const double layer = positions * (4 * d + 4 * d + 3 * static_cast<double>(a.decoder.intermediate_dim)) * bytes;
  const double logits = positions * static_cast<double>(a.decoder.vocab_size) * (bytes + 4);
  const double peak = static_cast<double>(counts.total) * bytes + cache + std::max(encoder, layer) + logits +
                      static_cast<double>(device.traits().RuntimeBytes());
  CellEstimate out;
  out.parameters = counts.total;
  out.peak_memory_bytes = peak < 0x1p62 ? static_cast<int64_t>(peak) : int64_t{1} << 62;
  out.work = static_cast<double>(counts.total - counts.encoder);
  return out;
}

}  // namespace

std::string PromptImage(const Config& config) {
  const YAML::Node prompt = config.Find("prompt");
  if (!prompt.IsMap()) return "";
  const YAML::Node user = prompt["user"];
  return user && user.IsMap() && user["image"] && user["image"].IsScalar() ? user["image"].Scalar() : "";
}

StatusOr<CellEstimate> EstimateGenerate(const Config& config, const Registry& registry, const DeviceInfo& device,
                                        int ranks) {
  if (VisionComponentOf(config, registry) != nullptr) {
    if (ranks > 1) {
      return Status::InvalidArgument(config.OriginOf("model").ToString() + kNoVisionTensorParallel);
    }
    return EstimateVisionGenerate(config, registry, device);
  }
  StatusOr<ModelChoice> choice = ModelFromConfig(config, registry);
  StatusOr<GenerateSizes> sizes = GenerateSizesOf(config);
  for (const Status& s : {choice.status(), sizes.status()}) TM_RETURN_IF_ERROR(s);
  const models::DecoderArgs& args = choice->args;
  CellEstimate e;
  e.parameters = CountModelParameters(*choice).total;
  const double bytes = sizes->bytes, positions = sizes->positions;
  const double weights = static_cast<double>(e.parameters) * bytes;
  const double cache = 2 * static_cast<double>(args.num_layers) * positions *
                       static_cast<double>(args.num_kv_heads * args.resolved_head_dim()) * bytes;
  // The prompt's forward: one layer's activations at a time, and its logits in the model dtype and in fp32.
  const double layer = positions *
                       (4 * static_cast<double>(args.embed_dim) + 4 * static_cast<double>(args.num_heads *
                                                                                          args.resolved_head_dim()) +
                        3 * static_cast<double>(args.intermediate_dim)) *
                       bytes;
  const double logits = positions * static_cast<double>(args.vocab_size) * (bytes + 4);
  const bool host_memory = device.traits().HostMemory();
  const double runtime = static_cast<double>(device.traits().RuntimeBytes());
  double peak = weights + cache + layer + logits + runtime;
  if (ranks > 1) {
    // Tensor parallel: a rank keeps 1/ranks of the layers (embeddings and output whole, counted whole here) and
    // of the cache; but each first reads the whole model into host memory. Ranks sharing the host add up.
    const double n = ranks;
    const double shard = weights / n + cache / n + layer / n + logits + runtime;
    peak = host_memory ? n * (weights + shard) : shard;
  }
  e.peak_memory_bytes = peak < 0x1p62 ? static_cast<int64_t>(peak) : int64_t{1} << 62;
  e.work = static_cast<double>(e.parameters);  // one pass over the parameters for the one sequence
  return e;
}

RecipeSpec GenerateRecipe(const std::string& name) {
  const Flavor flavor = FlavorOf(name);
  RecipeSpec r;
  r.name = name;
  r.task = RecipeTask::kGenerate;
  if (flavor == Flavor::kV2Distributed) {
    r.doc = "generation across ranks (tune run --nproc_per_node N), tensor parallel: each rank holds a share of "
            "every layer's heads and MLP; KV cache, greedy or sampled decoding";
    r.launch = RecipeLaunch::kRanks;
  } else {
    r.doc = "generation from one prompt on one device: KV cache, greedy or sampled decoding, time to first token "
            "and decode tokens/s";
    r.launch = RecipeLaunch::kOneProcess;
  }
  r.configs = ManifestConfigsOf(BuiltinConfigManifest(), r.name);
  r.fields = GenerateFields(flavor);
  r.checks = {PromptImageCheck};
  r.run = [name](const Config& config, const RunContext& context) { return RunGenerate(config, context, name); };
  r.estimate = [flavor](const Config& config, const Registry& registry, const DeviceInfo& device) {
    return EstimateGenerate(config, registry, device,
                            flavor == Flavor::kV2Distributed ? device.traits().matrix_ranks : 1);
  };
  r.missing_inputs = [](const Config& config, const Registry& registry) {
    std::vector<Problem> problems = MissingModelInputs(config, registry);
    for (Problem& p : OutputDirProblems(config)) problems.push_back(std::move(p));
    return problems;
  };
  // A cell: the prompt, then `steps` decode steps (one new token each), and at least kCellDecodeSteps so that
  // the decode rate is a median over enough tokens (the plan's prediction counts `steps` of them).
  r.cell_overrides = [](int steps) -> std::vector<std::string> {
    return {"max_new_tokens=" + std::to_string(std::max(steps, kCellDecodeSteps) + 1)};
  };
  return r;
}

}  // namespace tmx::recipes
