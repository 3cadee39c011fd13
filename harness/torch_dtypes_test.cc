#include "harness/torch_dtypes.h"

#include <gtest/gtest.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace tmx {
namespace {

TEST(TorchDtypesTest, EachRowIsItsTorchTypeAndBack) {
  for (const DtypeInfo& d : Dtypes()) {
    const c10::ScalarType type = ScalarTypeOf(d);
    EXPECT_EQ(DtypeOfScalarType(type), &d) << d.name;
    EXPECT_EQ(DtypeConfigName(type), d.name);
    EXPECT_EQ(DtypeNamed(d.name), type);
    EXPECT_EQ(static_cast<int>(c10::elementSize(type)), d.element_bytes) << d.name;
    // The mantissa: 1 + 2^-bits is the dtype's next number after 1.
    const double next = std::ldexp(1.0, -d.mantissa_bits);
    const double rounded = type == c10::kBFloat16 ? static_cast<float>(c10::BFloat16(1.0f + static_cast<float>(next)))
                           : type == c10::kHalf   ? static_cast<float>(c10::Half(1.0f + static_cast<float>(next)))
                                                  : 1.0f + static_cast<float>(next);
    EXPECT_EQ(rounded, 1.0 + next) << d.name;
  }
  EXPECT_EQ(DtypeOfScalarType(c10::kDouble), nullptr);
  EXPECT_EQ(DtypeConfigName(c10::kChar), "fp32");
  EXPECT_EQ(DtypeNamed("int8"), c10::kFloat);
  StatusOr<c10::ScalarType> bad = ScalarTypeNamed("fp8", "matmul peak");
  EXPECT_EQ(bad.status().message(), "matmul peak: dtype 'fp8' is not one of fp32, bf16, fp16");
}

}  // namespace
}  // namespace tmx
