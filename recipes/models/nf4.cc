#include "recipes/models/nf4.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tmx::models {
namespace {

constexpr int64_t kChunk = int64_t{1} << 20;  // torchao's CHUNK_SIZE

std::string ShapeText(at::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Absmax of each block of `block` consecutive elements of the 1-D `flat`.
at::Tensor BlockAbsmax(const at::Tensor& flat, int64_t block) {
  return std::get<0>(flat.view({flat.numel() / block, block}).abs().max(/*dim=*/1));
}

}  // namespace

int64_t Nf4Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Nf4Tensor::nbytes() const {
  int64_t total = 0;
  for (const at::Tensor* t : {&quantized_data, &quantized_scalers, &quantization_factor, &scaler_mean}) {
    if (t->defined()) total += static_cast<int64_t>(t->nbytes());
  }
  return total;
}

at::Tensor Nf4Levels(const c10::TensorOptions& options) {
  // torchao's Python float literals (doubles), converted to the dtype as torch.tensor(list, dtype=...) does.
  static const std::vector<double> kLevels = {-1.0000, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848,
                                              -0.0911, 0.0000,  0.0796,  0.1609,  0.2461,  0.3379,
                                              0.4407,  0.5626,  0.7230,  1.0000};
  at::Tensor levels = at::tensor(kLevels, at::TensorOptions().dtype(at::kDouble));
  return levels.to(options.device(), options.dtype().toScalarType());
}

Status CheckNf4Shape(const std::string& name, at::IntArrayRef shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (shape.size() <= 2 && n > 0 && n % Nf4Tensor::kGranule == 0) return Status::OK();
  if (shape.size() > 2) {
    return Status::InvalidArgument(name + ": shape " + ShapeText(shape) +
                                   " cannot be stored as NF4 (a weight of at most 2 dimensions is); fix: set "
                                   "model.quantize_base=False");
  }
  return Status::InvalidArgument(
      name + ": shape " + ShapeText(shape) + " holds " + std::to_string(n) +
      " weights, not a multiple of 16384 (NF4 quantises blocks of 64 weights and its scales in blocks of 256, as "
      "torchao does); fix: set model.quantize_base=False, or use a model whose linear layers' sizes multiply to "
      "a multiple of 16384");
}

namespace {

// torchao's choice of level for each x: the first of the 16 with the smallest |x - level|, the difference rounded
// to the dtype T (float or bfloat16; ATen subtracts in float and rounds). In one pass instead of torchao's
// 16 differences a weight: the level nearest in exact arithmetic comes from the 15 midpoints, and the rounding
// of a difference (under 2^-8 of it) can only move the choice to a neighbour, since any other level is at least
// 0.079 farther; so the first minimum over the nearest and its two neighbours is torchao's. A non-finite x (an
// all-zero block's 0/0) differs from every level alike, and torchao then takes level 0.
template <typename T>
void NearestLevelsOf(const T* x, int64_t n, const float* levels, uint8_t* codes) {
  float mid[15];
  for (int i = 0; i < 15; ++i) mid[i] = (levels[i] + levels[i + 1]) / 2;
  at::parallel_for(0, n, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = static_cast<float>(x[i]);
      if (!std::isfinite(v)) {
        codes[i] = 0;
        continue;
      }
      int k = 0;
      while (k < 15 && v > mid[k]) ++k;
      int best = -1;
      float best_diff = 0;
      for (int j = std::max(k - 1, 0); j <= std::min(k + 1, 15); ++j) {
        const float d = std::fabs(static_cast<float>(static_cast<T>(v - levels[j])));
        if (best < 0 || d < best_diff) {
          best = j;
          best_diff = d;
        }
      }
      codes[i] = static_cast<uint8_t>(best);
    }
  });
}

