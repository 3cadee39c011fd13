// Autoregressive decoding with a Decoder, as torchtune's generation utilities (torchtune.generation): the prompt
// in one forward (the prefill), then one token per forward, each drawn from the last position's logits, with
// the KV cache (DecoderImpl::SetupCaches) or by recomputing the whole sequence each time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "recipes/models/decoder.h"
#include "recipes/models/vision_model.h"

namespace tmx::models {

// The smallest temperature that divides the logits: torchtune's sample divides by max(temperature, 1e-5), and a
// smaller divisor (a subnormal one is 0 in float32) turns every logit into an infinity and the draw into NaN.
inline constexpr double kMinSamplingTemperature = 1e-5;

// How a token is drawn from a position's logits.
struct SamplingOptions {
  // The logits are divided by it before the softmax. 0: greedy (the largest logit), the limit torchtune's
  // sample reaches by dividing by max(temperature, 1e-5); a temperature below kMinSamplingTemperature divides
  // by that bound, as torchtune's does.
  double temperature = 1.0;
  // Only the k largest logits (and any equal to the k-th) can be drawn. Unset: every logit.
  std::optional<int64_t> top_k;
};

// logits [B, V] (any floating dtype) -> [B] int64 token ids. With temperature > 0 it draws as torchtune's
// sample does, by the exponential race: argmax(softmax(logits / temperature) / q), q ~ Exp(1) from the device's
// default generator (seed it with torch::manual_seed for reproducible draws). The largest logit is subtracted
// before the division, so no quotient overflows: finite logits never draw from a NaN softmax.
at::Tensor SampleTokens(const at::Tensor& logits, const SamplingOptions& options);

struct GenerationOptions {
  int64_t max_new_tokens = 1;  // tokens to generate per sequence, the first one included; at least 1
  SamplingOptions sampling;
  // A sequence that generates one of these stops: the stop token is kept, and later positions hold pad_id
  // (only in the result; the model never reads it).
  // Generation ends when every sequence has stopped.
  std::vector<int64_t> stop_tokens;
  int64_t pad_id = 0;
  // true: the KV cache (set up for prompt + max_new_tokens positions, cleared at the end); false: each token
  // recomputes the whole sequence (torchtune's enable_kv_cache=False).
  bool kv_cache = true;
  // Waits for the device's queued work, so the times below are the device's (empty: nothing to wait for).
  std::function<void()> synchronize;
  // Called with each step's last-position logits [B, V] as computed (the prefill's first), before the draw; unset:
  // not called. The numeric probe reads the first token's logits and the greedy tokens' margins through it.
  std::function<void(const at::Tensor& logits)> on_logits;
};

struct Generated {
  at::Tensor tokens;  // [B, n] int64: the new tokens, 1 <= n <= max_new_tokens
  // The prompt's forward and the first token's draw: the time to the first token.
  double prefill_s = 0;
  // Each later token's forward and draw, in order (n - 1 of them).
  std::vector<double> decode_step_s;
};

// Generates from `prompt` [B, T] (int64 ids on the model's device, every row T tokens long) without building a
// graph. REQUIRES: T + max_new_tokens <= the model's max_seq_len (checked without overflow; throws c10::Error
// naming both).
Generated Generate(DecoderImpl& model, const at::Tensor& prompt, const GenerationOptions& options);

// The same with a Llama 3.2 Vision model and an image prompt (torchtune's generate_v2 with a multimodal prompt):
// `image` is the encoder's output [B, S, D] (undefined: text only), `encoder_mask` the prompt's rows [B, T, S]
// (undefined: every position sees every image token). Each new token attends to the image tokens the prompt's last
// position does (its mask row repeated, as torchtune and transformers extend it). With the KV cache the fusion
// layers compute the image's keys and values once (VisionModelImpl::SetupCaches).
Generated Generate(VisionModelImpl& model, const at::Tensor& prompt, const at::Tensor& image,
                   const at::Tensor& encoder_mask, const GenerationOptions& options);

}  // namespace tmx::models
