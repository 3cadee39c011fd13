// main() of the test programs that use torch: one intra-op thread, since the tiny test models gain nothing
// from threads, and OpenMP's spinning workers make them many times slower when ctest runs programs in parallel.
#include <gtest/gtest.h>
#include <torch/torch.h>

int main(int argc, char** argv) {
  torch::set_num_threads(1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
