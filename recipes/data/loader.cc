#include "recipes/data/loader.h"

#include <algorithm>
#include <random>

#include <torch/torch.h>

namespace tmx::data {
namespace {

// A uniform draw from [0, bound) that, unlike std::uniform_int_distribution, is the same on every
// standard library: reject the lowest 2^64 mod bound outputs, then reduce.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  uint64_t threshold = (0 - bound) % bound;  // == 2^64 mod bound
  while (true) {
    uint64_t x = rng();
    if (x >= threshold) return x % bound;
  }
}

}  // namespace

std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::mt19937_64 rng(seed);
  for (size_t i = order.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(UniformBelow(rng, i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

Batch Collate(const std::vector<const Sample*>& samples, const std::vector<int64_t>& indices, int64_t pad_id) {
  int64_t rows = static_cast<int64_t>(samples.size());
  int64_t cols = 0;
  for (const Sample* s : samples) cols = std::max<int64_t>(cols, static_cast<int64_t>(s->tokens.size()));
  Batch batch;
  batch.tokens = torch::full({rows, cols}, pad_id, torch::kLong);
  batch.labels = torch::full({rows, cols}, kIgnoreIndex, torch::kLong);
  batch.num_tokens = 0;
  const bool packed = samples.front()->packed();
  if (packed) {
    batch.input_pos = torch::zeros({rows, cols}, torch::kLong);
    batch.document_ids = torch::full({rows, cols}, -1, torch::kLong);
  }
  int64_t* tokens = batch.tokens.data_ptr<int64_t>();
  int64_t* labels = batch.labels.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const Sample& s = *samples[static_cast<size_t>(r)];
    std::copy(s.tokens.begin(), s.tokens.end(), tokens + r * cols);
    std::copy(s.labels.begin(), s.labels.end(), labels + r * cols);
    if (packed) {
      std::copy(s.input_pos.begin(), s.input_pos.end(), batch.input_pos.data_ptr<int64_t>() + r * cols);
      std::copy(s.document_ids.begin(), s.document_ids.end(), batch.document_ids.data_ptr<int64_t>() + r * cols);
    }
    batch.num_tokens += static_cast<int64_t>(s.tokens.size());
  }
  batch.indices = indices;
  return batch;
}

Batch CollatePreference(const std::vector<const PreferenceSample*>& pairs, const std::vector<int64_t>& indices,
                        int64_t pad_id) {
  std::vector<const Sample*> rows;
  rows.reserve(2 * pairs.size());
  for (const PreferenceSample* p : pairs) rows.push_back(&p->chosen);
  for (const PreferenceSample* p : pairs) rows.push_back(&p->rejected);
  Batch batch = Collate(rows, indices, pad_id);
  batch.pairs = static_cast<int64_t>(pairs.size());
  return batch;
}

namespace {

// Checks shared by both loaders: batch size, drop_last leaving a batch, the shard.
Status CheckLoaderOptions(int64_t n, const DataLoaderOptions& options) {
  if (options.drop_last && n < options.batch_size) {
    return Status::InvalidArgument("data loader: drop_last with batch_size " + std::to_string(options.batch_size) +
                                   " and only " + std::to_string(n) +
                                   " samples leaves no batch; fix: lower batch_size or set drop_last to false");
  }
  if (options.num_shards < 1 || options.shard < 0 || options.shard >= options.num_shards) {
    return Status::InvalidArgument("data loader: shard " + std::to_string(options.shard) + " of " +
                                   std::to_string(options.num_shards) + " does not exist");
  }
  return Status::OK();
}

}  // namespace

StatusOr<DataLoader> DataLoader::CreatePreference(std::vector<PreferenceSample> pairs, const DataLoaderOptions& options) {
  if (options.batch_size < 1) {
    return Status::InvalidArgument("data loader: batch_size is " + std::to_string(options.batch_size) +
                                   "; fix: set it to at least 1");
  }
  if (pairs.empty()) {
    return Status::InvalidArgument(
        "data loader: there are no preference pairs; fix: load a preference dataset with at least one record");
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    for (const auto& [side, s] : {std::make_pair("chosen", &pairs[i].chosen), std::make_pair("rejected", &pairs[i].rejected)}) {
      if (s->tokens.empty() || s->tokens.size() != s->labels.size()) {
        return Status::InvalidArgument("data loader: the " + std::string(side) + " response of pair " +
                                       std::to_string(i) + " has " + std::to_string(s->tokens.size()) +
                                       " tokens and " + std::to_string(s->labels.size()) +
                                       " labels; fix: give every response as many labels as tokens, at least one");
      }
      if (s->packed()) {
        return Status::InvalidArgument("data loader: the " + std::string(side) + " response of pair " +
                                       std::to_string(i) + " is packed; fix: preference pairs are never packed");
      }
    }
  }
  TM_RETURN_IF_ERROR(CheckLoaderOptions(static_cast<int64_t>(pairs.size()), options));
  return DataLoader({}, std::move(pairs), options);
}

StatusOr<DataLoader> DataLoader::Create(std::vector<Sample> samples, const DataLoaderOptions& options) {
  if (options.batch_size < 1) {
    return Status::InvalidArgument("data loader: batch_size is " + std::to_string(options.batch_size) +
                                   "; fix: set it to at least 1");
  }
  if (samples.empty()) {
    return Status::InvalidArgument("data loader: there are no samples; fix: load a dataset with at least one record");
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    if (s.tokens.empty() || s.tokens.size() != s.labels.size()) {
      return Status::InvalidArgument("data loader: sample " + std::to_string(i) + " has " +
                                     std::to_string(s.tokens.size()) + " tokens and " +
                                     std::to_string(s.labels.size()) +
                                     " labels; fix: give every sample as many labels as tokens, at least one");
    }
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    if (s.packed() != samples.front().packed()) {
      return Status::InvalidArgument("data loader: sample " + std::to_string(i) + " is " +
                                     (s.packed() ? "packed" : "not packed") + ", sample 0 is " +
                                     (samples.front().packed() ? "packed" : "not packed") + "; fix: pack all samples of a dataset or none");
    }
    if (s.packed() && (s.input_pos.size() != s.tokens.size() || s.document_ids.size() != s.tokens.size())) {
      return Status::InvalidArgument("data loader: packed sample " + std::to_string(i) + " has " +
                                     std::to_string(s.tokens.size()) + " tokens but " +
                                     std::to_string(s.input_pos.size()) + " positions and " +
                                     std::to_string(s.document_ids.size()) + " document ids; fix: make packed samples "
                                     "with PackSamples");
    }
  }
  TM_RETURN_IF_ERROR(CheckLoaderOptions(static_cast<int64_t>(samples.size()), options));
  return DataLoader(std::move(samples), {}, options);
}

DataLoader::DataLoader(std::vector<Sample> samples, std::vector<PreferenceSample> pairs,
                       const DataLoaderOptions& options)
    : samples_(std::move(samples)), pairs_(std::move(pairs)), options_(options) {
  // The samples of one shard: ceil(n / num_shards) (the order is padded to a multiple of num_shards).
  int64_t n = (num_samples() + options_.num_shards - 1) / options_.num_shards;
  num_batches_ = options_.drop_last ? n / options_.batch_size : (n + options_.batch_size - 1) / options_.batch_size;
  epoch_ = -1;
  SetEpoch(0);
}

void DataLoader::SetEpoch(int64_t epoch) {
  if (epoch == epoch_) return;
  epoch_ = epoch;
  int64_t n = num_samples();
  if (options_.shuffle) {
    order_ = SeededPermutation(n, options_.seed + static_cast<uint64_t>(epoch));
  } else {
    order_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = i;
  }
  if (options_.num_shards > 1) {
    const int64_t per_shard = (n + options_.num_shards - 1) / options_.num_shards;
    std::vector<int64_t> mine;
    mine.reserve(static_cast<size_t>(per_shard));
    for (int64_t k = 0; k < per_shard; ++k) {
      int64_t position = k * options_.num_shards + options_.shard;
      mine.push_back(order_[static_cast<size_t>(position % n)]);
    }
    order_ = std::move(mine);
  }
}

Batch DataLoader::GetBatch(int64_t index) const {
  int64_t n = static_cast<int64_t>(order_.size());
  int64_t begin = index * options_.batch_size;
  int64_t end = std::min(begin + options_.batch_size, n);
  std::vector<int64_t> indices;
  for (int64_t k = begin; k < end; ++k) indices.push_back(order_[static_cast<size_t>(k)]);
  if (preference()) {
    std::vector<const PreferenceSample*> picked;
    for (int64_t i : indices) picked.push_back(&pairs_[static_cast<size_t>(i)]);
    return CollatePreference(picked, indices, options_.pad_id);
  }
  std::vector<const Sample*> picked;
  for (int64_t i : indices) picked.push_back(&samples_[static_cast<size_t>(i)]);
  return Collate(picked, indices, options_.pad_id);
}

Batch DataLoader::BatchAtStep(int64_t global_step) {
  SetEpoch(global_step / num_batches_);
  return GetBatch(global_step % num_batches_);
}

}  // namespace tmx::data
