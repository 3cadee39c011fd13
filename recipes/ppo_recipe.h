// torchtune's ppo_full_finetune_single_device: full PPO (RLHF) of a policy against a frozen reward model, on one
// device. Its configs (llama2/1B_full_ppo_low_memory_single_device) name the policy `policy_model` and the run's
// length `num_steps` (prompts); the shared loop (recipes/trainer.h) reads them as `model` and steps of batch_size
// prompts (PpoLoopConfig), and the objective (PpoObjective) runs each step whole, in torchtune's order:
//   1. the policy answers the step's prompts (left-padded, as torchtune's collate pads them), drawing
//      max_generated_tokens tokens with `temperature` and `top_k`, forward_batch_size prompts at a time;
//   2. the policy's and the frozen reference's log-probabilities of the responses, and the value model's values;
//   3. each response truncated at its first stop token (stop_token_ids, or the tokenizer's), scored by the frozen
//      reward model at its last token, with reward_penalty for one without a stop token (penalise_no_eos) or
//      shorter than min_response_length;
//   4. rewards with the KL penalty (kl_coeff), advantages and returns by GAE (gamma, lmbda);
//   5. ppo_epochs passes over the step's trajectories in shuffled mini-batches of ppo_batch_size, each
//      gradient_accumulation_steps backward passes of the clipped policy and value losses (loss: PPOLoss), then
//      one optimizer step of the policy and of the value model.
// The math is recipes/ppo.h's, checked against torchtune's functions. Padding is masked as torchtune's masks do
// it: each padding position is a document of its own (the decoder's document_ids) and positions count real tokens.
// Generation recomputes the sequence for each token (the KV cache here takes no padding mask), so
// enable_kv_cache changes nothing. whiten_rewards is read and unused, as in torchtune's recipe. Each epoch's
// checkpoint holds the policy (checkpointer.output_dir) and the value model (value_checkpointer.output_dir).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "harness/config.h"
#include "harness/registry.h"
#include "recipes/ppo.h"
#include "recipes/trainer.h"

namespace tmx::recipes {

// The PPO keys a run reads (besides the loop's), as torchtune's recipe names them.
struct PpoSettings {
  int64_t ppo_epochs = 1, ppo_batch_size = 1, backward_batch_size = 1, forward_batch_size = 1;
  int64_t max_generated_tokens = 1;
  double temperature = 1.0;
  std::optional<int64_t> top_k;
  std::optional<int64_t> min_response_length;
  bool penalise_no_eos = true;
  double reward_penalty = -3;
  std::vector<int64_t> stop_token_ids;  // empty: the tokenizer's stop tokens
  double gamma = 1, lmbda = 0.95, kl_coeff = 0.01;
  PpoLossOptions loss;
};

// The loop's reading of a PPO config: `model` is policy_model, one epoch of num_steps / batch_size steps (at most
// max_steps_per_epoch) of one batch each; ppo_backward_batch_size is ppo_batch_size / gradient_accumulation_steps.
Config PpoLoopConfig(const Config& config);

// What PPO trains: the policy (the loop's model and optimizer) and the value model (its own optimizer, the same
// settings), beside the frozen reference and reward models.
class PpoObjective : public Objective {
 public:
  Status Setup(const TrainingSetup& setup, RunSummary* summary) override;
  StatusOr<data::DataLoader> LoadData(const TrainingSetup& setup, RunSummary* summary) override;
  Status Step(StepContext& step) override;
  std::vector<std::pair<const char*, double>> StepMetrics() const override { return metrics_; }
  std::vector<std::string> Describe(const TrainingSetup& setup) const override;
  // The value model's weights into <value_checkpointer.output_dir>/epoch_<N>, in that checkpointer's format.
  Status SaveCheckpoint(int64_t epoch, const TrainingSetup& setup) override;

  models::DecoderImpl& policy() { return *policy_; }
  models::DecoderImpl& reference() { return *reference_; }
  models::DecoderImpl& value() { return *value_; }
  models::DecoderImpl& reward() { return *reward_; }

  // One step's trajectories (torchtune's Trajectory): [B, T + G] query_responses, input_pos and document_ids,
  // [B, G] log-probabilities, values and masks, [B] scores, sequence lengths and value indices.
  struct Trajectory {
    torch::Tensor query_responses, input_pos, document_ids, logprobs, ref_logprobs, values, response_padding_masks,
        value_padding_masks, value_seq_idxs, scores, seq_lens;
  };

 private:
  Trajectory Generate(const torch::Tensor& prompts);
  torch::Tensor Responses(const torch::Tensor& prompts);
  // The policy's clipped losses over `t`'s rows (advantages and returns of those rows), backward; its terms.
  PpoLossTerms MicroStep(const Trajectory& t, const torch::Tensor& advantages, const torch::Tensor& returns,
                         int64_t context, double scale, double* approx_kl);
  torch::Tensor LeftPadded(const data::Batch& batch) const;
  double StepFlops(int64_t rows, int64_t context) const;

  PpoSettings ppo_;
  models::Decoder reference_{nullptr}, value_{nullptr}, reward_{nullptr};
  models::DecoderArgs policy_args_, value_args_;
  ModelChoice value_choice_;
  OptimizerPtr value_optimizer_;
  std::vector<int64_t> prompt_lengths_;  // by sample index
  int64_t pad_id_ = 0;
  std::vector<std::pair<const char*, double>> metrics_;  // the last step's, torchtune's names
};

// The recipe; `objective` makes each run's objective (tests watch the models through it), PpoObjective without.
RecipeSpec PpoRecipe(std::function<std::unique_ptr<Objective>()> objective = nullptr);

}  // namespace tmx::recipes
