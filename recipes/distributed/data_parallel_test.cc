#include "recipes/distributed/data_parallel.h"

#include <thread>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

namespace tmx::recipes {
namespace {

// A two-layer model; its loss over rows [begin, end) of a fixed batch is divided by `total_rows`, so the
// ranks' gradients sum to the gradient of the whole batch's mean.
struct Net : torch::nn::Module {
  Net() {
    a = register_module("a", torch::nn::Linear(6, 8));
    b = register_module("b", torch::nn::Linear(8, 3));
  }
  torch::Tensor forward(torch::Tensor x) { return b(torch::tanh(a(x))); }
  torch::nn::Linear a{nullptr}, b{nullptr};
};

// Drawn before the ranks' threads start: torch's generator is shared by the threads.
torch::Tensor Inputs() {
  torch::manual_seed(7);
  return torch::randn({8, 6});
}

std::vector<torch::Tensor> TrainedWeights(int ranks, bool shard, std::optional<double> clip, int steps,
                                          std::vector<double>* norms) {
  const torch::Tensor x = Inputs();
  std::vector<torch::Tensor> initial;
  {
    torch::manual_seed(100);
    Net net;
    for (const torch::Tensor& p : net.parameters()) initial.push_back(p.detach().clone());
  }
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::vector<torch::Tensor>> result(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto group = ProcessGroup::Create(store, r, ranks, "gloo");
      ASSERT_TRUE(group.ok()) << group.status().ToString();
      Net net;
      {
        // Rank 0 starts from `initial`, the others from other weights, which the broadcast must replace.
        torch::NoGradGuard no_grad;
        std::vector<torch::Tensor> params = net.parameters();
        for (size_t i = 0; i < params.size(); ++i) params[i].copy_(initial[i] + static_cast<double>(r));
      }
      DataParallelOptions o;
      o.shard = shard;
      DataParallel dp(group->get(), net.parameters(), o);
      dp.BroadcastParameters();
      torch::optim::AdamW opt(dp.optimizer_tensors(), torch::optim::AdamWOptions(0.05).weight_decay(0.1));
      const int64_t rows = x.size(0) / ranks;
      for (int step = 0; step < steps; ++step) {
        dp.ZeroGrad();
        torch::Tensor mine = x.narrow(0, r * rows, rows) * (step + 1);
        torch::Tensor loss = net.forward(mine).pow(2).sum() / static_cast<double>(x.size(0));
        loss.backward();
        dp.ReduceGradients();
        double norm = ClipGradNorm(**group, dp, nullptr, clip);
        if (r == 0 && norms != nullptr) norms->push_back(norm);
        opt.step();
        dp.GatherParameters();
      }
      for (const torch::Tensor& p : net.parameters()) result[static_cast<size_t>(r)].push_back(p.detach().clone());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 1; r < ranks; ++r) {
    for (size_t i = 0; i < result[0].size(); ++i) {
      EXPECT_TRUE(torch::equal(result[0][i], result[static_cast<size_t>(r)][i])) << "rank " << r << " parameter " << i;
    }
  }
  return result[0];
}

class DataParallelTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string why_not;
    if (!BackendBuilt("gloo", &why_not)) GTEST_SKIP() << why_not;
  }
};

TEST_P(DataParallelTest, TwoRanksTrainTheSameWeightsAsOneProcessWithTheWholeBatch) {
  const bool shard = GetParam();
  std::vector<double> one_norms, two_norms;
  std::vector<torch::Tensor> one = TrainedWeights(1, shard, 0.5, 4, &one_norms);
  std::vector<torch::Tensor> two = TrainedWeights(2, shard, 0.5, 4, &two_norms);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(torch::allclose(one[i], two[i], 1e-5, 1e-6)) << "parameter " << i << "\n" << one[i] - two[i];
  }
  ASSERT_EQ(one_norms.size(), two_norms.size());
  for (size_t i = 0; i < one_norms.size(); ++i) EXPECT_NEAR(one_norms[i], two_norms[i], 1e-5 * one_norms[i]);
  EXPECT_GT(one_norms.front(), 0.5);  // the clipping did something
}

