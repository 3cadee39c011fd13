#include "recipes/data/packing.h"

#include <algorithm>

#include "recipes/data/sample_budget.h"

namespace tmx::data {
namespace {

struct Pending {
  std::vector<int64_t> tokens, labels, input_pos, seq_lens;
};

Pending Slice(const Pending& p, size_t begin, size_t end, std::vector<int64_t> seq_lens) {
  auto cut = [&](const std::vector<int64_t>& v) {
    size_t b = std::min(begin, v.size()), e = std::min(end, v.size());
    return std::vector<int64_t>(v.begin() + static_cast<std::ptrdiff_t>(b), v.begin() + static_cast<std::ptrdiff_t>(e));
  };
  return Pending{cut(p.tokens), cut(p.labels), cut(p.input_pos), std::move(seq_lens)};
}

// torchtune's _pad_pack, plus document ids and the hole in the labels at document starts.
Sample Finish(Pending p, const PackOptions& options) {
  const int64_t max = options.max_seq_len;
  const int64_t n = static_cast<int64_t>(p.tokens.size());
  Sample s;
  s.document_ids.reserve(static_cast<size_t>(max));
  int64_t doc = 0;
  for (int64_t len : p.seq_lens) {
    for (int64_t k = 0; k < len && static_cast<int64_t>(s.document_ids.size()) < n; ++k) s.document_ids.push_back(doc);
    ++doc;
  }
  for (int64_t t = 1; t < n; ++t) {
    if (s.document_ids[static_cast<size_t>(t)] != s.document_ids[static_cast<size_t>(t - 1)]) {
      p.labels[static_cast<size_t>(t)] = kIgnoreIndex;
    }
  }
  s.tokens = std::move(p.tokens);
  s.labels = std::move(p.labels);
  s.input_pos = std::move(p.input_pos);
  s.seq_lens = std::move(p.seq_lens);
  const int64_t padding = max - n;
  int64_t next_pos = s.input_pos.empty() ? 0 : s.input_pos.back() + 1;
  for (int64_t k = 0; k < padding; ++k) {
    s.tokens.push_back(options.padding_idx);
    s.labels.push_back(kIgnoreIndex);
    s.input_pos.push_back(std::min(next_pos + k, max - 1));
    s.document_ids.push_back(doc);
  }
  if (padding > 0) s.seq_lens.push_back(padding);
  return s;
}

}  // namespace

StatusOr<std::vector<Sample>> PackSamples(const std::vector<Sample>& samples, const PackOptions& options) {
  const int64_t max = options.max_seq_len;
  if (max < 1) {
    return Status::InvalidArgument("packed: True needs the tokenizer's max_seq_len (got " + std::to_string(max) +
                                   "); fix: set tokenizer.max_seq_len");
  }
  std::vector<Sample> packs;
  auto full = [&] { return options.max_packs && static_cast<int64_t>(packs.size()) >= *options.max_packs; };
  // Each pack is padded to max_seq_len: a huge max_seq_len makes a few tokens a pack no machine holds.
  SampleBudget budget(options.max_bytes);
  auto room = [&] {
    return budget.Take(SaturatingProduct({max, 4 * static_cast<int64_t>(sizeof(int64_t))}),
                       "packing: pack " + std::to_string(packs.size() + 1) + " of max_seq_len=" + std::to_string(max) +
                           " tokens (tokens, labels, positions and document ids at 8 bytes each)",
                       "lower the tokenizer's max_seq_len, or set packed: False");
  };
  Pending current;
  size_t previous_boundary = 0;
  for (size_t i = 0; i < samples.size() && !full(); ++i) {
    const Sample& sample = samples[i];
    const int64_t len = static_cast<int64_t>(sample.tokens.size());
    if (len > max && !options.split_across_pack) {
      return Status::InvalidArgument("packing: sample " + std::to_string(i) + " has " + std::to_string(len) +
                                     " tokens, more than max_seq_len " + std::to_string(max) +
                                     "; fix: set split_across_pack: True or raise the tokenizer's max_seq_len");
    }
    current.tokens.insert(current.tokens.end(), sample.tokens.begin(), sample.tokens.end());
    current.labels.insert(current.labels.end(), sample.labels.begin(), sample.labels.end());
    for (int64_t k = 0; k < len; ++k) current.input_pos.push_back(k % max);
    current.seq_lens.push_back(len);
    while (static_cast<int64_t>(current.tokens.size()) > max && !full()) {
      std::vector<int64_t> done_lens(current.seq_lens.begin(), current.seq_lens.end() - 1);
      size_t boundary;
      int64_t next_len;
      if (options.split_across_pack) {
        boundary = static_cast<size_t>(max);
        int64_t used = 0;
        for (int64_t l : done_lens) used += l;
        if (max - used > 0) done_lens.push_back(max - used);
        next_len = static_cast<int64_t>(current.tokens.size()) - max;
      } else {
        boundary = previous_boundary;
        next_len = current.seq_lens.back();
      }
      TM_RETURN_IF_ERROR(room());
      packs.push_back(Finish(Slice(current, 0, boundary, done_lens), options));
      current = Slice(current, boundary, current.tokens.size(), {next_len});
    }
    previous_boundary = current.tokens.size();
  }
  if (!current.tokens.empty() && !full()) {
    TM_RETURN_IF_ERROR(room());
    packs.push_back(Finish(std::move(current), options));
  }
  return packs;
}

}  // namespace tmx::data
