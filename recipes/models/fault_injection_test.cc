#include "recipes/models/fault_injection.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>

namespace tmx::models {
namespace {

// The fault is read once per process: this program's is the norm's, set before the first read.
class FaultInjectionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv(kFaultEnv, "norm=1.1", 1); }
};

TEST_F(FaultInjectionTest, ScalesTheNamedKernelOffTheFloat32CpuPathOnly) {
  EXPECT_EQ(FaultScale(FaultKernel::kNorm), 1.1);
  EXPECT_EQ(FaultScale(FaultKernel::kAttention), 1);
  const torch::Tensor bf16 = torch::full({4}, 2.0, torch::kBFloat16);
  EXPECT_TRUE(torch::allclose(InjectFault(FaultKernel::kNorm, bf16).to(torch::kFloat), torch::full({4}, 2.2), 1e-2));
  EXPECT_TRUE(InjectFault(FaultKernel::kMlp, bf16).is_same(bf16));  // another kernel: untouched
  const torch::Tensor fp32 = torch::full({4}, 2.0);
  EXPECT_TRUE(OnReferencePath(fp32));
  EXPECT_FALSE(OnReferencePath(bf16));
  EXPECT_TRUE(InjectFault(FaultKernel::kNorm, fp32).is_same(fp32));  // the reference path: never touched
}

TEST_F(FaultInjectionTest, TheOptimizerFaultCopiesNothingUnlessItIsTheOptimizers) {
  std::vector<torch::Tensor> params = {torch::ones({3}, torch::kBFloat16)};
  EXPECT_TRUE(OptimizerFaultBefore(params).empty());
  OptimizerFaultAfter(params, {});  // nothing to scale
  EXPECT_TRUE(torch::equal(params[0], torch::ones({3}, torch::kBFloat16)));
}

}  // namespace
}  // namespace tmx::models
