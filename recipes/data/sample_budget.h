// The memory a dataset's samples may hold, counted before each allocation. A few bytes of input can stand for
// far more samples than the machine holds: random_tokens_dataset's num_samples x seq_len ids, a pack of a
// huge max_seq_len padded to its length for each document, a chat template's tokens around empty messages.
// Without a bound they ended in std::bad_alloc; with it, a refusal that names what asked for the memory and
// the bound. Torch-free.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "base/status.h"
#include "recipes/data/sample.h"

namespace tmx::data {

// The bytes a sample's vectors hold (tokens, labels and a pack's positions, document ids and lengths).
int64_t SampleBytes(const Sample& s);

// The product of `factors` (each >= 0), INT64_MAX where it would pass it, so a count from a config never
// overflows into a small or negative size.
int64_t SaturatingProduct(std::initializer_list<int64_t> factors);

class SampleBudget {
 public:
  // `max_bytes` > 0: the bound; 0: the machine's memory (MachineMemoryBytes: MemTotal or the cgroup's limit),
  // and no bound where that is unknown.
  explicit SampleBudget(int64_t max_bytes = 0);

  // Counts `bytes` more. InvalidArgument "<what>: ... over the <bound> the dataset's samples may hold (...);
  // fix: <fix>" when the total would pass the bound; nothing is counted then.
  Status Take(int64_t bytes, const std::string& what, const std::string& fix);

  int64_t used() const { return used_; }
  // What is left of the bound (INT64_MAX without one).
  int64_t left() const;

 private:
  int64_t max_bytes_;  // 0: no bound
  bool machine_;       // the bound is the machine's memory
  int64_t used_ = 0;
};

}  // namespace tmx::data
