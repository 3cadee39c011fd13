#include "recipes/data/mixture.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "recipes/data/loader.h"

namespace tmx::data {
namespace {

// One dataset of the mixture: where its current pass is.
struct Source {
  int64_t size = 0;
  int64_t pass = 0;
  int64_t position = 0;
  std::vector<int64_t> order;  // the pass's order when shuffled; empty otherwise
  bool exhausted = false;      // found at its end at least once
};

void StartPass(Source& s, size_t dataset, const MixtureOptions& options) {
  s.position = 0;
  if (!options.shuffle) return;
  s.order = SeededPermutation(s.size, options.seed + 1000003 * static_cast<uint64_t>(dataset) +
                                          static_cast<uint64_t>(s.pass));
}

Status CheckMixture(const std::vector<int64_t>& sizes, const std::vector<double>& weights) {
  if (sizes.empty()) return Status::InvalidArgument("a mixture needs at least one dataset");
  if (sizes.size() != weights.size()) {
    return Status::InvalidArgument("a mixture of " + std::to_string(sizes.size()) + " datasets got " +
                                   std::to_string(weights.size()) + " weights; give each dataset one");
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1) return Status::InvalidArgument("dataset " + std::to_string(i) + " of the mixture has no sample");
    if (!(std::isfinite(weights[i]) && weights[i] > 0)) {
      return Status::InvalidArgument("dataset " + std::to_string(i) + " of the mixture has weight " +
                                     std::to_string(weights[i]) +
                                     "; weights must be positive (a dataset of weight 0 is never drawn)");
    }
  }
  return Status::OK();
}

}  // namespace

const std::vector<std::string>& StopCriteriaNames() {
  static const std::vector<std::string> names = {"CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED", "ALL_DATASETS_EXHAUSTED",
                                                 "FIRST_DATASET_EXHAUSTED"};
  return names;
}

StatusOr<StopCriteria> StopCriteriaNamed(const std::string& name) {
  const std::vector<std::string>& names = StopCriteriaNames();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    return Status::InvalidArgument("unknown stop criterion '" + name + "'; use CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED, "
                                   "ALL_DATASETS_EXHAUSTED or FIRST_DATASET_EXHAUSTED");
  }
  return static_cast<StopCriteria>(it - names.begin());
}

StatusOr<std::vector<MixedSample>> MixDatasets(const std::vector<int64_t>& sizes, const std::vector<double>& weights,
                                               const MixtureOptions& options) {
  TM_RETURN_IF_ERROR(CheckMixture(sizes, weights));
  std::vector<Source> sources(sizes.size());
  std::vector<double> cumulative;
  double total = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    sources[d].size = sizes[d];
    StartPass(sources[d], d, options);
    cumulative.push_back(total += weights[d]);
  }
  auto all_exhausted = [&] {
    return std::all_of(sources.begin(), sources.end(), [](const Source& s) { return s.exhausted; });
  };
  std::mt19937_64 rng(options.seed);
  std::vector<MixedSample> out;
  while (!all_exhausted()) {
    const double u = static_cast<double>(rng() >> 11) * 0x1p-53 * total;
    const size_t d = std::min<size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin(),
                                      sources.size() - 1);
    Source& s = sources[d];
    if (s.exhausted && options.stop == StopCriteria::kAllDatasetsExhausted) continue;
    if (s.position == s.size) {
      s.exhausted = true;
      if (options.stop == StopCriteria::kFirstDatasetExhausted) break;
      if (options.stop == StopCriteria::kAllDatasetsExhausted) continue;
      if (all_exhausted()) break;
      ++s.pass;
      StartPass(s, d, options);
    }
    out.push_back({static_cast<int64_t>(d), options.shuffle ? s.order[static_cast<size_t>(s.position)] : s.position});
    ++s.position;
  }
  return out;
}

}  // namespace tmx::data
