#include "recipes/distributed/process_group.h"

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

namespace tmx::recipes {
namespace {

// Runs `body(group)` on `ranks` threads, each a rank of one gloo group over a shared in-memory store. The groups
// outlive every thread: a rank that finished first must not close its connections while another rank's last
// collective may still be reading from them (a SEGFAULT under load, once in a CI run).
void RunRanks(int ranks, const std::function<void(ProcessGroup&)>& body,
              std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::unique_ptr<ProcessGroup>> groups(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      StatusOr<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Create(store, r, ranks, "gloo", timeout);
      ASSERT_TRUE(group.ok()) << group.status().ToString();
      groups[r] = std::move(*group);
      body(*groups[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  groups.clear();  // every rank is done: now each may close
}

class ProcessGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!BackendBuilt("gloo", &why_not_)) GTEST_SKIP() << why_not_;
  }
  std::string why_not_;
};

TEST_F(ProcessGroupTest, CollectivesSumGatherAndBroadcastOverTwoRanks) {
  RunRanks(2, [](ProcessGroup& g) {
    const float r = static_cast<float>(g.rank());
    at::Tensor t = torch::full({3}, r + 1);
    g.AllReduce(t);
    EXPECT_TRUE(torch::equal(t, torch::full({3}, 3.0f)));
    at::Tensor m = torch::full({1}, r + 5);
    g.AllReduce(m, ProcessGroup::ReduceOp::kMax);
    EXPECT_EQ(m.item<float>(), 6.0f);

    // Rank r contributes [r*10 + 0..3]; rank 0 receives the sum of elements 0..1, rank 1 of 2..3.
    at::Tensor in = torch::arange(4, torch::kFloat) + r * 10;
    at::Tensor out = torch::empty({2});
    g.ReduceScatter(out, in);
    at::Tensor expected = torch::arange(4, torch::kFloat).narrow(0, g.rank() * 2, 2) * 2 + 10;
    EXPECT_TRUE(torch::equal(out, expected)) << out;

    at::Tensor piece = torch::full({2}, r);
    at::Tensor all = torch::empty({4});
    g.AllGather(all, piece);
    EXPECT_TRUE(torch::equal(all, torch::tensor({0.0f, 0.0f, 1.0f, 1.0f})));

    at::Tensor b = torch::full({2}, r + 7);
    g.Broadcast(b, 1);
    EXPECT_TRUE(torch::equal(b, torch::full({2}, 8.0f)));
    EXPECT_EQ(g.AllReduceScalar(r + 0.5), 2.0);
    g.Barrier();
  });
}

TEST_F(ProcessGroupTest, ARankThatNeverJoinsFailsTheCollectiveWithinTheTimeout) {
  RunRanks(
      2,
      [](ProcessGroup& g) {
        if (g.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(3));  // never takes part in the all-reduce
          return;
        }
        auto start = std::chrono::steady_clock::now();
        at::Tensor t = torch::ones({2});
        try {
          g.AllReduce(t);
          ADD_FAILURE() << "the all-reduce did not fail";
        } catch (const c10::Error& e) {
          EXPECT_NE(std::string(e.what()).find("all-reduce on rank 0 of 2"), std::string::npos) << e.what();
        }
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
      },
      std::chrono::milliseconds(1000));
}

TEST(ProcessGroupSingleTest, OneRankNeedsNoBackendAndCollectivesAreIdentities) {
  StatusOr<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Create({}, 0, 1, "no-such-backend");
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  at::Tensor in = torch::arange(3, torch::kFloat);
  at::Tensor out = torch::empty({3});
  (*group)->ReduceScatter(out, in);
  EXPECT_TRUE(torch::equal(out, in));
  (*group)->AllGather(out, in);
  EXPECT_TRUE(torch::equal(out, in));
  EXPECT_EQ((*group)->AllReduceScalar(2.5), 2.5);
}

TEST(ProcessGroupSingleTest, AnUnknownBackendIsUnavailableNamingIt) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  StatusOr<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Create(store, 0, 2, "xccl");
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("xccl"), std::string::npos) << group.status().message();
}

TEST(DistEnvTest, ReadsTorchrunsVariablesAndNamesABadOne) {
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  StatusOr<DistEnv> none = DistEnv::FromEnvironment();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->launched);
  EXPECT_EQ(none->world_size, 1);

  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_PORT", "29501", 1);
  ::unsetenv("LOCAL_RANK");
  StatusOr<DistEnv> env = DistEnv::FromEnvironment();
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->world_size, 2);
  EXPECT_EQ(env->master_port, 29501);

  ::setenv("RANK", "2", 1);
  StatusOr<DistEnv> bad = DistEnv::FromEnvironment();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("RANK='2'"), std::string::npos) << bad.status().message();
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("MASTER_PORT");
}

}  // namespace
}  // namespace tmx::recipes
