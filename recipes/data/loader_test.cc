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

// A [rows, cols] int64 tensor of `values`.
torch::Tensor Grid(std::vector<int64_t> values, int64_t rows, int64_t cols) {
  return torch::tensor(values, torch::kLong).view({rows, cols});
}

// torchtune's padded_collate_dpo docstring example: chosen rows, then rejected rows, padded together.
TEST(PreferenceCollateTest, ChosenRowsThenRejectedRowsPaddedTogetherAsTorchtune) {
  const PreferenceSample a{{{1, 2, 3}, {6, 7, 8}}, {{4, 5}, {9, 10}}};
  const PreferenceSample b{{{11, 12}, {16, 17}}, {{13, 14, 15}, {18, 19, 20}}};
  Batch batch = CollatePreference({&a, &b}, {7, 3}, /*pad_id=*/0);
  EXPECT_EQ(batch.pairs, 2);
  EXPECT_TRUE(torch::equal(batch.tokens, Grid({1, 2, 3, 11, 12, 0, 4, 5, 0, 13, 14, 15}, 4, 3)));
  EXPECT_TRUE(torch::equal(batch.labels, Grid({6, 7, 8, 16, 17, kIgnoreIndex, 9, 10, kIgnoreIndex, 18, 19, 20}, 4, 3)));
  EXPECT_EQ(batch.num_tokens, 10);  // every response token, none of the padding
  EXPECT_EQ(batch.indices, (std::vector<int64_t>{7, 3}));
  EXPECT_FALSE(batch.input_pos.defined());
}

TEST(PreferenceCollateTest, MaskedPromptsStayMaskedAndPaddingUsesThePadId) {
  // A response whose prompt the dataset masked keeps those labels; padding takes pad_id and kIgnoreIndex.
  const PreferenceSample p{{{5, 6, 7, 8}, {kIgnoreIndex, kIgnoreIndex, 7, 8}}, {{5, 6, 9}, {kIgnoreIndex, kIgnoreIndex, 9}}};
  Batch batch = CollatePreference({&p}, {0}, /*pad_id=*/2);
  EXPECT_TRUE(torch::equal(batch.tokens, Grid({5, 6, 7, 8, 5, 6, 9, 2}, 2, 4)));
  EXPECT_TRUE(torch::equal(batch.labels, Grid({kIgnoreIndex, kIgnoreIndex, 7, 8, kIgnoreIndex, kIgnoreIndex, 9, kIgnoreIndex}, 2, 4)));
}

// Pair i: chosen i % 3 + 1 tokens equal to i, rejected i % 2 + 1 tokens equal to 100 + i.
std::vector<PreferenceSample> MakePairs(int64_t n) {
  std::vector<PreferenceSample> pairs;
  for (int64_t i = 0; i < n; ++i) {
    const size_t c = static_cast<size_t>(i % 3 + 1), r = static_cast<size_t>(i % 2 + 1);
    pairs.push_back({{std::vector<int64_t>(c, i), std::vector<int64_t>(c, i)},
                     {std::vector<int64_t>(r, 100 + i), std::vector<int64_t>(r, 100 + i)}});
  }
  return pairs;
}

TEST(PreferenceLoaderTest, OrdersAndShardsPairsLikeSamples) {
  DataLoaderOptions options;
  options.batch_size = 2;
  options.seed = 5;
  StatusOr<DataLoader> pairs = DataLoader::CreatePreference(MakePairs(10), options);
  ASSERT_TRUE(pairs.ok()) << pairs.status().ToString();
  StatusOr<DataLoader> samples = DataLoader::Create(MakeSamples(10), options);
  ASSERT_TRUE(samples.ok());
  EXPECT_TRUE(pairs->preference());
  EXPECT_EQ(pairs->num_samples(), 10);
  EXPECT_EQ(pairs->size(), 5);
  EXPECT_EQ(AllIndices(*pairs, 2), AllIndices(*samples, 2));  // the same order as a loader of as many samples
  Batch batch = pairs->GetBatch(1);
  ASSERT_EQ(batch.pairs, 2);
  ASSERT_EQ(batch.tokens.size(0), 4);
  for (int64_t k = 0; k < 2; ++k) {  // row k is pair k's chosen response, row 2 + k its rejected one
    EXPECT_EQ(batch.tokens[k][0].item<int64_t>(), batch.indices[static_cast<size_t>(k)]);
    EXPECT_EQ(batch.tokens[2 + k][0].item<int64_t>(), 100 + batch.indices[static_cast<size_t>(k)]);
  }
  options.num_shards = 2;
  options.shard = 1;
  StatusOr<DataLoader> shard = DataLoader::CreatePreference(MakePairs(10), options);
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ(shard->size(), 3);
  EXPECT_EQ(shard->GetBatch(0).pairs, 2);
}

TEST(PreferenceLoaderTest, RejectsAnEmptyOrMismatchedResponseNamingThePair) {
  std::vector<PreferenceSample> pairs = MakePairs(3);
  pairs[2].rejected.labels.pop_back();
  StatusOr<DataLoader> loader = DataLoader::CreatePreference(std::move(pairs), DataLoaderOptions{});
  ASSERT_FALSE(loader.ok());
  EXPECT_NE(loader.status().message().find("the rejected response of pair 2"), std::string::npos)
      << loader.status().ToString();
  EXPECT_FALSE(DataLoader::CreatePreference(std::vector<PreferenceSample>{}, DataLoaderOptions{}).ok());
}

}  // namespace
}  // namespace tmx::data
