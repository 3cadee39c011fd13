#include "recipes/adamw8bit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#ifdef TUNE_MATRIX_HAS_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#endif

namespace tmx::recipes {
namespace {

constexpr int kCodes = 256;
constexpr int kLutSize = 65536;

// csrc/cpu_ops.cpp's build_quantize_lut: [-1, 1] cut into 65536 points, each mapped to the code nearest to it
// (by the midpoints between neighbouring codes). In float, as there.
at::Tensor QuantizeLut(const at::Tensor& code) {
  at::Tensor c = code.to(torch::kCPU, torch::kFloat).contiguous();
  const float* x = c.data_ptr<float>();
  float mid[kCodes - 1];
  for (int i = 0; i < kCodes - 1; ++i) mid[i] = 0.5f * (x[i] + x[i + 1]);
  at::Tensor lut = torch::empty({kLutSize}, torch::kLong);
  int64_t* out = lut.data_ptr<int64_t>();
  int k = 0;
  for (int i = 0; i < kLutSize; ++i) {
    const float val = -1.0f + (2.0f * static_cast<float>(i)) / static_cast<float>(kLutSize - 1);
    while (k < kCodes - 1 && mid[k] < val) ++k;
    out[i] = k;
  }
  return lut.to(code.device());
}

// A map and its table on one device.
struct QuantMap {
  at::Tensor code;
  at::Tensor lut;
  at::Tensor lut_bytes;  // the same as uint8 (the codes fit), for the fused cpu step: 64 KiB in a core's cache
};

BlockwiseQuantized Quantize(const at::Tensor& x, const QuantMap& map) {
  at::Tensor flat = x.reshape(-1).to(torch::kFloat);
  const int64_t n = flat.numel();
  const int64_t blocks = (n + kQuantBlockSize - 1) / kQuantBlockSize;
  at::Tensor m = torch::constant_pad_nd(flat, {0, blocks * kQuantBlockSize - n}, 0).view({blocks, kQuantBlockSize});
  at::Tensor absmax = m.abs().amax(1);
  // 1.0f / absmax, and each value times it (not divided by absmax), as cpu_ops.cpp; a block of zeros keeps 0.
  at::Tensor inv = torch::where(absmax > 0, absmax.reciprocal(), torch::zeros_like(absmax));
  at::Tensor v = (m * inv.unsqueeze(1)).clamp(-1.0, 1.0).nan_to_num(0.0);
  // norm_to_lut_index: (val + 1) * 0.5 * 65535 + 0.5, each operation rounded to float, truncated.
  at::Tensor index = ((v + 1.0) * 0.5 * static_cast<double>(kLutSize - 1) + 0.5).to(torch::kLong);
  at::Tensor codes = map.lut.index({index}).to(torch::kByte);
  codes = torch::where(absmax.unsqueeze(1) > 0, codes, torch::zeros_like(codes));
  return {codes.view(-1).slice(0, 0, n).view(x.sizes()), absmax};
}

at::Tensor Dequantize(const at::Tensor& codes, const at::Tensor& absmax, const at::Tensor& code) {
  const int64_t n = codes.numel();
  at::Tensor values = code.index({codes.reshape(-1).to(torch::kLong)});
  at::Tensor scale = absmax.repeat_interleave(kQuantBlockSize).slice(0, 0, n);
  return (values * scale).view(codes.sizes());
}

// The 8-bit step of one tensor on cpu in one pass over its blocks, each block's moments dequantised, updated,
// the weights stepped and the moments requantised while they are in a core's cache: the operations' path
// (BnbAdamW::step below) makes some twenty passes over memory a run of blocks, with two gathers of 2 ns an element,
// and took three quarters of a 1B full fine-tuning step (benchmarks/README.md). The arithmetic is that path's,
// element by element in the same order and float32 throughout: this file is compiled without floating-point
// contraction (recipes.cmake), and std::fma stands where ATen's kernels fuse (add with a scale, addcmul; measured
// against torch 2.11's). So the moments' codes and absmax are the same bits; a weight can be an ulp apart, as
// ATen's vectorised square root is not correctly rounded and std::sqrt is. AdamW8bitTest checks both paths
// against each other and against bitsandbytes.
struct Hyper8bit {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float correction2;       // sqrt(1 - beta2^step)
  float step_size;         // -lr / (1 - beta1^step)
  float eps;
  float decay_factor;      // 1 - lr * weight_decay where weight_decay > 0, else 1 (times 1.0f is exact)
};

// Clones of a loop for the widest float units (std::fma is one instruction there, a library call in the baseline
// clone), chosen by the CPU's features when the program loads.
#if defined(__GNUC__) && defined(__x86_64__)
#define TM_VECTOR_CLONES __attribute__((target_clones("avx512f", "fma", "default")))
#else
#define TM_VECTOR_CLONES
#endif

// The code of each value of a block (Quantize's arithmetic); returns the block's absmax.
TM_VECTOR_CLONES float QuantizeBlock(const float* __restrict x, int64_t len, const uint8_t* __restrict lut,
                                     uint8_t* __restrict codes) {
  // The largest |value| as the largest bit pattern: for floats without a sign the patterns sort as the values,
  // and a NaN's above infinity's, so NaN propagates as ATen's amax does; an integer max vectorises.
  int32_t largest = 0;
  for (int64_t i = 0; i < len; ++i) {
    int32_t bits;
    const float a = std::fabs(x[i]);
    std::memcpy(&bits, &a, sizeof bits);
    largest = bits > largest ? bits : largest;
  }
  float absmax;
  std::memcpy(&absmax, &largest, sizeof absmax);
  if (!(absmax > 0.0f)) {  // zeros, or NaN: codes 0
    std::fill(codes, codes + len, uint8_t{0});
    return absmax;
  }
  const float inv = 1.0f / absmax;
  int32_t index[kQuantBlockSize];
  for (int64_t i = 0; i < len; ++i) {
    float v = x[i] * inv;
    v = v != v ? 0.0f : v;  // nan_to_num after clamp: a NaN becomes 0 either way
    v = v < -1.0f ? -1.0f : v;
    v = v > 1.0f ? 1.0f : v;
    index[i] = static_cast<int32_t>((v + 1.0f) * 0.5f * static_cast<float>(kLutSize - 1) + 0.5f);
  }
  for (int64_t i = 0; i < len; ++i) codes[i] = lut[index[i]];
  return absmax;
}

// The update of one block's moments and weights, float32 arrays in place: a loop the compiler vectorises.
TM_VECTOR_CLONES void UpdateBlock(float* __restrict m, float* __restrict v, float* __restrict w, const float* __restrict g, int64_t len,
                 const Hyper8bit& h) {
  const float beta1 = h.beta1, one_minus_beta1 = h.one_minus_beta1, beta2 = h.beta2,
              one_minus_beta2 = h.one_minus_beta2, correction2 = h.correction2, eps = h.eps, step_size = h.step_size,
              decay = h.decay_factor;
  for (int64_t i = 0; i < len; ++i) {
    const float grad = g[i];
    const float m1 = std::fma(grad, one_minus_beta1, m[i] * beta1);        // mul_(beta1).add_(grad, 1 - beta1)
    const float v1 = std::fma(one_minus_beta2 * grad, grad, v[i] * beta2);  // mul_(beta2).addcmul_(grad, grad, ...)
    const float denom = std::sqrt(v1) / correction2 + eps;
    // mul_(1 - lr wd) where weight_decay > 0, then addcdiv_(s1, denom, step_size).
    w[i] = w[i] * decay + step_size * m1 / denom;
    m[i] = m1;
    v[i] = v1;
  }
}

template <typename W, typename G>
void Step8bitCpu(W* weights, const G* grads, uint8_t* codes1, uint8_t* codes2, float* absmax1, float* absmax2,
                 int64_t n, const float* map1, const float* map2, const uint8_t* lut1, const uint8_t* lut2,
                 const Hyper8bit& h) {
  const int64_t blocks = (n + kQuantBlockSize - 1) / kQuantBlockSize;
  at::parallel_for(0, blocks, 16, [&](int64_t first, int64_t last) {
    float s1[kQuantBlockSize], s2[kQuantBlockSize], w[kQuantBlockSize], g[kQuantBlockSize];
    for (int64_t b = first; b < last; ++b) {
      const int64_t begin = b * kQuantBlockSize, len = std::min(kQuantBlockSize, n - begin);
      const float scale1 = absmax1[b], scale2 = absmax2[b];
      for (int64_t i = 0; i < len; ++i) {  // dequantised moments (gathers), then weights and gradients as float32
        s1[i] = map1[codes1[begin + i]] * scale1;
        s2[i] = map2[codes2[begin + i]] * scale2;
      }
      for (int64_t i = 0; i < len; ++i) {
        w[i] = static_cast<float>(weights[begin + i]);
        g[i] = static_cast<float>(grads[begin + i]);
      }
      UpdateBlock(s1, s2, w, g, len, h);
      for (int64_t i = 0; i < len; ++i) weights[begin + i] = static_cast<W>(w[i]);
      absmax1[b] = QuantizeBlock(s1, len, lut1, codes1 + begin);
      absmax2[b] = QuantizeBlock(s2, len, lut2, codes2 + begin);
    }
  });
}

// Whether Step8bitCpu can step `p` with its state: cpu, contiguous, float32 or bf16 weights and gradients.
bool FusedCpuStep(const at::Tensor& p, const BnbAdamWParamState& st) {
  auto floating = [](const at::Tensor& t) {
    return t.scalar_type() == c10::kFloat || t.scalar_type() == c10::kBFloat16;
  };
  return p.device().is_cpu() && p.is_contiguous() && p.grad().is_contiguous() && floating(p) && floating(p.grad()) &&
         st.state1().is_contiguous() && st.state2().is_contiguous() && st.absmax1().is_contiguous() &&
         st.absmax2().is_contiguous();
}

void Step8bitCpu(const at::Tensor& p, BnbAdamWParamState& st, const at::Tensor& map1, const at::Tensor& map2,
                 const at::Tensor& lut1, const at::Tensor& lut2, const Hyper8bit& h) {
  const at::Tensor& g = p.grad();
  auto run = [&](auto* w, const auto* grad) {
    Step8bitCpu(w, grad, st.state1().data_ptr<uint8_t>(), st.state2().data_ptr<uint8_t>(),
                st.absmax1().data_ptr<float>(), st.absmax2().data_ptr<float>(), p.numel(), map1.data_ptr<float>(),
                map2.data_ptr<float>(), lut1.data_ptr<uint8_t>(), lut2.data_ptr<uint8_t>(), h);
  };
  const bool w16 = p.scalar_type() == c10::kBFloat16, g16 = g.scalar_type() == c10::kBFloat16;
  if (w16 && g16) run(p.data_ptr<c10::BFloat16>(), g.data_ptr<c10::BFloat16>());
  if (w16 && !g16) run(p.data_ptr<c10::BFloat16>(), g.data_ptr<float>());
  if (!w16 && g16) run(p.data_ptr<float>(), g.data_ptr<c10::BFloat16>());
  if (!w16 && !g16) run(p.data_ptr<float>(), g.data_ptr<float>());
}

}  // namespace

at::Tensor DynamicMap(bool is_signed) {
  // create_dynamic_map(signed, max_exponent_bits=7, total_bits=8): for each exponent 10^-6 .. 10^0 the means of
  // a float32 linspace(0.1, 1) (2^i + 1 points signed, 2^(i+1) + 1 unsigned), scaled (and negated when signed);
  // then 0 and 1, sorted.
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) {
    const int64_t points = is_signed ? (int64_t{1} << i) + 1 : (int64_t{1} << (i + 1)) + 1;
    at::Tensor bounds = torch::linspace(0.1, 1.0, points, torch::kFloat);
    at::Tensor means = (bounds.slice(0, 0, points - 1) + bounds.slice(0, 1)) / 2.0;
    const double scale = std::pow(10.0, -6 + i);
    for (double sign : is_signed ? std::vector<double>{1.0, -1.0} : std::vector<double>{1.0}) {
      at::Tensor scaled = (means * (sign * scale)).contiguous();
      data.insert(data.end(), scaled.data_ptr<float>(), scaled.data_ptr<float>() + scaled.numel());
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  data.resize(kCodes, 0.0f);
  std::sort(data.begin(), data.end());
  return torch::tensor(data, torch::kFloat);
}

BlockwiseQuantized QuantizeBlockwise(const at::Tensor& x, const at::Tensor& code) {
  return Quantize(x, QuantMap{code, QuantizeLut(code)});
}

at::Tensor DequantizeBlockwise(const at::Tensor& codes, const at::Tensor& absmax, const at::Tensor& code) {
  return Dequantize(codes, absmax, code);
}

BnbAdamW::BnbAdamW(const std::vector<at::Tensor>& params, BnbAdamWOptions options)
    : Optimizer({torch::optim::OptimizerParamGroup(params)}, std::make_unique<BnbAdamWOptions>(options)),
      qmap1_(DynamicMap(/*is_signed=*/true)),
      qmap2_(DynamicMap(/*is_signed=*/false)) {}

const BnbAdamWOptions& BnbAdamW::options() const { return static_cast<const BnbAdamWOptions&>(defaults()); }

bool BnbAdamW::InUnifiedMemory(const at::Tensor& t) {
#ifdef TUNE_MATRIX_HAS_CUDA
  if (!t.defined() || !t.is_cuda()) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, t.data_ptr()) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error this query left
    return false;
  }
  return attributes.type == cudaMemoryTypeManaged;
#else
  (void)t;
  return false;
#endif
}

