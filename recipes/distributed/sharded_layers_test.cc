#include "recipes/distributed/sharded_layers.h"

#include <thread>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include "recipes/models/presets.h"

namespace tmx::recipes {
namespace {

models::DecoderArgs TinyArgs() {
  for (const models::ModelPreset& p : models::ModelPresets()) {
    if (p.tiny && p.family == "llama3_2") return p.args;
  }
  ADD_FAILURE() << "no tiny llama3_2 preset";
  return {};
}

models::Decoder Build(const models::DecoderArgs& args, uint64_t seed) {
  torch::manual_seed(seed);
  StatusOr<models::Decoder> d = models::MakeDecoder(args);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return *d;
}

TEST(ShardedLayersTest, EachRankKeepsHalfOfEveryLayerAndGathersThemForForward) {
  std::string why_not;
  if (!BackendBuilt("gloo", &why_not)) GTEST_SKIP() << why_not;
  const models::DecoderArgs args = TinyArgs();
  models::Decoder reference = Build(args, 5);
  std::vector<models::Decoder> ranks = {Build(args, 5), Build(args, 5)};
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 12}, torch::kLong);
  torch::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    expected = reference->forward(tokens);
  }
  int64_t layer_elements = 0;
  for (const models::TransformerLayer& layer : reference->layers()) {
    for (const torch::Tensor& p : layer->parameters()) layer_elements += p.numel();
  }
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto group = ProcessGroup::Create(store, r, 2, "gloo");
      ASSERT_TRUE(group.ok()) << group.status().ToString();
      ShardedLayers sharded(group->get(), ranks[static_cast<size_t>(r)]);
      // Between uses the layers hold nothing: each rank keeps its half of their weights (padded per layer).
      for (const models::TransformerLayer& layer : ranks[static_cast<size_t>(r)]->layers()) {
        for (const torch::Tensor& p : layer->parameters()) EXPECT_EQ(p.numel(), 0);
      }
      EXPECT_GE(sharded.trained_elements(), layer_elements / 2);
      EXPECT_LE(sharded.trained_elements(), layer_elements / 2 + static_cast<int64_t>(args.num_layers));
      torch::Tensor got;
      {
        torch::NoGradGuard no_grad;
        got = ranks[static_cast<size_t>(r)]->forward(tokens);
      }
      EXPECT_TRUE(torch::equal(got, expected)) << "rank " << r;
      // Gathered for a save, the weights are the reference's.
      sharded.GatherAll();
      auto mine = ranks[static_cast<size_t>(r)]->named_parameters();
      for (const auto& item : reference->named_parameters()) {
        EXPECT_TRUE(torch::equal(mine[item.key()], item.value())) << item.key();
      }
      sharded.ReleaseAll();
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace
}  // namespace tmx::recipes
