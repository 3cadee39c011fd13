// Rotary position embeddings (RoPE, Su et al. 2021): the frequencies, Llama 3 frequency scaling, and the two
// ways a head's channels are paired for rotation.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace tmx::models {

// Llama 3.1 / 3.2 RoPE frequency scaling ("llama3" rope_type). For each rotary frequency f with wavelength
// w = 2*pi/f: w < old_context_len/high_freq_factor keeps f; w > old_context_len/low_freq_factor uses f/factor;
// in between, f is interpolated: (1 - s) * f/factor + s * f with s = (old_context_len/w - low) / (high - low).
struct RopeScaling {
  double factor = 32;          // divisor for low frequencies; 32 for Llama 3.2, 8 for Llama 3.1
  double low_freq_factor = 1;  // REQUIRES: 0 < low_freq_factor <= high_freq_factor
  double high_freq_factor = 4;
  int64_t old_context_len = 8192;  // the context length the base frequencies were trained for
};

// Which channels of a head rotate together.
enum class RopeLayout {
  // Adjacent pairs (x[2i], x[2i+1]) rotate by frequency i: Meta's reference layout, which torchtune's llama2/3,
  // mistral and gemma state dicts keep (their Hugging Face q/k weights are permuted on import).
  kInterleaved,
  // Halves (x[i], x[i + head_dim/2]) rotate by frequency i ("rotate_half"): the Hugging Face layout, which
  // torchtune's qwen2, qwen3 and phi3 models use directly.
  kHalf,
};

// The head_dim/2 inverse frequencies base^(-2i/head_dim), scaled when `scaling` is set. float32 on CPU,
// computed in the same order of operations as Meta's reference and torchtune.
// REQUIRES: head_dim even and > 0, base > 0.
at::Tensor RopeInverseFrequencies(int64_t head_dim, double base, const std::optional<RopeScaling>& scaling);

// Rotates x [B, T, heads, head_dim] by position: the channel pair of frequency i at position t is rotated by
// angle t * inv_freq[i], pairs chosen by `layout`. cos/sin are [T, head_dim/2] float32, or [B, T, head_dim/2]
// when each row has its own positions (packed samples). Computed in float32 as torchtune does (x0 cos - x1 sin,
// x1 cos + x0 sin), returned in x's dtype. One autograd node (its backward rotates the gradient back); on the CPU
// one pass each way, with ApplyRotaryEmbeddingUnfused's bits.
at::Tensor ApplyRotaryEmbedding(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                RopeLayout layout = RopeLayout::kInterleaved);

// The same rotation as ATen operations on a float32 copy (nine forward, more backward), differentiated by
// autograd: the reference ApplyRotaryEmbedding keeps to (rope_test) and the form it replaced (rope_benchmark).
at::Tensor ApplyRotaryEmbeddingUnfused(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                       RopeLayout layout = RopeLayout::kInterleaved);

}  // namespace tmx::models
