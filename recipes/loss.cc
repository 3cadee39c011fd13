#include "recipes/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "recipes/data/sample.h"
#include "recipes/models/cpu_vector.h"
#include "recipes/models/fault_injection.h"
#include "recipes/models/scaled_mm.h"

namespace tmx::recipes {
namespace {

// One chunk of the cross-entropy on the CPU, per row in one pass over its logits after their maximum (ATen's
// log_softmax, exp_, one-hot subtraction, masking and casts take six over a float32 copy): the row's loss
// m + log(sum exp(x - m)) - x[target], and with `grad` its softmax minus the one-hot, rounded once to the
// logits' dtype. A row whose label is ignored has loss 0 and a zero gradient, and costs nothing else. exp is
// cpu_vector.h's (within about a float32 unit of ATen's), so the loss moves in its last bits.
struct CrossEntropyArgs {
  const void* logits;      // [rows, vocab], contiguous
  const int64_t* targets;  // [rows]
  const bool* valid;       // [rows]
  float* row_loss;         // [rows]
  void* grad;              // [rows, vocab], contiguous, or null
  int64_t vocab;
};

// Each row is widened once into `row` (float32, vocab long: it stays in cache between the passes), so the passes
// with Exp are float32 alone (mixed with bf16 lanes they do not vectorise).
template <typename T>
TMX_VECTOR_INLINE void CrossEntropyRows(const CrossEntropyArgs& a, int64_t begin, int64_t end, float* row) {
  using models::cpu::Exp;
  using models::cpu::Narrow;
  using models::cpu::Widen;
  constexpr int kLanes = 16;
  const int64_t vocab = a.vocab;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.logits) + r * vocab;
    T* g = a.grad != nullptr ? static_cast<T*>(a.grad) + r * vocab : nullptr;
    if (!a.valid[r]) {
      a.row_loss[r] = 0;
      if (g != nullptr) std::fill(g, g + vocab, Narrow<T>(0.0f));
      continue;
    }
    for (int64_t i = 0; i < vocab; ++i) row[i] = Widen(x[i]);
    float lanes[kLanes];
    std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
    int64_t i = 0;
    for (; i + kLanes <= vocab; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] = std::max(lanes[j], row[i + j]);
    }
    float m = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < kLanes; ++j) m = std::max(m, lanes[j]);
    for (; i < vocab; ++i) m = std::max(m, row[i]);
    const float target_logit = row[a.targets[r]];
    float sums[kLanes] = {};
    for (i = 0; i + kLanes <= vocab; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        row[i + j] = Exp(row[i + j] - m);
        sums[j] += row[i + j];
      }
    }
    float sum = 0;
    for (int j = 0; j < kLanes; ++j) sum += sums[j];
    for (; i < vocab; ++i) {
      row[i] = Exp(row[i] - m);
      sum += row[i];
    }
    a.row_loss[r] = m + std::log(sum) - target_logit;
    if (g != nullptr) {
      const float inverse = 1.0f / sum;
      for (i = 0; i < vocab; ++i) g[i] = Narrow<T>(row[i] * inverse);
      const int64_t t = a.targets[r];
      g[t] = Narrow<T>(row[t] * inverse - 1.0f);
    }
  }
}

TMX_VECTOR_CLONES void CrossEntropyRowsBf16(const CrossEntropyArgs& a, int64_t begin, int64_t end, float* row) {
  CrossEntropyRows<uint16_t>(a, begin, end, row);
}
TMX_VECTOR_CLONES void CrossEntropyRowsFloat(const CrossEntropyArgs& a, int64_t begin, int64_t end, float* row) {
  CrossEntropyRows<float>(a, begin, end, row);
}

// Whether CrossEntropyChunk takes these logits: on the CPU, bf16 or float32.
bool CrossEntropyKernelTakes(const torch::Tensor& logits) {
  return models::cpu::OnePassKernels() && logits.is_cpu() &&
         (logits.scalar_type() == torch::kBFloat16 || logits.scalar_type() == torch::kFloat);
}

