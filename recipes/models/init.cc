#include "recipes/models/init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <mutex>

namespace tmx::models {
namespace {

// Elements per parallel task (and per normal transform).
constexpr int64_t kChunk = int64_t{1} << 16;

bool Fast(const at::Tensor& t) { return t.numel() >= kFastInitElements && t.is_contiguous(); }

// A small tensor takes torch's own draw. A float32 cpu tensor directly; any other (another dtype, another
// device) from the same draw into a float32 cpu tensor of its shape, copied in: torch's draws consume the
// generator differently per dtype and device, and the numeric check compares a run with its float32 cpu
// reference from the same weights.
template <typename Draw>
void TorchDraw(at::Tensor& t, const Draw& draw) {
  if (t.device().is_cpu() && t.scalar_type() == at::kFloat) {
    draw(t);
    return;
  }
  at::Tensor f = torch::empty(t.sizes(), torch::kFloat);
  draw(f);
  t.copy_(f);
}

uint64_t DrawKey() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

// splitmix64's output function over the counter: 64 well-mixed bits per index.
inline uint64_t Hash(uint64_t key, uint64_t i) {
  uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A float in (0, 1] from 24 of the bits.
inline float Unit(uint64_t bits) { return (static_cast<float>(bits & 0xFFFFFF) + 1.0f) * (1.0f / 16777216.0f); }

// Calls fill(begin, n) for each kChunk-long run of t's elements (the last one shorter), the runs in parallel.
template <typename Fill>
void ForEachChunk(const at::Tensor& t, const Fill& fill) {
  at::parallel_for(0, (t.numel() + kChunk - 1) / kChunk, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) fill(c * kChunk, std::min(kChunk, t.numel() - c * kChunk));
  });
}

}  // namespace

void UniformInit(at::Tensor& t, double low, double high) {
  if (t.is_meta()) return;
  torch::NoGradGuard no_grad;
  if (!Fast(t)) {
    TorchDraw(t, [&](at::Tensor& f) { f.uniform_(low, high); });
    return;
  }
  const uint64_t key = DrawKey();
  const float lo = static_cast<float>(low), span = static_cast<float>(high - low);
  at::Tensor flat = t.view({-1});
  // Two values per hash (its low and high 32 bits), written as float32 and converted by torch's vectorised copy.
  ForEachChunk(t, [&](int64_t begin, int64_t n) {
    at::Tensor buffer = torch::empty({kChunk});  // even, so the pair of an odd tail's last value fits
    float* out = buffer.data_ptr<float>();
    for (int64_t j = 0; j < n; j += 2) {
      const uint64_t bits = Hash(key, static_cast<uint64_t>((begin + j) / 2));
      // Unit is in (0, 1]; 1 - it is in [0, 1), as uniform_'s half-open interval.
      out[j] = lo + span * (1.0f - Unit(bits));
      out[j + 1] = lo + span * (1.0f - Unit(bits >> 32));
    }
    flat.narrow(0, begin, n).copy_(buffer.narrow(0, 0, n));
  });
}

void NormalInit(at::Tensor& t, double mean, double std) {
  if (t.is_meta()) return;
  torch::NoGradGuard no_grad;
  if (!Fast(t)) {
    TorchDraw(t, [&](at::Tensor& f) { f.normal_(mean, std); });
    return;
  }
  const uint64_t key = DrawKey();
  at::Tensor flat = t.view({-1});
  // Box-Muller over each chunk: element j of the chunk's first half and of its second half share the pair of
  // uniforms (u, v) drawn from one hash of the chunk's element j; the transform runs in torch's vectorised ops.
  ForEachChunk(t, [&](int64_t begin, int64_t n) {
    const int64_t half = (n + 1) / 2;
    at::Tensor u = torch::empty({half}), v = torch::empty({half});
    float* pu = u.data_ptr<float>();
    float* pv = v.data_ptr<float>();
    for (int64_t j = 0; j < half; ++j) {
      const uint64_t bits = Hash(key, static_cast<uint64_t>(begin + j));
      pu[j] = Unit(bits);
      pv[j] = Unit(bits >> 32);
    }
    at::Tensor radius = u.log_().mul_(-2.0).sqrt_().mul_(std);
    at::Tensor angle = v.mul_(static_cast<float>(2.0 * M_PI));
    at::Tensor out = torch::cat({radius * angle.cos(), radius * angle.sin()}).narrow(0, 0, n).add_(mean);
    flat.narrow(0, begin, n).copy_(out);
  });
}

}  // namespace tmx::models
