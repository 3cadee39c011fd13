// Packs must equal torchtune's PackedDataset (recipes/data/testdata/packing.json, made by
// scripts/make_tokenizer_fixtures.py with torchtune bd2a0fc7c314) in tokens, input_pos and seq_lens; labels too,
// except that tune-matrix also ignores each document's first label (see packing.h).
#include "recipes/data/packing.h"

#include <gtest/gtest.h>

#include "recipes/data/testdata/fixtures.h"

namespace tmx::data {
namespace {

std::vector<int64_t> V(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

TEST(PackingTest, PacksEqualTorchtune) {
  nlohmann::json fixtures = test::LoadFixture("packing.json");
  ASSERT_EQ(fixtures.size(), 2u);
  for (const auto& f : fixtures) {
    SCOPED_TRACE("split_across_pack=" + f["split_across_pack"].dump());
    std::vector<Sample> samples;
    for (const auto& tokens : f["samples"]) {
      Sample s;
      s.tokens = V(tokens);
      for (int64_t t : s.tokens) s.labels.push_back(t + f["labels_offset"].get<int64_t>());
      samples.push_back(s);
    }
    PackOptions options;
    options.max_seq_len = f["max_seq_len"];
    options.split_across_pack = f["split_across_pack"];
    auto packs = PackSamples(samples, options);
    ASSERT_TRUE(packs.ok()) << packs.status().ToString();
    ASSERT_EQ(packs->size(), f["packs"].size());
    for (size_t p = 0; p < packs->size(); ++p) {
      const Sample& got = (*packs)[p];
      const auto& want = f["packs"][p];
      EXPECT_EQ(got.tokens, V(want["tokens"]));
      EXPECT_EQ(got.input_pos, V(want["input_pos"]));
      EXPECT_EQ(got.seq_lens, V(want["seq_lens"]));
      std::vector<int64_t> labels = V(want["labels"]);
      for (size_t t = 1; t < labels.size(); ++t) {
        if (got.document_ids[t] != got.document_ids[t - 1]) labels[t] = kIgnoreIndex;
      }
      EXPECT_EQ(got.labels, labels);
      // Document ids follow seq_lens.
      std::vector<int64_t> ids;
      for (size_t d = 0; d < got.seq_lens.size(); ++d) ids.insert(ids.end(), static_cast<size_t>(got.seq_lens[d]), d);
      EXPECT_EQ(got.document_ids, ids);
    }
  }
}

TEST(PackingTest, DocumentIdsAndLabelHoles) {
  Sample a{{1, 2, 3}, {1, 2, 3}}, b{{4, 5}, {4, 5}};
  PackOptions options;
  options.max_seq_len = 7;
  options.padding_idx = 99;
  auto packs = PackSamples({a, b}, options);
  ASSERT_TRUE(packs.ok());
  ASSERT_EQ(packs->size(), 1u);
  const Sample& p = (*packs)[0];
  EXPECT_EQ(p.tokens, (std::vector<int64_t>{1, 2, 3, 4, 5, 99, 99}));
  EXPECT_EQ(p.labels, (std::vector<int64_t>{1, 2, 3, kIgnoreIndex, 5, kIgnoreIndex, kIgnoreIndex}));
  EXPECT_EQ(p.document_ids, (std::vector<int64_t>{0, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(p.input_pos, (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 3}));
  EXPECT_EQ(p.seq_lens, (std::vector<int64_t>{3, 2, 2}));
}

TEST(PackingTest, TooLongWithoutSplitting) {
  PackOptions options;
  options.max_seq_len = 2;
  auto packs = PackSamples({Sample{{1, 2, 3}, {1, 2, 3}}}, options);
  ASSERT_FALSE(packs.ok());
  EXPECT_EQ(packs.status().message(),
            "packing: sample 0 has 3 tokens, more than max_seq_len 2; fix: set "
            "split_across_pack: True or raise the tokenizer's max_seq_len");
}

}  // namespace
}  // namespace tmx::data