// logits [rows, vocab] contiguous; targets [rows, 1] int64 (any class where the row is ignored), valid [rows];
// grad [rows, vocab] in the logits' dtype, contiguous, or undefined. Returns the rows' summed loss (float32).
torch::Tensor CrossEntropyChunk(const torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& valid,
                                const torch::Tensor& grad) {
  RECORD_FUNCTION("tmx::cross_entropy", std::vector<c10::IValue>({logits}));  // named in the operation profile
  const int64_t rows = logits.size(0);
  const torch::Tensor t = targets.contiguous(), v = valid.contiguous();
  torch::Tensor row_loss = at::empty({rows}, logits.options().dtype(torch::kFloat));
  const CrossEntropyArgs args{logits.const_data_ptr(), t.const_data_ptr<int64_t>(), v.const_data_ptr<bool>(),
                              row_loss.mutable_data_ptr<float>(), grad.defined() ? grad.mutable_data_ptr() : nullptr,
                              logits.size(1)};
  const bool bf16 = logits.scalar_type() == torch::kBFloat16;
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(args.vocab));
    bf16 ? CrossEntropyRowsBf16(args, begin, end, row.data()) : CrossEntropyRowsFloat(args, begin, end, row.data());
  });
  return row_loss.sum();
}

// hidden2d [N, D] and weight [V, D] in; the mean loss over the rows whose label is not ignored out. With
// softcap > 0 the logits z are capped first, c = softcap x tanh(z / softcap) (Gemma 2's final soft-cap), and
// the gradient with respect to z is the capped one's times dc/dz = 1 - (c / softcap)^2.
class LinearCrossEntropy : public torch::autograd::Function<LinearCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& labels, int64_t chunk_rows,
                               bool keep_gradient, double softcap) {
    const int64_t n = hidden.size(0);
    const torch::Tensor valid = labels.ne(data::kIgnoreIndex);
    const torch::Tensor targets = labels.masked_fill(valid.logical_not(), 0).unsqueeze(1);  // any class for ignored
    const torch::Tensor count = valid.sum().to(torch::kFloat);
    torch::Tensor loss_sum = torch::zeros({}, hidden.options().dtype(torch::kFloat));
    torch::Tensor grad_logits;  // [N, V] in the weight's dtype: softmax minus one-hot, 0 on ignored rows
    if (keep_gradient) grad_logits = torch::empty({n, weight.size(0)}, weight.options());
    for (int64_t start = 0; start < n; start += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, n - start);
      torch::Tensor logits = at::mm(hidden.narrow(0, start, rows), weight.t());
      const torch::Tensor t = targets.narrow(0, start, rows);
      const torch::Tensor v = valid.narrow(0, start, rows);
      if (softcap <= 0 && CrossEntropyKernelTakes(logits) &&
          (!keep_gradient || grad_logits.scalar_type() == logits.scalar_type())) {
        loss_sum += CrossEntropyChunk(logits, t, v,
                                      keep_gradient ? grad_logits.narrow(0, start, rows) : torch::Tensor());
        continue;
      }
      logits = logits.to(torch::kFloat);
      if (softcap > 0) logits = logits.div_(softcap).tanh_().mul_(softcap);
      const torch::Tensor logp = torch::log_softmax(logits, -1);
      loss_sum -= logp.gather(1, t).squeeze(1).masked_fill(v.logical_not(), 0).sum();
      if (!keep_gradient) continue;
      torch::Tensor g = logp.exp_();  // the chunk's softmax, in place of its log-probabilities
      g.scatter_add_(1, t, torch::full({rows, 1}, -1.0f, g.options()));
      g.masked_fill_(v.logical_not().unsqueeze(1), 0);
      if (softcap > 0) g.mul_(1 - logits.div_(softcap).square_());  // through the cap: 1 - tanh^2
      grad_logits.narrow(0, start, rows).copy_(g);
    }
    if (keep_gradient) ctx->save_for_backward({hidden, weight, grad_logits, count});
    return loss_sum / count;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_output) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& hidden = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& grad_logits = saved[2];
    TORCH_CHECK(grad_logits.defined(), "NextTokenLinearLoss: backward through a loss computed without grad mode");
    // The mean's 1 / count (times the gradient from above) as the products' alpha: applied in float32 inside
    // them, before their one rounding to the weight's dtype, instead of a second pass over each result (which
    // for the weight's gradient is [V, D]) with the factor rounded to that dtype.
    const double scale = (grad_output[0].to(torch::kDouble) / saved[3].to(torch::kDouble)).item<double>();
    torch::Tensor grad_hidden, grad_weight;
    if (ctx->needs_input_grad(0)) grad_hidden = models::ScaledMm(grad_logits, weight, scale);
    if (ctx->needs_input_grad(1)) grad_weight = models::ScaledMm(grad_logits.t(), hidden, scale);
    return {grad_hidden, grad_weight, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor NextTokenLoss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(
      logits.slice(1, 0, -1).reshape({-1, logits.size(-1)}).to(torch::kFloat), labels.slice(1, 1).reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(data::kIgnoreIndex));
}

