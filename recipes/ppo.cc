#include "recipes/ppo.h"

#include <algorithm>
#include <vector>

#include <torch/torch.h>

namespace tmx::recipes {

TruncatedResponses TruncateAtFirstStopToken(const torch::Tensor& responses, const torch::Tensor& stop_tokens,
                                            int64_t fill_value) {
  const torch::Tensor stops = torch::isin(responses, stop_tokens.to(responses.device()));
  const torch::Tensor seen = torch::cumsum(stops, /*dim=*/1);
  // After the first stop token, or at a second one.
  TruncatedResponses out;
  out.padding_masks = (seen > 1).logical_or(seen.eq(1).logical_and(stops.logical_not()));
  out.responses = responses.masked_fill(out.padding_masks, fill_value);
  return out;
}

torch::Tensor UnmaskedSequenceLengths(const torch::Tensor& padding_masks) {
  const torch::Tensor last = padding_masks.logical_not().cumsum(-1).argmax(-1).to(torch::kLong);
  return last.clamp(0, padding_masks.size(1) - 1);
}

torch::Tensor RewardPenaltyMask(const torch::Tensor& padding_masks, const torch::Tensor& seq_lens,
                                bool penalise_no_eos, std::optional<int64_t> min_response_length) {
  torch::Tensor mask = torch::zeros_like(seq_lens, torch::kBool);
  if (penalise_no_eos) mask = padding_masks.any(-1).logical_not();
  if (min_response_length) mask = mask.logical_or(seq_lens.lt(*min_response_length));
  return mask;
}

torch::Tensor ValueSequenceIndices(const torch::Tensor& seq_lens, int64_t max_generated_tokens) {
  const torch::Tensor inside = seq_lens.gt(0).logical_and(seq_lens.lt(max_generated_tokens - 1));
  return torch::where(inside, seq_lens + 1, seq_lens);
}

PpoRewards RewardsWithKlPenalty(const torch::Tensor& scores, const torch::Tensor& logprobs,
                                const torch::Tensor& ref_logprobs, double kl_coeff,
                                const torch::Tensor& value_seq_idxs) {
  PpoRewards r;
  r.kl = logprobs - ref_logprobs;
  r.kl_reward = -kl_coeff * r.kl;
  r.total = r.kl_reward.clone().scatter_add_(1, value_seq_idxs.unsqueeze(-1), scores.unsqueeze(-1).to(r.kl.dtype()));
  return r;
}

torch::Tensor MaskedMean(const torch::Tensor& x, const torch::Tensor& mask) {
  return (x * mask).sum() / (mask.sum() + 1e-8);
}

torch::Tensor Whiten(const torch::Tensor& x, const torch::Tensor& mask) {
  const torch::Tensor mean = MaskedMean(x, mask);
  const torch::Tensor centred = x - mean;
  const torch::Tensor n = mask.sum() + 1e-8;
  const torch::Tensor var = MaskedMean(centred.pow(2), mask) * (n / (n - 1));  // Bessel's correction
  return centred * torch::rsqrt(var + 1e-8) + mean;
}

Advantages EstimateAdvantages(const torch::Tensor& values, const torch::Tensor& rewards, double gamma, double lmbda,
                              const torch::Tensor& masks) {
  const int64_t length = values.size(-1);
  std::vector<torch::Tensor> reversed;
  reversed.reserve(static_cast<size_t>(length));
  torch::Tensor last = torch::zeros_like(values.select(1, 0));
  for (int64_t t = length - 1; t >= 0; --t) {
    const torch::Tensor next = t < length - 1 ? values.select(1, t + 1) : torch::zeros_like(last);
    const torch::Tensor delta = rewards.select(1, t) + gamma * next - values.select(1, t);
    last = delta + gamma * lmbda * last;
    reversed.push_back(last);
  }
  std::reverse(reversed.begin(), reversed.end());
  Advantages a;
  const torch::Tensor raw = torch::stack(reversed, 1);
  a.returns = raw + values;
  a.advantages = Whiten(raw, masks).masked_fill(masks.logical_not(), 0.0);
  return a;
}

PpoLossTerms PpoLoss(const torch::Tensor& old_logprobs, const torch::Tensor& logprobs, const torch::Tensor& advantages,
                     const torch::Tensor& old_values, const torch::Tensor& values, const torch::Tensor& returns,
                     const torch::Tensor& padding_masks, const torch::Tensor& value_padding_masks,
                     const PpoLossOptions& options) {
  const torch::Tensor ratios = torch::exp(logprobs - old_logprobs);
  const torch::Tensor clipped = torch::clamp(ratios, 1.0 - options.epsilon, 1.0 + options.epsilon);
  const torch::Tensor losses_clipped = -advantages * clipped;
  const torch::Tensor losses_unclipped = -advantages * ratios;
  PpoLossTerms t;
  t.clipfrac = MaskedMean(losses_clipped.gt(losses_unclipped).to(logprobs.dtype()), padding_masks).detach();
  const torch::Tensor policy_loss = MaskedMean(torch::maximum(losses_clipped, losses_unclipped), padding_masks);
  const torch::Tensor values_clipped =
      torch::clamp(values, old_values - options.value_clip_range, old_values + options.value_clip_range);
  const torch::Tensor value_losses = torch::maximum((values - returns).pow(2), (values_clipped - returns).pow(2));
  const torch::Tensor value_loss = 0.5 * MaskedMean(value_losses, value_padding_masks);
  t.loss = policy_loss + value_loss * options.value_coeff;
  t.policy_loss = policy_loss.detach();
  t.value_loss = value_loss.detach();
  t.ratios = ratios.mean().detach();
  return t;
}

}  // namespace tmx::recipes
