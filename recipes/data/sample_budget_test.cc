#include "recipes/data/sample_budget.h"

#include <gtest/gtest.h>

#include <limits>

namespace tmx::data {
namespace {

TEST(SampleBudgetTest, ProductsSaturateInsteadOfOverflowing) {
  EXPECT_EQ(SaturatingProduct({3, 4, 8}), 96);
  EXPECT_EQ(SaturatingProduct({int64_t{1} << 40, int64_t{1} << 40}), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(SaturatingProduct({-5, 7}), 0);
}

TEST(SampleBudgetTest, TakeCountsUpToTheBoundAndNamesItWhenPassed) {
  SampleBudget budget(1000);
  EXPECT_TRUE(budget.Take(600, "a", "x").ok());
  EXPECT_EQ(budget.left(), 400);
  Status s = budget.Take(500, "data.json:3: its sample", "use fewer records");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "data.json:3: its sample: 500 B beside the 600 B of samples before it, over the 1000 B the "
                         "dataset's samples may hold (DatasetOptions::max_sample_bytes); fix: use fewer records");
  EXPECT_EQ(budget.used(), 600) << "a refused take counts nothing";
}

TEST(SampleBudgetTest, SampleBytesCountEveryVector) {
  Sample s;
  s.tokens = {1, 2, 3};
  s.labels = {1, 2, 3};
  s.input_pos = {0, 1, 2};
  s.document_ids = {0, 0, 0};
  s.seq_lens = {3};
  EXPECT_EQ(SampleBytes(s), 13 * 8);
}

}  // namespace
}  // namespace tmx::data
