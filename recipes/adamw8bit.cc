#include "recipes/adamw8bit.h"

#include <algorithm>
#include <cmath>

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
    QuantMap signed_map{qmap1_.to(device), QuantizeLut(qmap1_).to(device)};
    QuantMap unsigned_map{qmap2_.to(device), QuantizeLut(qmap2_).to(device)};
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
      if (st.quantized()) {
        // _optimizer_update_8bit_blockwise_cpu, "adam", a run of whole blocks at a time: elementwise but for
        // each block's absmax, so the same result with float32 temporaries of one run, not of the tensor.
        const auto& [m1, m2] = maps_on(p.device());
        const int64_t n = p.numel();
        const int64_t run = std::max<int64_t>(1, o.blocks_per_pass()) * kQuantBlockSize;
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
          s1.mul_(beta1).add_(grad, 1.0 - beta1);
          s2.mul_(beta2).addcmul_(grad, grad, 1.0 - beta2);
          at::Tensor denom = (s2.sqrt() / correction2).add_(eps);
          if (wd > 0.0) weight.mul_(1.0 - lr * wd);
          weight.addcdiv_(s1, denom, -lr / correction1);
          if (!weight.is_same(part)) part.copy_(weight);
          BlockwiseQuantized q1 = Quantize(s1, m1), q2 = Quantize(s2, m2);
          codes1.copy_(q1.codes);
          absmax1.copy_(q1.absmax);
          codes2.copy_(q2.codes);
          absmax2.copy_(q2.absmax);
        }
        if (!p.is_contiguous()) p.copy_(weights.view(p.sizes()));
      } else {
        // _optimizer_update_32bit_cpu, "adam" (max_unorm 0: no update scaling).
        at::Tensor grad = p.grad().to(torch::kFloat);
        at::Tensor weight = p.to(torch::kFloat);  // p itself for float32 weights
        at::Tensor s1 = st.state1(), s2 = st.state2();
        s1.mul_(beta1).add_(grad, 1.0 - beta1);
        s2.mul_(beta2).addcmul_(grad, grad, 1.0 - beta2);
        const double step_size = -lr * correction2 / correction1;
        if (wd > 0.0) weight.mul_(1.0 - lr * wd);
        at::Tensor update = s1 / (s2.sqrt() + eps * correction2);
        weight.add_(update, step_size);
        if (!weight.is_same(p)) p.copy_(weight);
      }
    }
  }
  return loss;
}

}  // namespace tmx::recipes
