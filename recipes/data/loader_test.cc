#include "recipes/data/loader.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "recipes/data/samples.h"
#include "recipes/data/tokenizer_builders.h"

namespace tmx::data {
namespace {

// Sample i has i % 4 + 1 tokens, all equal to i, and labels equal to 1000 + i.
std::vector<Sample> MakeSamples(int64_t n) {
  std::vector<Sample> samples;
  for (int64_t i = 0; i < n; ++i) {
    size_t len = static_cast<size_t>(i % 4 + 1);
    samples.push_back({std::vector<int64_t>(len, i), std::vector<int64_t>(len, 1000 + i)});
  }
  return samples;
}

DataLoader MustCreate(int64_t n, const DataLoaderOptions& options) {
  StatusOr<DataLoader> loader = DataLoader::Create(MakeSamples(n), options);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  return std::move(loader).value();
}

// The sample indices of every batch of epochs 0..epochs-1.
std::vector<std::vector<int64_t>> AllIndices(DataLoader& loader, int64_t epochs) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t step = 0; step < epochs * loader.size(); ++step) out.push_back(loader.BatchAtStep(step).indices);
  return out;
}

TEST(DataLoaderTest, SeededPermutationIsPinned) {
  // Pinned values, checked against an independent implementation of mt19937_64 + Fisher-Yates. A change
  // here changes every run's data order.
  EXPECT_EQ(SeededPermutation(10, 0), (std::vector<int64_t>{7, 2, 0, 8, 3, 9, 6, 1, 5, 4}));
  EXPECT_EQ(SeededPermutation(10, 1), (std::vector<int64_t>{1, 7, 3, 9, 4, 0, 5, 2, 6, 8}));
  EXPECT_EQ(SeededPermutation(10, 42), (std::vector<int64_t>{1, 7, 9, 0, 3, 8, 4, 2, 5, 6}));
  EXPECT_EQ(SeededPermutation(1, 7), (std::vector<int64_t>{0}));
  EXPECT_TRUE(SeededPermutation(0, 7).empty());
}

TEST(DataLoaderTest, SameSeedSameBatchesDifferentSeedDiffers) {
  DataLoaderOptions options;
  options.batch_size = 3;
  options.seed = 5;
  DataLoader a = MustCreate(20, options);
  DataLoader b = MustCreate(20, options);
  EXPECT_EQ(AllIndices(a, 3), AllIndices(b, 3));
  for (int64_t i = 0; i < a.size(); ++i) {
    Batch x = a.BatchAtStep(i);
    Batch y = b.BatchAtStep(i);
    EXPECT_TRUE(torch::equal(x.tokens, y.tokens));
    EXPECT_TRUE(torch::equal(x.labels, y.labels));
  }
  options.seed = 6;
  DataLoader c = MustCreate(20, options);
  EXPECT_NE(AllIndices(a, 1), AllIndices(c, 1));
}

