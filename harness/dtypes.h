// The dtypes a config may name, one row each: what the project knows of a dtype without torch (its spelling
// in configs and in Hugging Face's config.json, its size and precision, how loosely it is checked). The torch
// type of a row is harness/torch_dtypes.h's; nothing else spells a dtype's name.
#pragma once

#include <string>
#include <vector>

namespace tmx {

struct DtypeInfo {
  std::string name;     // as configs spell it ("bf16"): the `dtype` key's choices
  std::string hf_name;  // Hugging Face config.json's torch_dtype ("bfloat16")
  int element_bytes = 4;
  int mantissa_bits = 23;  // bits after the leading one, which set the spacing of its numbers
  // A reduced-precision dtype: its runs are checked against float32 with the looser tolerances.
  bool reduced = false;
};

// fp32, bf16, fp16.
const std::vector<DtypeInfo>& Dtypes();
// The row of a config's dtype name; null for a name no row has.
const DtypeInfo* FindDtype(const std::string& name);
// The config names, in the table's order.
std::vector<std::string> DtypeNames();
// Whether `name` is a reduced-precision dtype (false for an unknown name).
bool ReducedPrecision(const std::string& name);

}  // namespace tmx
