#include "recipes/ppo_recipe.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "base/file_util.h"
#include "base/text.h"
#include "recipes/checkpointers.h"
#include "recipes/estimate.h"
#include "recipes/flops.h"
#include "recipes/model_components.h"
#include "recipes/models/generation.h"

namespace tmx::recipes {
namespace {

using Trajectory = PpoObjective::Trajectory;

// Every field of a Trajectory, to concatenate or select them all.
constexpr torch::Tensor Trajectory::*kTrajectoryFields[] = {
    &Trajectory::query_responses,        &Trajectory::input_pos,           &Trajectory::document_ids,
    &Trajectory::logprobs,               &Trajectory::ref_logprobs,        &Trajectory::values,
    &Trajectory::response_padding_masks, &Trajectory::value_padding_masks, &Trajectory::value_seq_idxs,
    &Trajectory::scores,                 &Trajectory::seq_lens};

Trajectory Cat(const std::vector<Trajectory>& parts) {
  Trajectory out;
  for (auto field : kTrajectoryFields) {
    std::vector<torch::Tensor> pieces;
    for (const Trajectory& t : parts) pieces.push_back(t.*field);
    out.*field = torch::cat(pieces, 0);
  }
  return out;
}

Trajectory Rows(const Trajectory& t, const torch::Tensor& index) {
  Trajectory out;
  for (auto field : kTrajectoryFields) out.*field = (t.*field).index_select(0, index);
  return out;
}

// torchtune's masks from a padding mask (true: a real token; get_causal_mask_from_padding_mask and
// get_position_ids_from_padding_mask): each real token at its position among the real ones, attending to the real
// tokens before it (document 0); each padding position at position 0, a document of its own, seeing itself only.
void PositionsFromPadding(const torch::Tensor& real, torch::Tensor* input_pos, torch::Tensor* document_ids) {
  const torch::Tensor ids = real.to(torch::kLong);
  *input_pos = (ids.cumsum(-1) - 1) * ids;
  const torch::Tensor own = torch::arange(1, real.size(1) + 1, ids.options()).expand_as(ids);
  *document_ids = torch::where(real, torch::zeros_like(ids), own);
}

// torchtune's logits_to_logprobs over the response positions: the log-probability of each response token under
// logits / temperature, from the logits of the position before it.
torch::Tensor ResponseLogProbs(const torch::Tensor& logits, const torch::Tensor& responses, int64_t context,
                               double temperature) {
  const torch::Tensor before = logits.narrow(1, context - 1, responses.size(1)).to(torch::kFloat);
  return torch::log_softmax(before / temperature, -1).gather(2, responses.unsqueeze(-1)).squeeze(-1);
}

// A value or reward model's scores [B, G] at the positions before each response token.
torch::Tensor ResponseValues(const torch::Tensor& scores, int64_t context, int64_t generated) {
  return scores.narrow(1, context - 1, generated).squeeze(-1).to(torch::kFloat);
}

int64_t IntOr(const Config& config, const std::string& key, int64_t fallback) {
  StatusOr<int64_t> v = config.GetInt(key, fallback);
  return v.ok() ? *v : fallback;
}

bool BoolOr(const Config& config, const std::string& key) {
  StatusOr<bool> v = config.GetBool(key, false);
  return v.ok() && *v;
}

std::optional<int64_t> NullableInt(const Config& config, const std::string& key) {
  if (config.IsNull(key)) return std::nullopt;
  StatusOr<int64_t> v = config.GetInt(key);
  return v.ok() ? std::optional<int64_t>(*v) : std::nullopt;
}

StatusOr<PpoSettings> ReadPpoSettings(const Config& config) {
  PpoSettings s;
  s.ppo_epochs = IntOr(config, "ppo_epochs", 1);
  s.ppo_batch_size = IntOr(config, "ppo_batch_size", 1);
  s.backward_batch_size = IntOr(config, "ppo_backward_batch_size", s.ppo_batch_size);
  s.forward_batch_size = IntOr(config, "forward_batch_size", 1);
  s.max_generated_tokens = IntOr(config, "max_generated_tokens", 1);
  s.top_k = NullableInt(config, "top_k");
  s.min_response_length = NullableInt(config, "min_response_length");
  const std::pair<const char*, double*> numbers[] = {{"temperature", &s.temperature},
                                                     {"reward_penalty", &s.reward_penalty},
                                                     {"gamma", &s.gamma},
                                                     {"lmbda", &s.lmbda},
                                                     {"kl_coeff", &s.kl_coeff},
                                                     {"loss.epsilon", &s.loss.epsilon},
                                                     {"loss.value_clip_range", &s.loss.value_clip_range},
                                                     {"loss.value_coeff", &s.loss.value_coeff}};
  for (const auto& [key, out] : numbers) {
    StatusOr<double> v = config.GetDouble(key);
    TM_RETURN_IF_ERROR(v.status());
    *out = *v;
  }
  StatusOr<bool> penalise = config.GetBool("penalise_no_eos");
  TM_RETURN_IF_ERROR(penalise.status());
  s.penalise_no_eos = *penalise;
  const YAML::Node stops = config.Find("stop_token_ids");
  if (stops && stops.IsSequence()) {
    for (const YAML::Node& id : stops) s.stop_token_ids.push_back(id.as<int64_t>());
  }
  return s;
}

// The sums of a step's PPO statistics over its mini-batches (torchtune's PPOStats).
struct PpoStepSums {
  double minibatches = 0, loss = 0, policy_loss = 0, value_loss = 0, ratios = 0, clipfrac = 0, approx_kl = 0;
};

}  // namespace

Config PpoLoopConfig(const Config& config) {
  Config loop = config;
  YAML::Node root = loop.root();
  root["model"] = YAML::Clone(config.Find("policy_model"));
  const int64_t batch = std::max<int64_t>(IntOr(config, "batch_size", 1), 1);
  int64_t steps = std::max<int64_t>(IntOr(config, "num_steps", 1) / batch, 1);
  if (std::optional<int64_t> cap = NullableInt(config, "max_steps_per_epoch")) steps = std::min(steps, *cap);
  root["epochs"] = 1;
  root["max_steps_per_epoch"] = steps;
  const int64_t accumulate = std::max<int64_t>(IntOr(config, "gradient_accumulation_steps", 1), 1);
  root["ppo_backward_batch_size"] = std::max<int64_t>(IntOr(config, "ppo_batch_size", 1) / accumulate, 1);
  root["gradient_accumulation_steps"] = 1;  // the loop's: one batch of prompts a step
  return loop;
}

// ----- PpoObjective -----

// A frozen or trained copy of `choice` built from the seed (as the policy was, so without a checkpoint the
// reference is the policy and the value model the reward model) and loaded from `checkpointer`.
static StatusOr<models::Decoder> BuildModel(const TrainingSetup& setup, const ModelChoice& choice,
                                            const std::string& checkpointer, const std::string& what,
                                            RunSummary* summary) {
  const int64_t total = CountModelParameters(choice).total;
  setup.progress.Begin("Building the " + what + " " + choice.component + " (" + FormatCount(total) + " parameters)");
  torch::manual_seed(setup.settings.seed);
  models::Decoder model(choice.args, std::nullopt,
                        c10::TensorOptions().dtype(setup.settings.dtype).device(setup.device));
  setup.progress.End("Built the " + what);
  TM_RETURN_IF_ERROR(LoadStartingWeights(setup.config, setup.registry, choice, *model, setup.context.allow_stand_ins,
                                         &summary->stand_ins, {}, checkpointer));
  summary->total_parameters += total;
  return model;
}

static void Freeze(models::DecoderImpl& model) {
  for (torch::Tensor& p : model.parameters()) p.set_requires_grad(false);
  model.eval();
}

Status PpoObjective::Setup(const TrainingSetup& setup, RunSummary* summary) {
  TM_RETURN_IF_ERROR(Objective::Setup(setup, summary));
  StatusOr<PpoSettings> settings = ReadPpoSettings(setup.config);
  TM_RETURN_IF_ERROR(settings.status());
  ppo_ = *settings;
  policy_args_ = setup.model.choice.args;
  StatusOr<ModelChoice> scorer = ModelFromConfig(setup.config, setup.registry, "reward_and_value_model");
  TM_RETURN_IF_ERROR(scorer.status());
  value_args_ = scorer->args;
  value_choice_ = *scorer;
  if (scorer->args.vocab_size != policy_args_.vocab_size) {
    return Status::InvalidArgument(setup.config.OriginOf("reward_and_value_model").ToString() +
                                   ": reward_and_value_model: its vocabulary (" +
                                   std::to_string(scorer->args.vocab_size) + " ids) is not the policy's (" +
                                   std::to_string(policy_args_.vocab_size) +
                                   "); the reward and value models read the policy's tokens, so size them alike");
  }
  StatusOr<models::Decoder> reference =
      BuildModel(setup, setup.model.choice, "ref_policy_checkpointer", "reference policy", summary);
  TM_RETURN_IF_ERROR(reference.status());
  reference_ = *reference;
  Freeze(*reference_);
  StatusOr<models::Decoder> reward = BuildModel(setup, *scorer, "reward_checkpointer", "reward model", summary);
  TM_RETURN_IF_ERROR(reward.status());
  reward_ = *reward;
  Freeze(*reward_);
  StatusOr<models::Decoder> value = BuildModel(setup, *scorer, "value_checkpointer", "value model", summary);
  TM_RETURN_IF_ERROR(value.status());
  value_ = *value;
  value_->set_activation_checkpointing(setup.settings.activation_checkpointing);
  value_->train();
  StatusOr<OptimizerPtr> optimizer = SetupOptimizer(setup.config, setup.registry, value_->parameters());
  TM_RETURN_IF_ERROR(optimizer.status());
  value_optimizer_ = std::move(*optimizer);
  summary->trainable_parameters += CountModelParameters(*scorer).total;
  if (ppo_.stop_token_ids.empty()) {
    std::vector<std::string> unused;
    StatusOr<std::unique_ptr<data::ModelTokenizer>> tokenizer =
        SetupTokenizer(setup.config, policy_args_, setup.context.allow_stand_ins, &unused);
    TM_RETURN_IF_ERROR(tokenizer.status());
    ppo_.stop_token_ids = (*tokenizer)->StopTokens();
  }
  return Status::OK();
}

Status PpoObjective::SaveCheckpoint(int64_t epoch, const TrainingSetup& setup) {
  StatusOr<std::string> out = setup.config.GetString("value_checkpointer.output_dir");
  TM_RETURN_IF_ERROR(out.status());
  const std::string dir = *out + "/epoch_" + std::to_string(epoch);
  setup.progress.Begin("Saving the value model " + dir);
  TM_RETURN_IF_ERROR(MakeDirs(dir));
  TM_RETURN_IF_ERROR(SaveEpochWeights(dir, CheckpointFormatOf(setup.config, setup.registry, "value_checkpointer"),
                                      value_choice_, *value_, /*adapter_only=*/false));
  setup.progress.End("Saved the value model " + dir);
  return Status::OK();
}

StatusOr<data::DataLoader> PpoObjective::LoadData(const TrainingSetup& setup, RunSummary* summary) {
  StatusOr<data::DataLoader> loader = Objective::LoadData(setup, summary);
  if (!loader.ok()) return loader;
  pad_id_ = loader->options().pad_id;
  prompt_lengths_.clear();
  for (int64_t i = 0; i < loader->num_samples(); ++i) {
    prompt_lengths_.push_back(static_cast<int64_t>(loader->sample(i).tokens.size()));
  }
  return loader;
}

std::vector<std::string> PpoObjective::Describe(const TrainingSetup& setup) const {
  std::string top_k = ppo_.top_k ? std::to_string(*ppo_.top_k) : "all";
  return {"PPO: each step the policy answers batch_size prompts with " + std::to_string(ppo_.max_generated_tokens) +
              " tokens (temperature " + FormatNumber(ppo_.temperature, 2) + ", top_k " + top_k +
              "), the frozen reward model scores them, and " + std::to_string(ppo_.ppo_epochs) +
              " PPO epoch(s) of mini-batches of " + std::to_string(ppo_.ppo_batch_size) +
              " train the policy and the value model (one optimizer step each a mini-batch)",
          "PPO generation recomputes the whole sequence for each token (enable_kv_cache is not used: the KV cache "
          "here takes no padding mask)"};
}

// The batch's prompts as torchtune's collate pads them for PPO: on the left, to the longest.
torch::Tensor PpoObjective::LeftPadded(const data::Batch& batch) const {
  const int64_t rows = batch.tokens.size(0);
  int64_t width = 1;
  for (int64_t index : batch.indices) width = std::max(width, prompt_lengths_[static_cast<size_t>(index)]);
  torch::Tensor out = torch::full({rows, width}, pad_id_, torch::kLong);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t length = prompt_lengths_[static_cast<size_t>(batch.indices[static_cast<size_t>(r)])];
    out[r].narrow(0, width - length, length).copy_(batch.tokens[r].narrow(0, 0, length));
  }
  return out;
}