// The level code of each element of `scaled` (contiguous), as uint8: the one-pass loop for float and bfloat16 on
// the CPU, torchao's 16 differences (in chunks) elsewhere, where a device's elementwise kernels do them fast.
at::Tensor NearestLevels(const at::Tensor& scaled, const at::Tensor& levels) {
  at::Tensor codes = at::empty({scaled.numel()}, scaled.options().dtype(at::kByte));
  const bool bf16 = scaled.scalar_type() == at::kBFloat16;
  if (scaled.device().is_cpu() && (bf16 || scaled.scalar_type() == at::kFloat)) {
    const at::Tensor levels_f = levels.to(at::kCPU, at::kFloat).contiguous();
    if (bf16) {
      NearestLevelsOf(scaled.data_ptr<at::BFloat16>(), scaled.numel(), levels_f.data_ptr<float>(),
                      codes.data_ptr<uint8_t>());
    } else {
      NearestLevelsOf(scaled.data_ptr<float>(), scaled.numel(), levels_f.data_ptr<float>(), codes.data_ptr<uint8_t>());
    }
    return codes;
  }
  for (int64_t start = 0; start < scaled.numel(); start += kChunk) {
    const int64_t len = std::min(kChunk, scaled.numel() - start);
    at::Tensor diff = (scaled.narrow(0, start, len).unsqueeze(-1) - levels).abs();
    codes.narrow(0, start, len).copy_(std::get<1>(diff.min(/*dim=*/-1)));
  }
  return codes;
}

}  // namespace

Nf4Tensor QuantizeNf4(const at::Tensor& weight, const std::string& name) {
  Status shape = CheckNf4Shape(name, weight.sizes());
  TORCH_CHECK(shape.ok(), shape.message());
  TORCH_CHECK(at::isFloatingType(weight.scalar_type()), name, ": NF4 quantises a floating weight, got ",
              weight.scalar_type());
  at::NoGradGuard no_grad;
  const at::Tensor flat = weight.detach().contiguous().view({-1});
  const int64_t numel = flat.numel();
  Nf4Tensor q;
  q.shape = weight.sizes().vec();
  q.dtype = weight.scalar_type();

  // Double quantisation of the per-block absmaxes.
  at::Tensor scalers = BlockAbsmax(flat, Nf4Tensor::kBlockSize);
  q.scaler_mean = scalers.mean();
  scalers = scalers - q.scaler_mean;
  const int64_t n_scaler_blocks = scalers.numel() / Nf4Tensor::kScalerBlockSize;
  at::Tensor scaler_absmax = BlockAbsmax(scalers, Nf4Tensor::kScalerBlockSize);
  // Python's 256 / t is t.reciprocal() * 256; [n_scaler_blocks], in the weight's dtype.
  at::Tensor factor = scaler_absmax.mul(2).reciprocal().mul(256);
  q.quantized_scalers = (scalers.view({n_scaler_blocks, Nf4Tensor::kScalerBlockSize}) * factor.unsqueeze(-1))
                            .round()
                            .clamp(-128, 127)
                            .flatten()
                            .to(at::kChar);
  q.quantization_factor = factor.contiguous();

  // Nearest level of each weight over its block's absmax (the undouble-quantised one, as torchao).
  const int64_t n_blocks = numel / Nf4Tensor::kBlockSize;
  at::Tensor block_absmax = BlockAbsmax(flat, Nf4Tensor::kBlockSize);
  at::Tensor scaled = (flat.view({n_blocks, Nf4Tensor::kBlockSize}) / block_absmax.unsqueeze(-1)).flatten();
  at::Tensor codes = NearestLevels(scaled.contiguous(), Nf4Levels(weight.options()));
  // [a, b, c, d] -> [ab, cd]: the even element in the high nibble.
  at::Tensor pairs = codes.view({numel / 2, 2});
  q.quantized_data = pairs.select(1, 0).bitwise_left_shift(4).bitwise_or(pairs.select(1, 1)).contiguous();
  return q;
}

namespace {

// The weight from its codes and per-block scales on cpu, in one pass: each byte's two levels times its block's
// scale, rounded to T as ATen's multiply of two T tensors rounds (the product in float). The operations' path
// gathers each nibble's level through an index tensor of int64 (two gathers over the weight) and stacks the
// halves; this writes each pair in place. `levels` and `scalers` are in T.
template <typename T>
void DequantizeCpu(const uint8_t* codes, const T* scalers, const T* levels, int64_t n_blocks, T* out) {
  constexpr int64_t kBytes = Nf4Tensor::kBlockSize / 2;
  float level[16];
  for (int i = 0; i < 16; ++i) level[i] = static_cast<float>(levels[i]);
  at::parallel_for(0, n_blocks, 1024, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const float scale = static_cast<float>(scalers[b]);
      const uint8_t* in = codes + b * kBytes;
      T* o = out + b * Nf4Tensor::kBlockSize;
      for (int64_t j = 0; j < kBytes; ++j) {
        o[2 * j] = static_cast<T>(level[in[j] >> 4] * scale);
        o[2 * j + 1] = static_cast<T>(level[in[j] & 0xF] * scale);
      }
    }
  });
}

}  // namespace

