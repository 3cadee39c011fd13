// alpha * (m1 m2) with alpha applied inside the product (a GEMM's alpha, in its float32 accumulation) before
// its one rounding to the inputs' dtype: no second pass over the result and no factor rounded to that dtype.
// Used by the backwards that scale their products (LoRA's LoraProduct, the fused loss).
#pragma once

#include <ATen/ATen.h>

namespace tmx::models {

// m1 [n, k], m2 [k, m] -> [n, m] in m1's dtype and device.
inline at::Tensor ScaledMm(const at::Tensor& m1, const at::Tensor& m2, double alpha) {
  at::Tensor out = at::empty({m1.size(0), m2.size(1)}, m1.options());
  return at::addmm_out(out, out, m1, m2, /*beta=*/0, alpha);  // beta 0: out's contents are not read
}

}  // namespace tmx::models