// The policy's answers: prompts [B, T] followed by max_generated_tokens drawn tokens, [B, T + G].
torch::Tensor PpoObjective::Responses(const torch::Tensor& prompts) {
  torch::Tensor sequence = prompts;
  torch::Tensor real = prompts.ne(pad_id_);
  const models::SamplingOptions sampling{ppo_.temperature, ppo_.top_k};
  for (int64_t g = 0; g < ppo_.max_generated_tokens; ++g) {
    torch::Tensor input_pos, document_ids;
    PositionsFromPadding(real, &input_pos, &document_ids);
    const torch::Tensor logits = policy_->forward(sequence, input_pos, document_ids).select(1, -1);
    const torch::Tensor next = models::SampleTokens(logits, sampling).unsqueeze(1);
    sequence = torch::cat({sequence, next}, 1);
    real = torch::cat({real, torch::ones_like(next, torch::kBool)}, 1);
  }
  return sequence;
}

// torchtune's generate_trajectory for one forward batch of prompts [B, T].
Trajectory PpoObjective::Generate(const torch::Tensor& prompts) {
  torch::NoGradGuard no_grad;
  const int64_t context = prompts.size(1), generated = ppo_.max_generated_tokens;
  Trajectory t;
  t.query_responses = Responses(prompts);
  torch::Tensor responses = t.query_responses.narrow(1, context, generated).clone();
  PositionsFromPadding(t.query_responses.ne(pad_id_), &t.input_pos, &t.document_ids);
  auto forward = [&](models::DecoderImpl& model, const torch::Tensor& tokens) {
    return model.forward(tokens, t.input_pos, t.document_ids);
  };
  t.logprobs = ResponseLogProbs(forward(*policy_, t.query_responses), responses, context, ppo_.temperature);
  t.ref_logprobs = ResponseLogProbs(forward(*reference_, t.query_responses), responses, context, ppo_.temperature);
  t.values = ResponseValues(forward(*value_, t.query_responses), context, generated);
  const torch::Tensor stops = torch::tensor(at::ArrayRef<int64_t>(ppo_.stop_token_ids), torch::kLong);
  TruncatedResponses truncated = TruncateAtFirstStopToken(responses, stops, pad_id_);
  t.response_padding_masks = truncated.padding_masks;
  const torch::Tensor scored = forward(*reward_, torch::cat({prompts, truncated.responses}, 1));
  t.seq_lens = UnmaskedSequenceLengths(t.response_padding_masks);
  t.scores = scored.squeeze(-1).to(torch::kFloat).gather(1, (t.seq_lens + context).unsqueeze(-1)).squeeze(-1);
  if (ppo_.penalise_no_eos || ppo_.min_response_length) {
    const torch::Tensor penalised = RewardPenaltyMask(t.response_padding_masks, t.seq_lens, ppo_.penalise_no_eos,
                                                      ppo_.min_response_length);
    t.scores = t.scores.masked_fill(penalised, ppo_.reward_penalty);
  }
  t.logprobs.masked_fill_(t.response_padding_masks, 1.0);
  t.ref_logprobs.masked_fill_(t.response_padding_masks, 1.0);
  t.value_seq_idxs = ValueSequenceIndices(t.seq_lens, generated);
  t.value_padding_masks = t.response_padding_masks.clone().scatter_(1, t.value_seq_idxs.unsqueeze(-1), false);
  t.values.masked_fill_(t.value_padding_masks, 0.0);
  return t;
}

