#include "recipes/models/generation.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace tmx::models {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

at::Tensor SampleTokens(const at::Tensor& logits, const SamplingOptions& options) {
  TORCH_CHECK(logits.dim() == 2, "SampleTokens: expected logits [batch, vocab], got ", logits.sizes());
  if (options.temperature <= 0) return logits.argmax(-1);
  // Shifted so the largest is 0: each quotient is then 0 or below, and a tiny temperature makes the others -inf
  // (a greedy draw), never +inf - +inf.
  torch::Tensor shifted = logits.to(torch::kFloat);
  shifted = shifted - std::get<0>(shifted.max(-1, /*keepdim=*/true));
  torch::Tensor scaled = shifted / std::max(options.temperature, kMinSamplingTemperature);
  if (options.top_k) {
    const int64_t k = std::min(*options.top_k, scaled.size(-1));
    TORCH_CHECK(k >= 1, "SampleTokens: top_k must be at least 1, got ", *options.top_k);
    torch::Tensor pivot = std::get<0>(scaled.topk(k, -1)).select(-1, k - 1).unsqueeze(-1);
    scaled = scaled.masked_fill(scaled < pivot, -std::numeric_limits<float>::infinity());
  }
  torch::Tensor probs = torch::softmax(scaled, -1);
  torch::Tensor q = torch::empty_like(probs).exponential_(1);
  return (probs / q).argmax(-1);
}

Generated Generate(DecoderImpl& model, const at::Tensor& prompt, const GenerationOptions& options) {
  TORCH_CHECK(prompt.dim() == 2 && prompt.size(1) >= 1, "Generate: expected a prompt [batch, tokens], got ",
              prompt.sizes());
  TORCH_CHECK(options.max_new_tokens >= 1, "Generate: max_new_tokens must be at least 1, got ",
              options.max_new_tokens);
  const int64_t batch = prompt.size(0), length = prompt.size(1);
  // Compared as what is left of max_seq_len: length + max_new_tokens may overflow int64.
  TORCH_CHECK(options.max_new_tokens <= model.args().max_seq_len - length, "Generate: the prompt's ", length,
              " tokens and max_new_tokens=", options.max_new_tokens, " pass the model's max_seq_len of ",
              model.args().max_seq_len);
  const int64_t capacity = length + options.max_new_tokens;
  torch::NoGradGuard no_grad;
  auto sync = [&] {
    if (options.synchronize) options.synchronize();
  };
  torch::Tensor stops = torch::tensor(options.stop_tokens, torch::TensorOptions().dtype(torch::kLong))
                            .to(prompt.device());
  if (options.kv_cache) model.SetupCaches(batch, capacity);
  Generated out;
  std::vector<torch::Tensor> tokens;
  torch::Tensor sequence = prompt.to(torch::kLong);
  torch::Tensor stopped = torch::zeros({batch}, torch::TensorOptions().dtype(torch::kBool).device(prompt.device()));
  sync();
  Clock::time_point start = Clock::now();
  torch::Tensor next;
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    if (i > 0) start = Clock::now();
    // The cache holds every earlier position: only the newest token goes in. Without it, the whole sequence.
    torch::Tensor input = i == 0 || !options.kv_cache ? sequence : next.unsqueeze(1);
    // Only the last position's logits are needed: the output projection of one position, not of the prompt.
    torch::Tensor logits = model.OutputLogits(model.Hidden(input).select(1, -1));
    if (options.on_logits) options.on_logits(logits);
    next = SampleTokens(logits, options.sampling);
    // A sequence that stopped earlier shows padding; the model goes on reading its own draws (pad_id need not be
    // an id of the model's vocabulary).
    tokens.push_back(next.masked_fill(stopped, options.pad_id));
    if (!options.kv_cache) sequence = torch::cat({sequence, next.unsqueeze(1)}, 1);
    if (stops.numel() > 0) stopped = stopped | torch::isin(next, stops);
    // Reading whether every sequence stopped waits for the device; without stop tokens, an explicit wait.
    const bool done = stops.numel() > 0 && stopped.all().item<bool>();
    sync();
    (i == 0 ? out.prefill_s : out.decode_step_s.emplace_back()) = Since(start);
    if (done) break;
  }
  if (options.kv_cache) model.ClearCaches();
  out.tokens = torch::stack(tokens, 1);
  return out;
}

}  // namespace tmx::models
