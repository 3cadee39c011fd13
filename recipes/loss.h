// The training losses: next-token cross-entropy, from a model's logits, or fused with the output projection so
// the logits of a whole batch never exist at once; knowledge distillation's forward KL to a teacher; and DPO's
// preference loss over sequence log-probabilities.
//
// Both average over every position t < T-1 whose label labels[t+1] is not data::kIgnoreIndex (the logits at t
// predict the token at t+1), in float32 whatever the model's dtype. The recipes' loop, validation and the
// training-step benchmark use ModelNextTokenLoss.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "recipes/models/decoder.h"

namespace tmx::recipes {

// Cross-entropy of `logits` [B, T, V] against `labels` [B, T] shifted by one, computed on float32 logits.
torch::Tensor NextTokenLoss(const torch::Tensor& logits, const torch::Tensor& labels);

// NextTokenLoss(hidden x weight^T, labels) without the [B, T, V] logits: hidden [B, T, D] (the final norm's
// output), weight [V, D] (the output projection). Rows go through the projection a chunk at a time (at most
// `chunk_elements` logits per chunk); each chunk's log-softmax gives its loss, and its gradient with respect to
// the logits (softmax minus one-hot) is formed right there and kept in the weight's dtype. Backward is then two
// matmuls. Memory: that gradient [B*(T-1), V] in the model dtype plus one float32 chunk, instead of the logits
// in the model dtype, their float32 copy and the float32 log-probabilities. Without grad mode (or when neither
// input requires grad) nothing is kept. Differentiable in hidden and weight; labels are not. With softcap > 0,
// NextTokenLoss(softcap x tanh(hidden x weight^T / softcap), labels) (Gemma 2's final soft-cap), capped in
// float32 a chunk at a time.
inline constexpr int64_t kLossChunkElements = int64_t{16} << 20;  // logits per chunk: 64 MiB in float32
torch::Tensor NextTokenLinearLoss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& labels,
                                  int64_t chunk_elements = kLossChunkElements, double softcap = 0);

// The model's loss on a batch: NextTokenLinearLoss when its output is a plain projection, soft-capped or not
// (DecoderImpl::PlainOutputWeight), else NextTokenLoss over its logits. input_pos and document_ids as
// DecoderImpl::forward takes them (undefined unless packed).
torch::Tensor ModelNextTokenLoss(models::DecoderImpl& model, const torch::Tensor& tokens, const torch::Tensor& labels,
                                 const torch::Tensor& input_pos = {}, const torch::Tensor& document_ids = {});

// Knowledge distillation's forward KL, as torchtune's ForwardKLLoss (and its chunked variant, which sums the same
// over chunks): -sum_v softmax(teacher)_v * log_softmax(student)_v per row, in float32, with the terms where the
// student's logit is -inf left out, averaged over the rows whose label is not data::kIgnoreIndex (0 when there is
// none). student and teacher [N, V], labels [N]. Differentiable in the student's logits.
torch::Tensor ForwardKlLoss(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                            const torch::Tensor& labels);

// ForwardKlLoss at the positions NextTokenLoss averages over: logits [B, T, V] of both models, labels [B, T]
// shifted by one.
torch::Tensor NextTokenForwardKlLoss(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                                     const torch::Tensor& labels);

// Knowledge distillation's loss: (1 - kd_ratio) x NextTokenLoss(student) + kd_ratio x NextTokenForwardKlLoss,
// both from one float32 log-softmax of the student's logits (the same values, fewer [N, V] temporaries).
torch::Tensor NextTokenDistillationLoss(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                                        const torch::Tensor& labels, double kd_ratio);

// Each row's summed log-probability of its labels, as torchtune's rlhf.get_batch_log_probs: sum over t < T-1 of
// log_softmax(logits[b, t])[labels[b, t+1]] where labels[b, t+1] is not data::kIgnoreIndex (0 for a row with no
// such label). logits [B, T, V] (any float dtype; the log-softmax is taken in float32), labels [B, T]; returns
// [B] float32, differentiable in the logits.
torch::Tensor SequenceLogProbs(const torch::Tensor& logits, const torch::Tensor& labels);

// Direct Preference Optimization's loss (torchtune's rlhf.loss.DPOLoss), per pair.
struct DpoLossOptions {
  // Temperature of the implicit reward: larger trusts the preference more against staying near the reference.
  double beta = 0.1;
  // Assumed probability that a pair's preference is flipped (conservative DPO); 0 is plain DPO.
  double label_smoothing = 0.0;
};

struct DpoTerms {
  torch::Tensor losses;            // [B]: -logsigmoid(beta x) (1 - ls) - logsigmoid(-beta x) ls, x the logit below
  torch::Tensor chosen_rewards;    // [B]: beta (policy_chosen - ref_chosen), detached
  torch::Tensor rejected_rewards;  // [B]: beta (policy_rejected - ref_rejected), detached
};

// The DPO terms from summed sequence log-probabilities [B] (SequenceLogProbs) of the policy and the frozen
// reference on the chosen and rejected responses; the logit of pair b is (policy_chosen - policy_rejected) -
// (ref_chosen - ref_rejected). Differentiable in the policy's log-probabilities; the recipes train on
// losses.mean().
DpoTerms DpoLoss(const torch::Tensor& policy_chosen, const torch::Tensor& policy_rejected,
                 const torch::Tensor& ref_chosen, const torch::Tensor& ref_rejected,
                 const DpoLossOptions& options = {});

}  // namespace tmx::recipes
