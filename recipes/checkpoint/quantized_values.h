// The values of an int4-quantised checkpoint (the quantize recipe's 8da4w, models::LinearImpl::QuantizeInt4):
// each quantised linear `<p>` is saved as int8-held codes `<p>.weight` and float32 scales `<p>.scales`, and
// generation computes codes x scales with no further check. A scale that is NaN, infinite or not above 0, or a
// code outside the int4 grid [-8, 7], would dequantise to garbage that generates silently (NaN scales used to
// generate 64 NUL tokens, exit 0): such a file is refused where it is read, naming the file and the tensor.
#pragma once

#include <string>

#include "base/status.h"
#include "recipes/checkpoint/safetensors.h"

namespace tmx::checkpoint {

// InvalidArgument "<path>: tensor '<p>.scales': ..." when a floating `<p>.scales` holds a value that is not
// finite or not above 0, and "<path>: tensor '<p>.weight': ..." when the integer `<p>.weight` beside such
// scales holds a code outside [models::kInt4Min, models::kInt4Max]. Tensors of other names are not looked at.
Status CheckInt4Values(const std::string& path, const NamedTensors& tensors);

}  // namespace tmx::checkpoint