// torchtune's ppo_step: the policy's and the value model's new estimates of `t`, the clipped losses, backward of
// loss x `scale`.
PpoLossTerms PpoObjective::MicroStep(const Trajectory& t, const torch::Tensor& advantages,
                                     const torch::Tensor& returns, int64_t context, double scale, double* approx_kl) {
  const int64_t generated = ppo_.max_generated_tokens;
  const torch::Tensor responses = t.query_responses.narrow(1, context, generated);
  torch::Tensor logprobs = ResponseLogProbs(policy_->forward(t.query_responses, t.input_pos, t.document_ids),
                                            responses, context, ppo_.temperature);
  logprobs = logprobs.masked_fill(t.response_padding_masks, 1.0);
  torch::Tensor values =
      ResponseValues(value_->forward(t.query_responses, t.input_pos, t.document_ids), context, generated);
  values = values.masked_fill(t.value_padding_masks, 0.0);
  PpoLossTerms terms = PpoLoss(t.logprobs, logprobs, advantages, t.values, values, returns,
                               t.response_padding_masks.logical_not(), t.value_padding_masks.logical_not(), ppo_.loss);
  (terms.loss * scale).backward();
  torch::NoGradGuard no_grad;
  *approx_kl = (0.5 * (logprobs.detach() - t.logprobs).pow(2)).mean().item<double>();
  return terms;
}