TEST(DataLoaderTest, EachEpochIsADifferentPermutation) {
  DataLoaderOptions options;
  options.batch_size = 4;
  options.seed = 3;
  DataLoader loader = MustCreate(10, options);
  EXPECT_EQ(loader.order(), SeededPermutation(10, 3));
  std::vector<int64_t> epoch0 = loader.order();
  loader.SetEpoch(1);
  EXPECT_EQ(loader.epoch(), 1);
  EXPECT_EQ(loader.order(), SeededPermutation(10, 4));  // seed + epoch
  EXPECT_NE(loader.order(), epoch0);
  std::vector<int64_t> sorted = loader.order();
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(DataLoaderTest, BatchAtStepCrossesEpochsLikeSetEpoch) {
  DataLoaderOptions options;
  options.batch_size = 4;
  DataLoader loader = MustCreate(10, options);  // 3 batches per epoch
  Batch at_step = loader.BatchAtStep(7);        // epoch 2, batch 1
  EXPECT_EQ(loader.epoch(), 2);
  DataLoader other = MustCreate(10, options);
  other.SetEpoch(2);
  EXPECT_EQ(at_step.indices, other.GetBatch(1).indices);
  std::vector<int64_t> order = SeededPermutation(10, 2);
  EXPECT_EQ(at_step.indices, (std::vector<int64_t>{order[4], order[5], order[6], order[7]}));
}

TEST(DataLoaderTest, ShardsTogetherHoldTheBatchesOfOneLoaderWithTheGlobalBatch) {
  // 8 samples, 2 shards of batch 2 against one loader of batch 4: batch k of both shards is batch k of the one.
  DataLoaderOptions one;
  one.batch_size = 4;
  one.seed = 3;
  DataLoader whole = MustCreate(8, one);
  std::vector<DataLoader> shards;
  for (int64_t r = 0; r < 2; ++r) {
    DataLoaderOptions o = one;
    o.batch_size = 2;
    o.num_shards = 2;
    o.shard = r;
    shards.push_back(MustCreate(8, o));
  }
  ASSERT_EQ(shards[0].size(), whole.size());
  for (int64_t step = 0; step < 2 * whole.size(); ++step) {
    std::vector<int64_t> expected = whole.BatchAtStep(step).indices;
    std::vector<int64_t> got = shards[0].BatchAtStep(step).indices;
    std::vector<int64_t> second = shards[1].BatchAtStep(step).indices;
    got.insert(got.end(), second.begin(), second.end());
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected) << "step " << step;
  }
}

TEST(DataLoaderTest, ShardsOfAnUnevenCountRepeatTheFirstSamplesAsDistributedSamplerDoes) {
  DataLoaderOptions o;
  o.batch_size = 8;
  o.shuffle = false;
  o.num_shards = 2;
  o.shard = 1;
  DataLoader loader = MustCreate(5, o);  // padded order 0 1 2 3 4 0; shard 1 takes 1 3 0
  EXPECT_EQ(loader.BatchAtStep(0).indices, (std::vector<int64_t>{1, 3, 0}));
  o.shard = 2;
  EXPECT_FALSE(DataLoader::Create(MakeSamples(5), o).ok());
}

TEST(DataLoaderTest, PadsToTheLongestSampleInTheBatch) {
  DataLoaderOptions options;
  options.batch_size = 3;
  options.shuffle = false;
  DataLoader loader = MustCreate(7, options);  // lengths 1 2 3 4 1 2 3
  Batch b = loader.GetBatch(0);
  EXPECT_EQ(b.indices, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(b.tokens.scalar_type(), torch::kLong);
  EXPECT_EQ(b.labels.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(b.tokens, torch::tensor({0, 258, 258, 1, 1, 258, 2, 2, 2}, torch::kLong).view({3, 3})));
  EXPECT_TRUE(torch::equal(
      b.labels, torch::tensor({1000, -100, -100, 1001, 1001, -100, 1002, 1002, 1002}, torch::kLong).view({3, 3})));
  EXPECT_EQ(b.num_tokens, 6);

  b = loader.GetBatch(1);  // samples 3 4 5: lengths 4 1 2
  EXPECT_EQ(b.tokens.sizes(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(b.num_tokens, 7);
  EXPECT_EQ(b.tokens[1][1].item<int64_t>(), 258);
  EXPECT_EQ(b.labels[2][3].item<int64_t>(), -100);

  b = loader.GetBatch(2);  // the short last batch: sample 6 alone
  EXPECT_TRUE(torch::equal(b.tokens, torch::tensor({6, 6, 6}, torch::kLong).view({1, 3})));
  EXPECT_EQ(b.num_tokens, 3);
}

TEST(DataLoaderTest, CustomPadId) {
  DataLoaderOptions options;
  options.batch_size = 2;
  options.shuffle = false;
  options.pad_id = 0;
  DataLoader loader = MustCreate(2, options);
  EXPECT_TRUE(torch::equal(loader.GetBatch(0).tokens, torch::tensor({0, 0, 1, 1}, torch::kLong).view({2, 2})));
}

TEST(DataLoaderTest, BatchCountWithAndWithoutDropLast) {
  struct Case {
    int64_t n, batch_size;
    bool drop_last;
    int64_t batches;
  };
  for (const Case& c : std::vector<Case>{
           {10, 3, false, 4}, {10, 3, true, 3}, {9, 3, false, 3}, {9, 3, true, 3}, {2, 5, false, 1}, {1, 1, true, 1}}) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " batch_size=" + std::to_string(c.batch_size) +
                 " drop_last=" + std::to_string(c.drop_last));
    DataLoaderOptions options;
    options.batch_size = c.batch_size;
    options.drop_last = c.drop_last;
    DataLoader loader = MustCreate(c.n, options);
    EXPECT_EQ(loader.size(), c.batches);
    int64_t seen = 0;
    for (int64_t i = 0; i < loader.size(); ++i) seen += static_cast<int64_t>(loader.GetBatch(i).indices.size());
    EXPECT_EQ(seen, c.drop_last ? c.batches * c.batch_size : c.n);
  }
}

TEST(DataLoaderTest, RejectsBadOptionsAndSamples) {
  DataLoaderOptions options;
  options.batch_size = 0;
  StatusOr<DataLoader> loader = DataLoader::Create(MakeSamples(3), options);
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().message(), "data loader: batch_size is 0; fix: set it to at least 1");

  options.batch_size = 2;
  loader = DataLoader::Create({}, options);
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().message(),
            "data loader: there are no samples; fix: load a dataset with at least one record");

  std::vector<Sample> samples = MakeSamples(3);
  samples[1].labels.pop_back();
  loader = DataLoader::Create(samples, options);
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().message(),
            "data loader: sample 1 has 2 tokens and 1 labels; fix: give every sample as many labels as tokens, at "
            "least one");

  options.batch_size = 4;
  options.drop_last = true;
  loader = DataLoader::Create(MakeSamples(3), options);
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(loader.status().message(),
            "data loader: drop_last with batch_size 4 and only 3 samples leaves no batch; fix: lower batch_size or "
            "set drop_last to false");
}