TEST_P(DataParallelTest, ShardingKeepsAnEvenShareOfTheOptimizerState) {
  const bool shard = GetParam();
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<int64_t> elements(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto group = ProcessGroup::Create(store, r, 2, "gloo");
      ASSERT_TRUE(group.ok());
      Net net;  // 6*8+8 + 8*3+3 = 83 parameters, padded to 84
      DataParallelOptions o;
      o.shard = shard;
      DataParallel dp(group->get(), net.parameters(), o);
      elements[static_cast<size_t>(r)] = dp.optimizer_elements();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(elements[0], shard ? 42 : 83);
  EXPECT_EQ(elements[1], shard ? 42 : 83);
}

// The sharded optimizer state, gathered per parameter, is the state one process keeps; cut back to shards it is
// each rank's state again.
TEST(DataParallelStateTest, ShardedOptimizerStateGathersToThePerParameterStateAndBack) {
  std::string why_not;
  if (!BackendBuilt("gloo", &why_not)) GTEST_SKIP() << why_not;
  const torch::Tensor x = Inputs();
  torch::manual_seed(100);
  Net reference;
  std::vector<torch::Tensor> initial;
  for (const torch::Tensor& p : reference.parameters()) initial.push_back(p.detach().clone());
  torch::optim::AdamW reference_opt(reference.parameters(), torch::optim::AdamWOptions(0.05));
  for (int step = 0; step < 2; ++step) {
    reference_opt.zero_grad();
    (reference.forward(x * (step + 1)).pow(2).sum() / static_cast<double>(x.size(0))).backward();
    reference_opt.step();
  }
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto group = ProcessGroup::Create(store, r, 2, "gloo");
      ASSERT_TRUE(group.ok());
      Net net;
      {
        torch::NoGradGuard no_grad;
        std::vector<torch::Tensor> params = net.parameters();
        for (size_t i = 0; i < params.size(); ++i) params[i].copy_(initial[i]);
      }
      DataParallel dp(group->get(), net.parameters());
      torch::optim::AdamW opt(dp.optimizer_tensors(), torch::optim::AdamWOptions(0.05));
      for (int step = 0; step < 2; ++step) {
        dp.ZeroGrad();
        (net.forward(x.narrow(0, r * 4, 4) * (step + 1)).pow(2).sum() / static_cast<double>(x.size(0))).backward();
        dp.ReduceGradients();
        opt.step();
        dp.GatherParameters();
      }
      std::vector<ShardedFlat> flats = dp.flats();
      ASSERT_EQ(flats.size(), 1u);
      torch::optim::AdamW per_param(net.parameters(), torch::optim::AdamWOptions(0.05));
      GatherOptimizerState(**group, flats[0], opt, &per_param);
      std::vector<torch::Tensor> mine = net.parameters(), theirs = reference.parameters();
      for (size_t i = 0; i < mine.size(); ++i) {
        auto& a = static_cast<torch::optim::AdamWParamState&>(*per_param.state().at(mine[i].unsafeGetTensorImpl()));
        auto& b = static_cast<torch::optim::AdamWParamState&>(
            *reference_opt.state().at(theirs[i].unsafeGetTensorImpl()));
        EXPECT_EQ(a.step(), b.step());
        EXPECT_TRUE(torch::allclose(a.exp_avg(), b.exp_avg(), 1e-5, 1e-7)) << "rank " << r << " parameter " << i;
        EXPECT_TRUE(torch::allclose(a.exp_avg_sq(), b.exp_avg_sq(), 1e-5, 1e-9)) << "rank " << r << " parameter " << i;
      }
      torch::optim::AdamW again(dp.optimizer_tensors(), torch::optim::AdamWOptions(0.05));
      ScatterOptimizerState(r, flats[0], per_param, &again);
      auto& cut = static_cast<torch::optim::AdamWParamState&>(*again.state().at(flats[0].shard.unsafeGetTensorImpl()));
      auto& had = static_cast<torch::optim::AdamWParamState&>(*opt.state().at(flats[0].shard.unsafeGetTensorImpl()));
      EXPECT_TRUE(torch::equal(cut.exp_avg(), had.exp_avg())) << "rank " << r;
      EXPECT_TRUE(torch::equal(cut.exp_avg_sq(), had.exp_avg_sq())) << "rank " << r;
      EXPECT_EQ(cut.step(), had.step());
    });
  }
  for (std::thread& t : threads) t.join();
}

INSTANTIATE_TEST_SUITE_P(ShardedAndReplicated, DataParallelTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Sharded" : "Replicated"; });

}  // namespace
}  // namespace tmx::recipes