// Model FLOPs of a step of `rows` prompts of `context` tokens: generation (a forward over the sequence so far for
// each token), the policy's, reference's, value and reward models' forwards over the trajectories, and each PPO
// epoch's forward and backward of the policy and the value model.
double PpoObjective::StepFlops(int64_t rows, int64_t context) const {
  const FlopModel policy{policy_args_, std::nullopt}, value{value_args_, std::nullopt};
  const int64_t length = context + ppo_.max_generated_tokens;
  double flops = 0;
  for (int64_t n = context; n < length; ++n) flops += ForwardFlops(policy, rows, n);
  flops += 2 * ForwardFlops(policy, rows, length) + 2 * ForwardFlops(value, rows, length);
  flops += static_cast<double>(ppo_.ppo_epochs) * (TrainingFlops(policy, rows, length) + TrainingFlops(value, rows, length));
  return flops;
}


Status PpoObjective::Step(StepContext& step) {
  const torch::Tensor prompts = LeftPadded(step.batch()).to(device_);
  const int64_t rows = prompts.size(0), context = prompts.size(1);
  if (context + ppo_.max_generated_tokens > policy_args_.max_seq_len) {
    return Status::InvalidArgument(
        "step " + std::to_string(step.global_step + 1) + ": prompts of " + std::to_string(context) + " tokens and " +
        std::to_string(ppo_.max_generated_tokens) + " generated ones exceed the policy's max_seq_len (" +
        std::to_string(policy_args_.max_seq_len) + "); lower tokenizer.max_seq_len or max_generated_tokens");
  }
  std::vector<Trajectory> parts;
  for (int64_t start = 0; start < rows; start += ppo_.forward_batch_size) {
    parts.push_back(Generate(prompts.narrow(0, start, std::min(ppo_.forward_batch_size, rows - start))));
  }
  const Trajectory t = Cat(parts);
  const PpoRewards rewards = RewardsWithKlPenalty(t.scores, t.logprobs, t.ref_logprobs, ppo_.kl_coeff, t.value_seq_idxs);
  const Advantages gae =
      EstimateAdvantages(t.values, rewards.total, ppo_.gamma, ppo_.lmbda, t.response_padding_masks.logical_not());
  PpoStepSums sums;
  for (int64_t epoch = 0; epoch < ppo_.ppo_epochs; ++epoch) {
    const torch::Tensor order = torch::randperm(rows, torch::TensorOptions().dtype(torch::kLong).device(device_));
    for (int64_t start = 0; start < rows; start += ppo_.ppo_batch_size) {
      const torch::Tensor mini = order.narrow(0, start, std::min(ppo_.ppo_batch_size, rows - start));
      const int64_t passes = (mini.size(0) + ppo_.backward_batch_size - 1) / ppo_.backward_batch_size;
      for (int64_t j = 0; j < mini.size(0); j += ppo_.backward_batch_size) {
        const torch::Tensor index = mini.narrow(0, j, std::min(ppo_.backward_batch_size, mini.size(0) - j));
        double approx_kl = 0;
        const PpoLossTerms terms = MicroStep(Rows(t, index), gae.advantages.index_select(0, index),
                                             gae.returns.index_select(0, index), context, 1.0 / passes, &approx_kl);
        sums.loss += terms.loss.item<double>() / passes;
        sums.policy_loss += terms.policy_loss.item<double>() / passes;
        sums.value_loss += terms.value_loss.item<double>() / passes;
        sums.ratios += terms.ratios.item<double>() / passes;
        sums.clipfrac += terms.clipfrac.item<double>() / passes;
        sums.approx_kl += approx_kl / passes;
      }
      step.optimizer_step();
      value_optimizer_->step();
      value_optimizer_->zero_grad();
      sums.minibatches += 1;
    }
  }
  const double n = std::max(sums.minibatches, 1.0);
  const double scores = t.scores.mean().item<double>(), kl_reward = rewards.kl_reward.sum(1).mean().item<double>();
  metrics_ = {{"scores", scores},
              {"num_stop_tokens", t.response_padding_masks.any(-1).sum().item<double>()},
              {"rlhf_reward", scores + kl_reward},
              {"kl", rewards.kl.sum(1).mean().item<double>()},
              {"kl_reward", kl_reward},
              {"policy_loss", sums.policy_loss / n},
              {"value_loss", sums.value_loss / n},
              {"clipfrac", sums.clipfrac / n},
              {"ratios", sums.ratios / n},
              {"approx_policy_kl", sums.approx_kl / n},
              {"response_lengths", t.seq_lens.to(torch::kFloat).mean().item<double>()}};
  step.result->loss = sums.loss / n;
  step.result->tokens = t.query_responses.ne(pad_id_).sum().item<int64_t>();
  step.result->flops = StepFlops(rows, context);
  if (!std::isfinite(step.result->loss)) {
    step.summary->error_kind = "non_finite_loss";
    return Status::Internal("non-finite PPO loss (" + std::to_string(step.result->loss) + ") at step " +
                            std::to_string(step.global_step + 1) + "; lower optimizer.lr or use dtype=fp32");
  }
  return Status::OK();
}