at::Tensor BnbAdamW::StateBuffer(const at::Tensor& param, c10::ScalarType dtype) const {
  const at::TensorOptions options = param.options().dtype(dtype);
#ifdef TUNE_MATRIX_HAS_CUDA
  // bitsandbytes' get_paged: cudaMallocManaged, so that the driver moves the state to host memory when the
  // device's runs short and back when the step touches it.
  if (this->options().paged() && param.is_cuda() && param.numel() >= kPagedMinElements) {
    c10::cuda::CUDAGuard guard(param.device());
    const size_t bytes = static_cast<size_t>(param.numel()) * c10::elementSize(dtype);
    void* ptr = nullptr;
    C10_CUDA_CHECK(cudaMallocManaged(&ptr, bytes, cudaMemAttachGlobal));
    C10_CUDA_CHECK(cudaMemset(ptr, 0, bytes));
    return torch::from_blob(
        ptr, param.sizes(), [](void* p) { (void)cudaFree(p); }, options);
  }
#endif
  return torch::zeros(param.sizes(), options);
}

std::unique_ptr<BnbAdamWParamState> BnbAdamW::NewState(const at::Tensor& param) const {
  auto s = std::make_unique<BnbAdamWParamState>();
  const bool eight_bit = options().state_bits() == 8 && param.numel() >= options().min_8bit_size();
  s->state1(StateBuffer(param, eight_bit ? torch::kByte : torch::kFloat));
  s->state2(StateBuffer(param, eight_bit ? torch::kByte : torch::kFloat));
  if (eight_bit) {
    const int64_t blocks = (param.numel() + kQuantBlockSize - 1) / kQuantBlockSize;
    s->absmax1(torch::zeros({blocks}, param.options().dtype(torch::kFloat)));
    s->absmax2(torch::zeros({blocks}, param.options().dtype(torch::kFloat)));
  }
  return s;
}

