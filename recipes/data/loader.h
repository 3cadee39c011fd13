// DataLoader: seeded, reproducible batching of tokenized samples with padding collation. Works with the samples of
// any tokenizer (pad with its pad id: CollatePadId) and with packed samples (packing.h), whose per-token positions
// and document ids are batched alongside so attention can stay within each document; and with preference pairs
// (the DPO recipes), collated as torchtune's padded_collate_dpo.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "base/status.h"
#include "recipes/data/sample.h"
#include "recipes/data/tokenizers/byte.h"
#include "recipes/data/tokenizers/tokenizer.h"

namespace tmx::data {

struct DataLoaderOptions {
  // Samples per batch. Must be at least 1.
  int64_t batch_size = 8;

  // Shuffle the samples every epoch. The order of epoch e depends only on seed + e, and is the same on
  // every platform and standard library (Fisher-Yates over std::mt19937_64, no std::shuffle).
  bool shuffle = true;

  // Seed of the shuffle.
  uint64_t seed = 0;

  // Drop the last batch of an epoch when it has fewer than batch_size samples. When false, the last
  // batch is smaller instead.
  bool drop_last = false;

  // Token id that fills the padded positions of Batch::tokens (CollatePadId(tokenizer) for a real tokenizer).
  int64_t pad_id = ByteTokenizer::kPad;

  // Data-parallel ranks: the loader yields only shard `shard` of `num_shards`, as torch's DistributedSampler
  // does. Each epoch's order is padded to a multiple of num_shards by repeating its first samples, and shard r
  // takes positions r, r + num_shards, ...; so batch k of every shard together holds the samples of batch k of
  // one loader with batch_size x num_shards (when that batch is full). REQUIRES: 0 <= shard < num_shards.
  int64_t num_shards = 1;
  int64_t shard = 0;
};

// The id a batch of `tokenizer`'s samples is padded with: its pad id, or 0 when it has none (the labels of padding
// are kIgnoreIndex either way).
inline int64_t CollatePadId(const Tokenizer& tokenizer) {
  return tokenizer.pad_id() == kNoId ? 0 : tokenizer.pad_id();
}

// One collated batch, padded on the right to the longest sample in it.
struct Batch {
  at::Tensor tokens;             // [B, T] int64 on the CPU, padded with DataLoaderOptions::pad_id
  at::Tensor labels;             // [B, T] int64 on the CPU, padded with kIgnoreIndex
  int64_t num_tokens = 0;        // positions that are not padding
  std::vector<int64_t> indices;  // the samples (indices into the loader's samples) in the batch, by row
  // Packed samples only (undefined tensors otherwise), [B, T] int64: Sample::input_pos (0 where a row is padded)
  // and Sample::document_ids (-1 where a row is padded).
  at::Tensor input_pos;
  at::Tensor document_ids;
  // Preference batches only (CollatePreference): the pairs in the batch; rows 0..pairs-1 are their chosen
  // responses and rows pairs..2*pairs-1 their rejected ones, in the same order. 0 for other batches.
  int64_t pairs = 0;
};

// Pads `samples` (in this order) into one Batch; `indices` is copied into the batch as is.
// REQUIRES: samples non-empty; each sample's tokens and labels have the same length; all samples packed or none.
Batch Collate(const std::vector<const Sample*>& samples, const std::vector<int64_t>& indices, int64_t pad_id);

// Pads the chosen responses of `pairs` and then their rejected ones (in this order) together into one Batch of
// 2 x pairs rows, as torchtune's padded_collate_dpo: tokens padded with `pad_id`, labels with kIgnoreIndex
// (prompts stay masked as the dataset masked them); Batch::pairs is set. REQUIRES: pairs non-empty; each
// response's tokens and labels have the same length; none is packed.
Batch CollatePreference(const std::vector<const PreferenceSample*>& pairs, const std::vector<int64_t>& indices,
                        int64_t pad_id);

// Owns its samples (or preference pairs). Not thread-safe: SetEpoch and BatchAtStep change which order GetBatch reads.
class DataLoader {
 public:
  // InvalidArgument when batch_size < 1, `samples` is empty, a sample is empty or its tokens and labels
  // differ in length, packed and unpacked samples are mixed, a packed sample's positions or document ids differ
  // in length from its tokens, or drop_last leaves no batch at all.
  static StatusOr<DataLoader> Create(std::vector<Sample> samples, const DataLoaderOptions& options);
  // A loader of preference pairs: the same order, sharding and batch counts, a pair counting as one sample;
  // batches come from CollatePreference. InvalidArgument as above for an empty or mismatched response (naming
  // the pair and which), and for a packed one.
  static StatusOr<DataLoader> CreatePreference(std::vector<PreferenceSample> pairs, const DataLoaderOptions& options);

  // Batches per epoch (of this shard).
  int64_t size() const { return num_batches_; }
  // Samples, or pairs for a preference loader.
  int64_t num_samples() const { return preference() ? static_cast<int64_t>(pairs_.size()) : static_cast<int64_t>(samples_.size()); }
  bool preference() const { return !pairs_.empty(); }
  const DataLoaderOptions& options() const { return options_; }

  // Selects the sample order of `epoch` (epoch 0 is selected on creation).
  void SetEpoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  // Sample indices of the current epoch (this shard's), in the order batches take them.
  const std::vector<int64_t>& order() const { return order_; }

  // Sample `index` (Batch::indices names them). REQUIRES: not a preference loader, 0 <= index < num_samples().
  const Sample& sample(int64_t index) const { return samples_[static_cast<size_t>(index)]; }

  // Batch `index` of the current epoch. REQUIRES: 0 <= index < size()
  Batch GetBatch(int64_t index) const;

  // The batch a run sees at `global_step` (counted from 0 over all epochs): selects epoch
  // global_step / size() and returns its batch global_step % size(). Resuming a run at a step gives
  // the same batches as never stopping. REQUIRES: global_step >= 0
  Batch BatchAtStep(int64_t global_step);

 private:
  DataLoader(std::vector<Sample> samples, std::vector<PreferenceSample> pairs, const DataLoaderOptions& options);

  std::vector<Sample> samples_;          // empty for a preference loader
  std::vector<PreferenceSample> pairs_;  // empty otherwise
  DataLoaderOptions options_;
  int64_t num_batches_ = 0;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;
};

// The permutation of 0..n-1 that Fisher-Yates produces from std::mt19937_64(seed), drawing each index
// by rejection sampling so that the result is exactly reproducible everywhere.
std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed);

}  // namespace tmx::data
