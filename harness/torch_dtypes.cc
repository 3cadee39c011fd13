#include "harness/torch_dtypes.h"

#include "base/text.h"

namespace tmx {

c10::ScalarType ScalarTypeOf(const DtypeInfo& dtype) {
  if (dtype.name == "bf16") return c10::kBFloat16;
  if (dtype.name == "fp16") return c10::kHalf;
  return c10::kFloat;
}

const DtypeInfo* DtypeOfScalarType(c10::ScalarType type) {
  for (const DtypeInfo& d : Dtypes()) {
    if (ScalarTypeOf(d) == type) return &d;
  }
  return nullptr;
}

c10::ScalarType DtypeNamed(const std::string& name) {
  const DtypeInfo* d = FindDtype(name);
  return d != nullptr ? ScalarTypeOf(*d) : c10::kFloat;
}

StatusOr<c10::ScalarType> ScalarTypeNamed(const std::string& name, const std::string& what) {
  const DtypeInfo* d = FindDtype(name);
  if (d == nullptr) {
    return Status::InvalidArgument(what + ": dtype '" + name + "' is not one of " + JoinStrings(DtypeNames(), ", "));
  }
  return ScalarTypeOf(*d);
}

std::string DtypeConfigName(c10::ScalarType type) {
  const DtypeInfo* d = DtypeOfScalarType(type);
  return d != nullptr ? d->name : "fp32";
}

}  // namespace tmx
