#include "recipes/models/generation.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
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

namespace {

// The last position's logits [B, V] of the model on `input` (the whole sequence, or with the KV cache the
// newest tokens).
using NextLogits = std::function<torch::Tensor(const torch::Tensor& input)>;

// Checks the prompt against max_new_tokens and the model's max_seq_len.
void CheckPrompt(const at::Tensor& prompt, const GenerationOptions& options, int64_t max_seq_len) {
  TORCH_CHECK(prompt.dim() == 2 && prompt.size(1) >= 1, "Generate: expected a prompt [batch, tokens], got ",
              prompt.sizes());
  TORCH_CHECK(options.max_new_tokens >= 1, "Generate: max_new_tokens must be at least 1, got ",
              options.max_new_tokens);
  // Compared as what is left of max_seq_len: length + max_new_tokens may overflow int64.
  TORCH_CHECK(options.max_new_tokens <= max_seq_len - prompt.size(1), "Generate: the prompt's ", prompt.size(1),
              " tokens and max_new_tokens=", options.max_new_tokens, " pass the model's max_seq_len of ",
              max_seq_len);
}

// The decoding loop both models share. REQUIRES: CheckPrompt passed; caches set up when options.kv_cache.
Generated GenerateWith(const NextLogits& next_logits, const at::Tensor& prompt, const GenerationOptions& options) {
  const int64_t batch = prompt.size(0);
  auto sync = [&] {
    if (options.synchronize) options.synchronize();
  };
  torch::Tensor stops = torch::tensor(options.stop_tokens, torch::TensorOptions().dtype(torch::kLong))
                            .to(prompt.device());
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
    torch::Tensor logits = next_logits(input);
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
  out.tokens = torch::stack(tokens, 1);
  return out;
}

}  // namespace

Generated Generate(DecoderImpl& model, const at::Tensor& prompt, const GenerationOptions& options) {
  CheckPrompt(prompt, options, model.args().max_seq_len);
  torch::NoGradGuard no_grad;
  if (options.kv_cache) model.SetupCaches(prompt.size(0), prompt.size(1) + options.max_new_tokens);
  Generated out = GenerateWith(
      [&](const torch::Tensor& input) { return model.OutputLogits(model.Hidden(input).select(1, -1)); }, prompt,
      options);
  if (options.kv_cache) model.ClearCaches();
  return out;
}

Generated Generate(VisionModelImpl& model, const at::Tensor& prompt, const at::Tensor& image,
                   const at::Tensor& encoder_mask, const GenerationOptions& options) {
  CheckPrompt(prompt, options, model.args().decoder.max_seq_len);
  torch::NoGradGuard no_grad;
  const int64_t length = prompt.size(1);
  if (options.kv_cache) model.SetupCaches(prompt.size(0), length + options.max_new_tokens);
  // The mask of `n` positions: the prompt's rows, then its last row for each new token.
  auto mask_of = [&](int64_t start, int64_t n) -> torch::Tensor {
    if (!encoder_mask.defined()) return encoder_mask;
    torch::Tensor last = encoder_mask.narrow(1, length - 1, 1);
    torch::Tensor rows = n + start > length ? torch::cat({encoder_mask, last.expand({-1, n + start - length, -1})}, 1)
                                            : encoder_mask;
    return rows.narrow(1, start, n);
  };
  Generated out = GenerateWith(
      [&](const torch::Tensor& input) {
        const int64_t start = options.kv_cache ? model.cache_position() : 0;
        torch::Tensor logits = model.Decode(input, image, mask_of(start, input.size(1)));
        return logits.select(1, -1);
      },
      prompt, options);
  if (options.kv_cache) model.ClearCaches();
  return out;
}

}  // namespace tmx::models