torch::Tensor NextTokenLinearLoss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& labels,
                                  int64_t chunk_elements, double softcap) {
  TORCH_CHECK(hidden.dim() == 3 && weight.dim() == 2 && hidden.size(2) == weight.size(1),
              "NextTokenLinearLoss: expected hidden [B, T, D] and weight [V, D], got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(labels.sizes() == hidden.sizes().slice(0, 2), "NextTokenLinearLoss: labels ", labels.sizes(),
              " must be [B, T] of hidden ", hidden.sizes());
  const torch::Tensor rows = hidden.slice(1, 0, -1).reshape({-1, hidden.size(2)});
  const torch::Tensor targets = labels.slice(1, 1).reshape({-1});
  const int64_t chunk_rows = std::max<int64_t>(1, chunk_elements / weight.size(0));
  const bool keep = torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  return LinearCrossEntropy::apply(rows, weight, targets, chunk_rows, keep, softcap);
}

namespace {

// The float32 loss scaled by the loss fault when the model's activations `path` are off the reference path
// (tests only: models/fault_injection.h).
torch::Tensor FaultOnPathOf(const torch::Tensor& path, const torch::Tensor& loss) {
  const double scale = models::FaultScale(models::FaultKernel::kLoss);
  return scale == 1 || models::OnReferencePath(path) ? loss : loss * scale;
}

}  // namespace

torch::Tensor ModelNextTokenLoss(models::DecoderImpl& model, const torch::Tensor& tokens, const torch::Tensor& labels,
                                 const torch::Tensor& input_pos, const torch::Tensor& document_ids) {
  const torch::Tensor weight = model.PlainOutputWeight();
  if (!weight.defined()) {
    const torch::Tensor logits = model.forward(tokens, input_pos, document_ids);
    return FaultOnPathOf(logits, NextTokenLoss(logits, labels));
  }
  const torch::Tensor hidden = model.Hidden(tokens, input_pos, document_ids);
  return FaultOnPathOf(hidden, NextTokenLinearLoss(hidden, weight, labels, kLossChunkElements, model.args().final_softcap));
}

namespace {

// The forward KL's mean over the kept rows from the student's float32 log-probabilities `log_probs` [N, V].
torch::Tensor ForwardKlOfLogProbs(const torch::Tensor& log_probs, const torch::Tensor& student_logits,
                                  const torch::Tensor& teacher_logits, const torch::Tensor& labels) {
  const torch::Tensor teacher = torch::softmax(teacher_logits.to(torch::kFloat), -1);
  // A -inf student logit has probability 0: its term (0 x -inf) is left out, as torchtune masks it.
  const torch::Tensor terms = (teacher * log_probs).masked_fill(torch::isinf(student_logits), 0);
  const torch::Tensor kept = labels.ne(data::kIgnoreIndex).to(torch::kFloat);
  const torch::Tensor count = kept.sum();
  if (count.item<double>() == 0) return torch::zeros({}, log_probs.options());
  return -(terms.sum(-1) * kept).sum() / count;
}

}  // namespace

