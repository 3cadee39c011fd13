// A weighted mixture of datasets, as torchtune's dev/lora_finetune_distributed_multi_dataset recipe mixes its
// `datasets:` list (torchtune.data.get_multi_dataset over torchdata's MultiNodeWeightedSampler): each draw picks
// a dataset with probability weight / (sum of the weights), independently of the draws before, and takes that
// dataset's next sample. A dataset yields its samples in its own order (a seeded permutation per pass when
// shuffled, as its DistributedSampler's epochs); one found at its end is "exhausted", and the stop criterion says
// what happens then:
//
//   CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED (torchtune's default): it starts its next pass and the draw goes on, until
//       every dataset has been exhausted at least once;
//   ALL_DATASETS_EXHAUSTED: draws that pick it are skipped, until every dataset is: each sample once;
//   FIRST_DATASET_EXHAUSTED: the mixture ends with the first dataset found at its end.
//
// The draws come from std::mt19937_64(seed), each a 53-bit uniform number against the cumulative weights, so an
// order is the same on every platform (torchdata draws with torch.multinomial; the proportions are the same,
// not the sequence).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx::data {

enum class StopCriteria { kCycleUntilAllDatasetsExhausted, kAllDatasetsExhausted, kFirstDatasetExhausted };

// torchdata's names: "CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED", "ALL_DATASETS_EXHAUSTED", "FIRST_DATASET_EXHAUSTED".
const std::vector<std::string>& StopCriteriaNames();
// InvalidArgument naming the accepted names for any other.
StatusOr<StopCriteria> StopCriteriaNamed(const std::string& name);

struct MixedSample {
  int64_t dataset = 0;  // the index of its dataset in the mixture
  int64_t index = 0;    // the sample's index in that dataset
};

struct MixtureOptions {
  StopCriteria stop = StopCriteria::kCycleUntilAllDatasetsExhausted;
  uint64_t seed = 0;
  // Each pass over a dataset in a seeded order (seed + 1000003 x dataset + pass); off: 0, 1, 2, ...
  bool shuffle = true;
};

// The samples the mixture of datasets of `sizes` samples, drawn with `weights`, yields, in order. InvalidArgument
// when there is no dataset, the counts of sizes and weights differ, a dataset is empty, or a weight is not a
// positive, finite number (torchdata's rule: a zero weight would never draw its dataset, and its stop criterion
// might never be met).
StatusOr<std::vector<MixedSample>> MixDatasets(const std::vector<int64_t>& sizes, const std::vector<double>& weights,
                                               const MixtureOptions& options);

}  // namespace tmx::data