TEST(DataLoaderTest, PackedSamplesCarryPositionsAndDocuments) {
  std::vector<Sample> samples;
  for (int64_t i = 0; i < 2; ++i) {
    Sample s{{1, 2, 3, 0}, {1, 2, kIgnoreIndex, kIgnoreIndex}};
    s.input_pos = {0, 1, 0, 1};
    s.document_ids = {0, 0, 1, 2};
    s.seq_lens = {2, 1, 1};
    samples.push_back(s);
  }
  DataLoaderOptions options;
  options.batch_size = 2;
  options.shuffle = false;
  options.pad_id = 0;
  StatusOr<DataLoader> loader = DataLoader::Create(samples, options);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  Batch batch = loader->GetBatch(0);
  ASSERT_TRUE(batch.input_pos.defined());
  EXPECT_TRUE(torch::equal(batch.input_pos, torch::tensor({0, 1, 0, 1, 0, 1, 0, 1}, torch::kLong).view({2, 4})));
  EXPECT_TRUE(torch::equal(batch.document_ids, torch::tensor({0, 0, 1, 2, 0, 0, 1, 2}, torch::kLong).view({2, 4})));
  EXPECT_FALSE(MustCreate(3, DataLoaderOptions()).GetBatch(0).input_pos.defined());

  samples.push_back(Sample{{5}, {5}});
  StatusOr<DataLoader> mixed = DataLoader::Create(samples, options);
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().message(),
            "data loader: sample 2 is not packed, sample 0 is packed; fix: pack all samples of a dataset or none");
}

TEST(DataLoaderTest, CollatePadIdFromTheTokenizer) {
  auto qwen = BuildTokenizer("qwen2_tokenizer", *SampleTokenizerOptions("qwen2_tokenizer", {}));
  ASSERT_TRUE(qwen.ok()) << qwen.status().ToString();
  EXPECT_EQ(CollatePadId((*qwen)->base()), 151643);  // <|endoftext|>
  auto hf = BuildTokenizer("HuggingFaceBaseTokenizer", *SampleTokenizerOptions("HuggingFaceBaseTokenizer", {}));
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  EXPECT_EQ(CollatePadId((*hf)->base()), 0);  // no pad token: 0
}

}  // namespace
}  // namespace tmx::data