namespace {

// One AdamW step's numbers for a parameter: the group's hyperparameters and the step's bias corrections.
struct AdamStep {
  double beta1, beta2, lr, eps, weight_decay;
  double correction1;  // 1 - beta1^step
  double correction2;  // sqrt(1 - beta2^step)
};

// _optimizer_update_8bit_blockwise_cpu, "adam", a run of whole blocks at a time: elementwise but for each
// block's absmax, so the same result with float32 temporaries of one run, not of the tensor.
void Step8bitBlockwise(const at::Tensor& p, BnbAdamWParamState& st, const QuantMap& m1, const QuantMap& m2,
                       const AdamStep& h, int64_t blocks_per_pass) {
  const int64_t n = p.numel();
  const int64_t run = std::max<int64_t>(1, blocks_per_pass) * kQuantBlockSize;
  at::Tensor weights = p.is_contiguous() ? p.view(-1) : p.contiguous().view(-1);
  at::Tensor grads = p.grad().reshape(-1);
  for (int64_t begin = 0; begin < n; begin += run) {
    const int64_t end = std::min(n, begin + run);
    const int64_t first_block = begin / kQuantBlockSize;
    const int64_t end_block = (end + kQuantBlockSize - 1) / kQuantBlockSize;
    at::Tensor codes1 = st.state1().view(-1).slice(0, begin, end);
    at::Tensor codes2 = st.state2().view(-1).slice(0, begin, end);
    at::Tensor absmax1 = st.absmax1().slice(0, first_block, end_block);
    at::Tensor absmax2 = st.absmax2().slice(0, first_block, end_block);
    at::Tensor grad = grads.slice(0, begin, end).to(torch::kFloat);
    at::Tensor part = weights.slice(0, begin, end);
    at::Tensor weight = part.to(torch::kFloat);  // the weights' own view when they are float32
    at::Tensor s1 = Dequantize(codes1, absmax1, m1.code);
    at::Tensor s2 = Dequantize(codes2, absmax2, m2.code);
    s1.mul_(h.beta1).add_(grad, 1.0 - h.beta1);
    s2.mul_(h.beta2).addcmul_(grad, grad, 1.0 - h.beta2);
    at::Tensor denom = (s2.sqrt() / h.correction2).add_(h.eps);
    if (h.weight_decay > 0.0) weight.mul_(1.0 - h.lr * h.weight_decay);
    weight.addcdiv_(s1, denom, -h.lr / h.correction1);
    if (!weight.is_same(part)) part.copy_(weight);
    BlockwiseQuantized q1 = Quantize(s1, m1), q2 = Quantize(s2, m2);
    codes1.copy_(q1.codes);
    absmax1.copy_(q1.absmax);
    codes2.copy_(q2.codes);
    absmax2.copy_(q2.absmax);
  }
  if (!p.is_contiguous()) p.copy_(weights.view(p.sizes()));
}

// _optimizer_update_32bit_cpu, "adam" (max_unorm 0: no update scaling).
void Step32bit(const at::Tensor& p, BnbAdamWParamState& st, const AdamStep& h) {
  at::Tensor grad = p.grad().to(torch::kFloat);
  at::Tensor weight = p.to(torch::kFloat);  // p itself for float32 weights
  at::Tensor s1 = st.state1(), s2 = st.state2();
  s1.mul_(h.beta1).add_(grad, 1.0 - h.beta1);
  s2.mul_(h.beta2).addcmul_(grad, grad, 1.0 - h.beta2);
  const double step_size = -h.lr * h.correction2 / h.correction1;
  if (h.weight_decay > 0.0) weight.mul_(1.0 - h.lr * h.weight_decay);
  at::Tensor update = s1 / (s2.sqrt() + h.eps * h.correction2);
  weight.add_(update, step_size);
  if (!weight.is_same(p)) p.copy_(weight);
}

}  // namespace