at::Tensor Nf4Tensor::Dequantize() const {
  const bool one_pass = quantized_data.device().is_cpu() && quantized_data.is_contiguous() &&
                        (dtype == at::kFloat || dtype == at::kBFloat16);
  return one_pass ? DequantizeInOnePass() : DequantizeByOperations();
}

// The scales: int8 over the factor (promoted to the dtype), then the mean added back.
at::Tensor Nf4Tensor::Scalers() const {
  const int64_t n_scaler_blocks = quantization_factor.numel();
  return (quantized_scalers.view({n_scaler_blocks, kScalerBlockSize}) / quantization_factor.unsqueeze(-1))
             .flatten()
             .to(dtype) +
         scaler_mean;
}

at::Tensor Nf4Tensor::DequantizeInOnePass() const {
  at::NoGradGuard no_grad;
  const at::Tensor levels = Nf4Levels(quantized_data.options().dtype(dtype)).contiguous();
  const at::Tensor scalers = Scalers().contiguous();
  at::Tensor out = at::empty(shape, quantized_data.options().dtype(dtype));
  if (dtype == at::kBFloat16) {
    DequantizeCpu(quantized_data.data_ptr<uint8_t>(), scalers.data_ptr<at::BFloat16>(),
                  levels.data_ptr<at::BFloat16>(), scalers.numel(), out.data_ptr<at::BFloat16>());
  } else {
    DequantizeCpu(quantized_data.data_ptr<uint8_t>(), scalers.data_ptr<float>(), levels.data_ptr<float>(),
                  scalers.numel(), out.data_ptr<float>());
  }
  return out;
}

at::Tensor Nf4Tensor::DequantizeByOperations() const {
  at::NoGradGuard no_grad;
  const at::Tensor levels = Nf4Levels(quantized_data.options().dtype(dtype));
  const at::Tensor scalers = Scalers();
  at::Tensor first = levels.index({quantized_data.bitwise_right_shift(4).to(at::kLong)});
  at::Tensor second = levels.index({quantized_data.bitwise_and(0xF).to(at::kLong)});
  at::Tensor repeated = scalers.unsqueeze(-1).expand({scalers.size(0), kBlockSize / 2}).flatten();
  return at::stack({first * repeated, second * repeated}, /*dim=*/-1).reshape(shape);
}

namespace {

class LinearNf4Node : public torch::autograd::Function<LinearNf4Node> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const Nf4Tensor& w) {
    ctx->saved_data["data"] = w.quantized_data;
    ctx->saved_data["scalers"] = w.quantized_scalers;
    ctx->saved_data["factor"] = w.quantization_factor;
    ctx->saved_data["mean"] = w.scaler_mean;
    ctx->saved_data["shape"] = w.shape;
    ctx->saved_data["dtype"] = static_cast<int64_t>(w.dtype);
    return at::linear(x, w.Dequantize().to(x.scalar_type()));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    Nf4Tensor w;
    w.quantized_data = ctx->saved_data["data"].toTensor();
    w.quantized_scalers = ctx->saved_data["scalers"].toTensor();
    w.quantization_factor = ctx->saved_data["factor"].toTensor();
    w.scaler_mean = ctx->saved_data["mean"].toTensor();
    w.shape = ctx->saved_data["shape"].toIntVector();
    w.dtype = static_cast<c10::ScalarType>(ctx->saved_data["dtype"].toInt());
    const at::Tensor& g = grad_out[0];
    return {at::matmul(g, w.Dequantize().to(g.scalar_type())), at::Tensor()};
  }
};

}  // namespace

at::Tensor LinearNf4(const at::Tensor& x, const Nf4Tensor& weight) { return LinearNf4Node::apply(x, weight); }

double Nf4BytesPerWeight(int64_t dtype_bytes) {
  return 0.5 + 1.0 / Nf4Tensor::kBlockSize + static_cast<double>(dtype_bytes) / Nf4Tensor::kGranule;
}

}  // namespace tmx::models
