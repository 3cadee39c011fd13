// What the one-pass CPU loops share (models/rope.cc, rms_norm.cc, swiglu.cc; recipes/loss.cc): float32
// arithmetic on bf16 or float32 storage, an exp the compiler vectorises, and each loop compiled for the widest
// vectors the CPU has.
#pragma once

#include <c10/util/bit_cast.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>

// A function compiled three times, for AVX-512, AVX2 and plain x86-64, the copy chosen when the program loads
// (GCC's and Clang's function multi-versioning; elsewhere one plain copy). Loops written without reordering
// sums give the same bits in every copy (the files are compiled with -ffp-contract=off).
// The loop bodies such a function calls are TMX_VECTOR_INLINE, so each copy compiles them for its own target
// (a body left out of line would be the plain copy only).
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
#define TMX_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TMX_VECTOR_CLONES
#endif
#if defined(__GNUC__)
#define TMX_VECTOR_INLINE __attribute__((always_inline)) inline
#else
#define TMX_VECTOR_INLINE inline
#endif

namespace tmx::models::cpu {

// False when the environment sets TUNE_MATRIX_ATEN_KERNELS=1: the models and the loss then take their ATen forms
// (RmsNormUnfused, SiluMulUnfused, ApplyRotaryEmbeddingUnfused, the loss's float32 log_softmax), so one build
// measures both (benchmarks/profile_step.sh; benchmarks/README.md). Read once.
inline bool OnePassKernels() {
  static const bool enabled = [] {
    const char* v = std::getenv("TUNE_MATRIX_ATEN_KERNELS");
    return v == nullptr || std::string_view(v) != "1";
  }();
  return enabled;
}

// bf16 travels as its 16 bits (uint16_t), so the loops stay plain integer and float code the compiler vectorises.
TMX_VECTOR_INLINE float Widen(float v) { return v; }
TMX_VECTOR_INLINE float Widen(uint16_t bf16) { return c10::bit_cast<float>(static_cast<uint32_t>(bf16) << 16); }

template <typename T>
TMX_VECTOR_INLINE T Narrow(float v);
template <>
TMX_VECTOR_INLINE float Narrow<float>(float v) {
  return v;
}
// v rounded to bf16's precision, to nearest even as ATen's casts do, still in a float's 32 bits (the low 16
// zero); a NaN stays a NaN.
TMX_VECTOR_INLINE uint32_t Bf16RoundedBits(float v) {
  const uint32_t u = c10::bit_cast<uint32_t>(v);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : rounded;
}
template <>
TMX_VECTOR_INLINE uint16_t Narrow<uint16_t>(float v) {
  return static_cast<uint16_t>(Bf16RoundedBits(v) >> 16);
}

// 2^n for an integer n in [-126, 127], from its exponent bits.
TMX_VECTOR_INLINE float Pow2(float n) {
  return c10::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
}

// exp(x) in float32 within about one unit in the last place, in branch-free operations the compiler vectorises:
// x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, Cody and Waite), exp(r) by Cephes' expf polynomial, 2^n
// from exponent bits (in two factors where n is 128, just below the overflow). Below -87.3 it returns 0 (ATen
// returns denormals there: a difference under 2^-126), above log(FLT_MAX) infinity, and a NaN stays a NaN.
TMX_VECTOR_INLINE float Exp(float x) {
  constexpr float kHigh = 88.72283f, kLow = -87.3f;
  // A NaN goes through as 0 (its result is replaced below), so no NaN reaches the integer conversion.
  const float clamped = std::min(std::max(x == x ? x : 0.0f, kLow), kHigh);
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (clamped * 1.44269504088896341f + shifter) - shifter;
  const float r = (clamped - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * (r * r) + r + 1.0f;
  const float n1 = std::min(n, 127.0f);
  const float y = (er * Pow2(n1)) * Pow2(n - n1);
  // The edges as bit masks, not selects: a select lets the compiler compute y under a condition, which it then
  // cannot vectorise.
  const uint32_t above = 0u - static_cast<uint32_t>(x > kHigh), below = 0u - static_cast<uint32_t>(x < kLow);
  const uint32_t nan = 0u - static_cast<uint32_t>(x != x);
  uint32_t bits = c10::bit_cast<uint32_t>(y);
  bits = ((bits & ~above) | (0x7f800000u & above)) & ~below;
  bits = (bits & ~nan) | (c10::bit_cast<uint32_t>(x) & nan);
  return c10::bit_cast<float>(bits);
}

// v rounded to T's precision, kept as a float: Widen(Narrow<T>(v)) in 32-bit operations only, for loops whose
// math would otherwise mix 16- and 32-bit lanes (which GCC does not vectorise together with Exp).
template <typename T>
TMX_VECTOR_INLINE float RoundAs(float v);
template <>
TMX_VECTOR_INLINE float RoundAs<float>(float v) {
  return v;
}
template <>
TMX_VECTOR_INLINE float RoundAs<uint16_t>(float v) {
  return c10::bit_cast<float>(Bf16RoundedBits(v));
}

}  // namespace tmx::models::cpu
