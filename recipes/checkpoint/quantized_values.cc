#include "recipes/checkpoint/quantized_values.h"

#include <torch/torch.h>

#include <map>
#include <sstream>

#include "base/text.h"
#include "recipes/models/fake_quant.h"

namespace tmx::checkpoint {
namespace {

const char kScales[] = ".scales";
const char kFix[] = "; the checkpoint is damaged; fix: quantise the model again (tune run quantize), or set quantizer=null "
                    "and load the unquantised checkpoint";

std::string Where(const std::string& path, const std::string& name) { return path + ": tensor '" + name + "': "; }

// Scales must be finite and above 0: the quantizer writes max|w| / 7.5 of each group, at least the dtype's eps.
Status CheckScales(const std::string& path, const std::string& name, const at::Tensor& scales) {
  const at::Tensor bad = (~torch::isfinite(scales)).logical_or(scales <= 0).flatten();
  const int64_t count = bad.sum().item<int64_t>();
  if (count == 0) return Status::OK();
  const int64_t first = bad.nonzero()[0][0].item<int64_t>();
  std::ostringstream value;
  value << scales.flatten()[first].item<double>();
  return Status::InvalidArgument(Where(path, name) + std::to_string(count) + " of " +
                                 std::to_string(scales.numel()) + " scales are not finite numbers above 0 (the first, at " +
                                 "index " + std::to_string(first) + ", is " + value.str() + ")" + kFix);
}

Status CheckCodes(const std::string& path, const std::string& name, const at::Tensor& codes) {
  if (codes.numel() == 0) return Status::OK();
  const auto [low, high] = torch::aminmax(codes.to(torch::kLong));
  const int64_t lo = low.item<int64_t>(), hi = high.item<int64_t>();
  if (lo >= models::kInt4Min && hi <= models::kInt4Max) return Status::OK();
  return Status::InvalidArgument(Where(path, name) + "int4 codes range from " + std::to_string(lo) + " to " +
                                 std::to_string(hi) + ", outside the int4 grid [" + std::to_string(models::kInt4Min) +
                                 ", " + std::to_string(models::kInt4Max) + "]" + kFix);
}

}  // namespace

Status CheckInt4Values(const std::string& path, const NamedTensors& tensors) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, t] : tensors) by_name.emplace(name, &t);
  for (const auto& [name, t] : tensors) {
    if (name.size() <= sizeof(kScales) - 1 || !EndsWith(name, kScales) || !t.defined() || !c10::isFloatingType(t.scalar_type())) continue;
    TM_RETURN_IF_ERROR(CheckScales(path, name, t));
    const std::string weight = name.substr(0, name.size() - (sizeof(kScales) - 1)) + ".weight";
    auto codes = by_name.find(weight);
    if (codes == by_name.end() || !codes->second->defined() || c10::isFloatingType(codes->second->scalar_type())) {
      continue;  // float weights beside scales are refused where they are loaded (LoadIntoModule)
    }
    TM_RETURN_IF_ERROR(CheckCodes(path, weight, *codes->second));
  }
  return Status::OK();
}

}  // namespace tmx::checkpoint
