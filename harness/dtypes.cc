#include "harness/dtypes.h"

namespace tmx {

const std::vector<DtypeInfo>& Dtypes() {
  static const std::vector<DtypeInfo> rows = {
      {"fp32", "float32", 4, 23, false},
      {"bf16", "bfloat16", 2, 7, true},
      {"fp16", "float16", 2, 10, true},
  };
  return rows;
}

const DtypeInfo* FindDtype(const std::string& name) {
  for (const DtypeInfo& d : Dtypes()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::vector<std::string> DtypeNames() {
  std::vector<std::string> names;
  for (const DtypeInfo& d : Dtypes()) names.push_back(d.name);
  return names;
}

bool ReducedPrecision(const std::string& name) {
  const DtypeInfo* d = FindDtype(name);
  return d != nullptr && d->reduced;
}

}  // namespace tmx
