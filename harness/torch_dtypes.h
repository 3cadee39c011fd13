// The torch side of the dtype table (harness/dtypes.h): each row's c10 type, and back.
#pragma once

#include <string>

#include <c10/core/ScalarType.h>

#include "base/status.h"
#include "harness/dtypes.h"

namespace tmx {

c10::ScalarType ScalarTypeOf(const DtypeInfo& dtype);
// The row of a torch dtype; null for one no config names (int8, float64...).
const DtypeInfo* DtypeOfScalarType(c10::ScalarType type);
// The torch dtype a config's `dtype` value names; float32 for a name no row has (the schema refuses those first).
c10::ScalarType DtypeNamed(const std::string& name);
// The same, InvalidArgument naming `what` and the choices for a name no row has.
StatusOr<c10::ScalarType> ScalarTypeNamed(const std::string& name, const std::string& what);
// The config name of a torch dtype ("bf16"); "fp32" for one no row has.
std::string DtypeConfigName(c10::ScalarType type);

}  // namespace tmx
