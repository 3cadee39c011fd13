// torchtune's PPO (ppo_full_finetune_single_device): the pieces of its loop as torchtune/rlhf defines them, each
// checked against torchtune's own functions on fixtures (recipes/testdata/ppo_fixtures.json, written by
// scripts/make_ppo_fixtures.py from torchtune bd2a0fc).
//
// A PPO step generates responses to a batch of prompts with the policy, truncates each at its first stop token
// (TruncateAtFirstStopToken), scores the whole sequence with the reward model at its last response token, replaces
// the score of a response without a stop token or shorter than min_response_length by reward_penalty
// (RewardPenaltyMask), adds the KL penalty between the policy's and the reference's log-probabilities per token
// (RewardsWithKlPenalty), estimates advantages and returns with GAE from the value model's values
// (EstimateAdvantages), and then trains the policy and the value model for ppo_epochs on mini-batches with the
// clipped losses (PpoLoss).
//
// These functions are its math; the recipe's loop (generation, the four models, the PPO epochs) is
// recipes/ppo_recipe.h.
#pragma once

#include <cstdint>
#include <optional>

#include <torch/types.h>

namespace tmx::recipes {

// torchtune's truncate_sequence_at_first_stop_token: `padding_masks` [B, T] is true after each row's first stop
// token (the stop token itself is kept) and `responses` has those positions set to `fill_value`.
struct TruncatedResponses {
  torch::Tensor padding_masks;
  torch::Tensor responses;
};
TruncatedResponses TruncateAtFirstStopToken(const torch::Tensor& responses, const torch::Tensor& stop_tokens,
                                            int64_t fill_value);

// torchtune's get_unmasked_sequence_lengths: per row, the index of the last position not padded (0 when every
// position is), clipped to [0, T - 1]. For a truncated response: its length minus one, so the index of its stop
// token.
torch::Tensor UnmaskedSequenceLengths(const torch::Tensor& padding_masks);

// torchtune's get_reward_penalty_mask: the rows whose score is replaced by reward_penalty: without any stop token
// (with penalise_no_eos) or with seq_lens under min_response_length (when set).
torch::Tensor RewardPenaltyMask(const torch::Tensor& padding_masks, const torch::Tensor& seq_lens,
                                bool penalise_no_eos, std::optional<int64_t> min_response_length);

// The recipe's value_seq_idxs: where each row's score is added and its last value kept: seq_lens + 1 when
// 0 < seq_lens < max_generated_tokens - 1, else seq_lens.
torch::Tensor ValueSequenceIndices(const torch::Tensor& seq_lens, int64_t max_generated_tokens);

// torchtune's get_rewards_ppo: kl = logprobs - ref_logprobs, kl_reward = -kl_coeff x kl, and the total reward:
// kl_reward with each row's score added at its value_seq_idxs.
struct PpoRewards {
  torch::Tensor total, kl, kl_reward;
};
PpoRewards RewardsWithKlPenalty(const torch::Tensor& scores, const torch::Tensor& logprobs,
                                const torch::Tensor& ref_logprobs, double kl_coeff,
                                const torch::Tensor& value_seq_idxs);

// torchtune's masked_mean over every element: sum(x mask) / (sum(mask) + 1e-8).
torch::Tensor MaskedMean(const torch::Tensor& x, const torch::Tensor& mask);
// torchtune's whiten with a mask: (x - mean) / sqrt(var + 1e-8) + mean (shift_mean), var the masked unbiased
// variance.
torch::Tensor Whiten(const torch::Tensor& x, const torch::Tensor& mask);

// torchtune's estimate_advantages: GAE over each row, from the last position back
// (delta_t = r_t + gamma v_{t+1} - v_t, A_t = delta_t + gamma lmbda A_{t+1}); returns = A + values; the advantages
// whitened over `masks` (the response tokens) and zero outside them.
struct Advantages {
  torch::Tensor advantages, returns;
};
Advantages EstimateAdvantages(const torch::Tensor& values, const torch::Tensor& rewards, double gamma, double lmbda,
                              const torch::Tensor& masks);

// torchtune's PPOLoss (torchtune.rlhf.loss.PPOLoss): epsilon clips the policy ratio, value_clip_range the new
// values around the old, value_coeff weighs the value loss.
struct PpoLossOptions {
  double epsilon = 0.1;
  double value_clip_range = 0.2;
  double value_coeff = 0.1;
};
// The clipped policy loss (mean over `padding_masks`, the response tokens), half the clipped squared value error
// (mean over `value_padding_masks`), loss = policy_loss + value_coeff x value_loss (with gradient), and the mean
// ratio and fraction of clipped tokens (detached), as torchtune returns them.
struct PpoLossTerms {
  torch::Tensor loss, policy_loss, value_loss, ratios, clipfrac;
};
PpoLossTerms PpoLoss(const torch::Tensor& old_logprobs, const torch::Tensor& logprobs, const torch::Tensor& advantages,
                     const torch::Tensor& old_values, const torch::Tensor& values, const torch::Tensor& returns,
                     const torch::Tensor& padding_masks, const torch::Tensor& value_padding_masks,
                     const PpoLossOptions& options);

}  // namespace tmx::recipes