at::Tensor BnbAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  std::vector<std::pair<c10::Device, std::pair<QuantMap, QuantMap>>> maps;  // per device, made once a step
  auto maps_on = [&](c10::Device device) -> const std::pair<QuantMap, QuantMap>& {
    for (const auto& [d, m] : maps) {
      if (d == device) return m;
    }
    at::Tensor lut1 = QuantizeLut(qmap1_), lut2 = QuantizeLut(qmap2_);
    QuantMap signed_map{qmap1_.to(device), lut1.to(device), lut1.to(torch::kByte)};
    QuantMap unsigned_map{qmap2_.to(device), lut2.to(device), lut2.to(torch::kByte)};
    maps.emplace_back(device, std::make_pair(signed_map, unsigned_map));
    return maps.back().second;
  };
  for (torch::optim::OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const BnbAdamWOptions&>(group.options());
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    const double lr = o.lr(), eps = o.eps(), wd = o.weight_decay();
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "AdamW8bit does not support sparse gradients");
      std::unique_ptr<torch::optim::OptimizerParamState>& slot = state()[p.unsafeGetTensorImpl()];
      if (slot == nullptr) slot = NewState(p);
      auto& st = static_cast<BnbAdamWParamState&>(*slot);
      st.step(st.step() + 1);
      const double step = static_cast<double>(st.step());
      const double correction1 = 1.0 - std::pow(beta1, step);
      const double correction2 = std::sqrt(1.0 - std::pow(beta2, step));
      if (st.quantized() && o.fused_cpu() && FusedCpuStep(p, st)) {
        const auto& [m1, m2] = maps_on(p.device());
        Hyper8bit h{static_cast<float>(beta1),
                    static_cast<float>(1.0 - beta1),
                    static_cast<float>(beta2),
                    static_cast<float>(1.0 - beta2),
                    static_cast<float>(correction2),
                    static_cast<float>(-lr / correction1),
                    static_cast<float>(eps),
                    wd > 0.0 ? static_cast<float>(1.0 - lr * wd) : 1.0f};
        Step8bitCpu(p, st, m1.code, m2.code, m1.lut_bytes, m2.lut_bytes, h);
      } else if (st.quantized()) {
        const auto& [m1, m2] = maps_on(p.device());
        Step8bitBlockwise(p, st, m1, m2, AdamStep{beta1, beta2, lr, eps, wd, correction1, correction2},
                          o.blocks_per_pass());
      } else {
        Step32bit(p, st, AdamStep{beta1, beta2, lr, eps, wd, correction1, correction2});
      }
    }
  }
  return loss;
}

}  // namespace tmx::recipes