torch::Tensor ForwardKlLoss(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                            const torch::Tensor& labels) {
  TORCH_CHECK(student_logits.dim() == 2 && student_logits.sizes() == teacher_logits.sizes() &&
                  labels.dim() == 1 && labels.size(0) == student_logits.size(0),
              "ForwardKlLoss: expected student and teacher logits [N, V] and labels [N], got ", student_logits.sizes(),
              ", ", teacher_logits.sizes(), " and ", labels.sizes());
  return ForwardKlOfLogProbs(torch::log_softmax(student_logits.to(torch::kFloat), -1), student_logits, teacher_logits,
                             labels);
}

torch::Tensor NextTokenDistillationLoss(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                                        const torch::Tensor& labels, double kd_ratio) {
  const int64_t v = student_logits.size(-1);
  const torch::Tensor student = student_logits.slice(1, 0, -1).reshape({-1, v});
  const torch::Tensor targets = labels.slice(1, 1).reshape({-1});
  const torch::Tensor log_probs = torch::log_softmax(student.to(torch::kFloat), -1);
  const torch::Tensor ce = torch::nll_loss(log_probs, targets, {}, at::Reduction::Mean, data::kIgnoreIndex);
  const torch::Tensor kl =
      ForwardKlOfLogProbs(log_probs, student, teacher_logits.slice(1, 0, -1).reshape({-1, v}), targets);
  return (1 - kd_ratio) * ce + kd_ratio * kl;
}

torch::Tensor NextTokenForwardKlLoss(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                                     const torch::Tensor& labels) {
  const int64_t v = student_logits.size(-1);
  return ForwardKlLoss(student_logits.slice(1, 0, -1).reshape({-1, v}), teacher_logits.slice(1, 0, -1).reshape({-1, v}),
                       labels.slice(1, 1).reshape({-1}));
}

torch::Tensor SequenceLogProbs(const torch::Tensor& logits, const torch::Tensor& labels) {
  TORCH_CHECK(logits.dim() == 3 && labels.dim() == 2 && logits.sizes().slice(0, 2) == labels.sizes(),
              "SequenceLogProbs: expected logits [B, T, V] and labels [B, T], got ", logits.sizes(), " and ",
              labels.sizes());
  const torch::Tensor targets = labels.slice(1, 1);
  const torch::Tensor kept = targets.ne(data::kIgnoreIndex);
  const torch::Tensor log_probs = torch::log_softmax(logits.slice(1, 0, -1).to(torch::kFloat), -1);
  // Ignored labels gather any class (0) and are then zeroed, as torchtune multiplies by the mask.
  const torch::Tensor picked =
      log_probs.gather(2, targets.masked_fill(kept.logical_not(), 0).unsqueeze(2)).squeeze(2);
  return (picked * kept.to(torch::kFloat)).sum(-1);
}

DpoTerms DpoLoss(const torch::Tensor& policy_chosen, const torch::Tensor& policy_rejected,
                 const torch::Tensor& ref_chosen, const torch::Tensor& ref_rejected, const DpoLossOptions& options) {
  TORCH_CHECK(policy_chosen.dim() == 1 && policy_chosen.sizes() == policy_rejected.sizes() &&
                  policy_chosen.sizes() == ref_chosen.sizes() && policy_chosen.sizes() == ref_rejected.sizes(),
              "DpoLoss: expected four log-probabilities [B] of one size, got ", policy_chosen.sizes(), ", ",
              policy_rejected.sizes(), ", ", ref_chosen.sizes(), " and ", ref_rejected.sizes());
  const double beta = options.beta, smoothing = options.label_smoothing;
  const torch::Tensor logits = (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected);
  DpoTerms t;
  t.losses = -torch::log_sigmoid(beta * logits) * (1 - smoothing) - torch::log_sigmoid(-beta * logits) * smoothing;
  t.chosen_rewards = beta * (policy_chosen - ref_chosen).detach();
  t.rejected_rewards = beta * (policy_rejected - ref_rejected).detach();
  return t;
}

}  // namespace tmx::recipes
