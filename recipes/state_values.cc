#include "recipes/state_values.h"

#include <torch/torch.h>

#include <sstream>

#include "base/text.h"

namespace tmx::recipes {
namespace {

const char kFix[] = "; the recipe state is damaged; fix: resume from another epoch's checkpoint "
                    "(checkpointer.recipe_checkpoint) or train without resuming";

struct StateKind {
  const char* suffix;
  bool non_negative;  // a second moment or an absmax
};

// What each saved tensor is, by its name's suffix (train_state.cc writes them); nullptr for weights.
const StateKind* KindOf(const std::string& name) {
  static const StateKind kinds[] = {{".exp_avg", false},       {".exp_avg_sq", true}, {".max_exp_avg_sq", true},
                                    {".momentum_buffer", false}, {".state1", false},    {".state2", true},
                                    {".absmax1", true},          {".absmax2", true}};
  for (const StateKind& k : kinds) {
    if (EndsWith(name, k.suffix)) return &k;
  }
  static const StateKind adapter{"", false};
  return name.rfind("adapter:", 0) == 0 ? &adapter : nullptr;
}

Status CheckTensor(const std::string& path, const std::string& name, const at::Tensor& t, bool non_negative) {
  if (!c10::isFloatingType(t.scalar_type()) || t.numel() == 0) return Status::OK();
  const at::Tensor values = t.flatten().to(torch::kFloat);
  at::Tensor bad = ~torch::isfinite(values);
  if (non_negative) bad = bad.logical_or(values < 0);
  const int64_t count = bad.sum().item<int64_t>();
  if (count == 0) return Status::OK();
  const int64_t first = bad.nonzero()[0][0].item<int64_t>();
  std::ostringstream value;
  value << values[first].item<float>();
  return Status::InvalidArgument(path + ": tensor '" + name + "': " + std::to_string(count) + " of " +
                                 std::to_string(values.numel()) + " values are " +
                                 (non_negative ? "not finite numbers of 0 or more" : "not finite") +
                                 " (the first, at index " + std::to_string(first) + ", is " + value.str() + ")" + kFix);
}

}  // namespace

Status CheckRecipeStateValues(const std::string& path, const checkpoint::LoadedSafetensors& state) {
  for (const auto& [name, t] : state.tensors) {
    const StateKind* kind = KindOf(name);
    if (kind != nullptr) TM_RETURN_IF_ERROR(CheckTensor(path, name, t, kind->non_negative));
  }
  for (const auto& [key, value] : state.metadata) {
    if (!EndsWith(key, ".step") || value.empty() || value[0] != '-') continue;
    return Status::InvalidArgument(path + ": metadata '" + key + "' is " + value + ", below 0" + kFix);
  }
  return Status::OK();
}

}  // namespace tmx::recipes