// ----- The recipe -----

namespace {

std::string StopTokensCheck(const YAML::Node& value) {
  if (value.IsNull()) return "";
  bool ids = value.IsSequence();
  if (ids) {
    for (const YAML::Node& id : value) {
      try {
        ids = ids && id.IsScalar() && id.as<int64_t>() >= 0;
      } catch (const YAML::Exception&) {
        ids = false;
      }
    }
  }
  return ids ? "" : "must be a list of token ids such as [2], or null for the tokenizer's stop tokens";
}

std::vector<FieldSpec> PpoFields() {
  return {
      ComponentField("reward_and_value_model", "model",
                     "the reward and value models' architecture (a classifier such as llama2_classifier, num_classes "
                     "1): the reward model scores responses (frozen), the value model estimates values (trained)"),
      ComponentField("ref_policy_checkpointer", "checkpointer",
                     "the frozen reference policy's weights: the policy's starting checkpoint"),
      ComponentField("value_checkpointer", "checkpointer", "the value model's starting weights (usually the reward's)"),
      ComponentField("reward_checkpointer", "checkpointer", "the frozen reward model's weights"),
      AtLeast(Field("ppo_epochs", FieldType::kInt, "1", "passes over each step's trajectories"), 1),
      AtLeast(Field("ppo_batch_size", FieldType::kInt, "${batch_size}",
                    "trajectories per PPO mini-batch (one optimizer step each); divides batch_size"),
              1),
      AtLeast(Field("forward_batch_size", FieldType::kInt, "${batch_size}",
                    "prompts generated for at once; divides batch_size"),
              1),
      AtLeast(Field("max_generated_tokens", FieldType::kInt, "58", "tokens drawn for each prompt"), 1),
      Above(Field("temperature", FieldType::kFloat, "0.7", "the logits are divided by it, to draw and to score"), 0),
      Nullable(AtLeast(Field("top_k", FieldType::kInt, "null", "draw among the k most likely tokens; null: all"), 1)),
      Nullable(AtLeast(Field("min_response_length", FieldType::kInt, "null",
                             "a shorter response scores reward_penalty; null: no minimum"),
                       0)),
      Field("penalise_no_eos", FieldType::kBool, "True", "a response without a stop token scores reward_penalty"),
      Field("reward_penalty", FieldType::kFloat, "-3", "the score of a penalised response"),
      WithValueCheck(Nullable(Field("stop_token_ids", FieldType::kAny, "null",
                                    "ids that end a response; null: the tokenizer's stop tokens")),
                     StopTokensCheck),
      Field("whiten_rewards", FieldType::kBool, "False", "read and unused, as in torchtune's recipe"),
      AtMost(AtLeast(Field("gamma", FieldType::kFloat, "1", "GAE's discount"), 0), 1),
      AtMost(AtLeast(Field("lmbda", FieldType::kFloat, "0.95", "GAE's lambda"), 0), 1),
      AtLeast(Field("kl_coeff", FieldType::kFloat, "0.01", "weight of the KL penalty to the reference per token"), 0),
      Field("enable_kv_cache", FieldType::kBool, "True",
            "accepted; generation here recomputes the sequence for each token (the KV cache takes no padding mask)"),
  };
}

// torchtune's _setup_training_parameters' checks, and what this recipe does not implement.
std::vector<Problem> PpoChecks(const Config& config, const Registry& registry, const DeviceInfo*) {
  std::vector<Problem> problems;
  auto add = [&](const std::string& key, const std::string& message) {
    problems.push_back({config.OriginOf(key).ToString(), key, message});
  };
  auto number = [&](const std::string& key) { return IntOr(config, key, 1); };
  const int64_t batch = number("batch_size");
  for (const char* key : {"forward_batch_size", "ppo_batch_size"}) {
    if (number(key) > 0 && batch % number(key) != 0) {
      add(key, std::string(key) + " (" + std::to_string(number(key)) + ") must divide batch_size (" +
                   std::to_string(batch) + ")");
    }
  }
  const int64_t accumulate = number("gradient_accumulation_steps");
  if (accumulate > 0 && number("ppo_batch_size") % accumulate != 0) {
    add("gradient_accumulation_steps", "gradient_accumulation_steps (" + std::to_string(accumulate) +
                                           ") must divide ppo_batch_size (" +
                                           std::to_string(number("ppo_batch_size")) + ")");
  }
  if (accumulate > 1 && BoolOr(config, "optimizer_in_bwd")) {
    add("optimizer_in_bwd", "gradient accumulation is not supported with optimizer_in_bwd=True; set "
                            "gradient_accumulation_steps=1 or optimizer_in_bwd=False");
  }
  if (number("num_steps") < batch) {
    add("num_steps", "num_steps (" + std::to_string(number("num_steps")) + ") counts prompts and must be at least "
                     "batch_size (" + std::to_string(batch) + ")");
  }
  if (config.Find("lr_scheduler").IsMap()) {
    add("lr_scheduler", "a learning-rate schedule is not implemented for PPO here (optimizer.lr stays constant); "
                        "remove lr_scheduler");
  }
  if (BoolOr(config, "resume_from_checkpoint")) {
    add("resume_from_checkpoint", "resuming PPO is not implemented (the value model's optimizer state is not saved); set "
                                  "resume_from_checkpoint=False");
  }
  StatusOr<ModelChoice> policy = ModelFromConfig(config, registry, "policy_model");
  StatusOr<ModelChoice> scorer = ModelFromConfig(config, registry, "reward_and_value_model");
  if (policy.ok() && scorer.ok() && policy->args.vocab_size != scorer->args.vocab_size) {
    add("reward_and_value_model", "its vocabulary (" + std::to_string(scorer->args.vocab_size) +
                                      " ids) is not the policy's (" + std::to_string(policy->args.vocab_size) +
                                      "); the reward and value models read the policy's tokens");
  }
  return problems;
}

// The reference's, the reward model's and the value model's share of a cell: their weights, the value model's
// gradients and two float32 optimizer states, and their work: a forward each over the step's tokens, and the value
// model's forward and backward in each PPO epoch.
StatusOr<CellEstimate> EstimatePpoModels(const Config& config, const Registry& registry) {
  StatusOr<ExtraModelInputs> reference = ReadExtraModelInputs(config, registry, "policy_model");
  StatusOr<ExtraModelInputs> scorer = ReadExtraModelInputs(config, registry, "reward_and_value_model");
  TM_RETURN_IF_ERROR(reference.status());
  TM_RETURN_IF_ERROR(scorer.status());
  const double policy = static_cast<double>(CountModelParameters(reference->model).total);
  const double value = static_cast<double>(CountModelParameters(scorer->model).total);
  CellEstimate e;
  e.parameters = static_cast<int64_t>(policy + 2 * value);
  const double bytes = reference->bytes;
  e.peak_memory_bytes = static_cast<int64_t>(policy * bytes + value * (3 * bytes + 8));
  const double epochs = static_cast<double>(IntOr(config, "ppo_epochs", 1));
  e.work = reference->tokens * (policy + 2 * value + 3 * epochs * value);
  return e;
}

}  // namespace

RecipeSpec PpoRecipe(std::function<std::unique_ptr<Objective>()> objective) {
  TrainingRecipe r;
  r.name = "ppo_full_finetune_single_device";
  r.doc = "full PPO (RLHF) on one device: the policy answers prompts, a frozen reward model scores the answers, and "
          "the policy and a value model train on the clipped PPO losses with a KL penalty to a frozen reference";
  r.kind = TrainKind::kFull;
  r.data = TrainingData::kPrompts;
  r.objective_name = "ppo";
  r.fields = PpoFields();
  r.checks.push_back(PpoChecks);
  r.loop_config = PpoLoopConfig;
  r.renamed = {{"model", "policy_model"}};
  r.extra_inputs = [](const Config& config, const Registry& registry) {
    std::vector<Problem> problems = MissingCheckpointFiles(config, registry, "ref_policy_checkpointer", "policy_model");
    for (const char* key : {"value_checkpointer", "reward_checkpointer"}) {
      for (Problem& p : MissingCheckpointFiles(config, registry, key, "reward_and_value_model")) {
        problems.push_back(std::move(p));
      }
    }
    return problems;
  };
  r.extra_estimate = [](const Config& config, const Registry& registry, const DeviceInfo&, int) {
    return EstimatePpoModels(config, registry);
  };
  // A cell: `steps` PPO steps, every one logged, nothing saved.
  r.cell_overrides = [](int steps) -> std::vector<std::string> {
    return {"max_steps_per_epoch=" + std::to_string(steps), "log_every_n_steps=1", "save_checkpoints=False",
            "resume_from_checkpoint=False"};
  };
  r.objective = std::move(objective);
  if (!r.objective) r.objective = [] { return std::make_unique<PpoObjective>(); };
  return TrainingRecipeSpec(std::move(r));
}

}  // namespace tmx::recipes
