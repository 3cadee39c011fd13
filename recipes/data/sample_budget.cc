#include "recipes/data/sample_budget.h"

#include <algorithm>
#include <limits>

#include "base/process_info.h"
#include "base/text.h"

namespace tmx::data {

namespace {
constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
}  // namespace

int64_t SampleBytes(const Sample& s) {
  const size_t values = s.tokens.size() + s.labels.size() + s.input_pos.size() + s.document_ids.size() +
                        s.seq_lens.size();
  return static_cast<int64_t>(values * sizeof(int64_t));
}

int64_t SaturatingProduct(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f <= 0) return 0;
    if (product > kUnbounded / f) return kUnbounded;
    product *= f;
  }
  return product;
}

SampleBudget::SampleBudget(int64_t max_bytes) : max_bytes_(max_bytes), machine_(max_bytes <= 0) {
  if (machine_) max_bytes_ = std::max<int64_t>(0, MachineMemoryBytes());
}

int64_t SampleBudget::left() const { return max_bytes_ > 0 ? max_bytes_ - used_ : kUnbounded; }

Status SampleBudget::Take(int64_t bytes, const std::string& what, const std::string& fix) {
  if (bytes <= left()) {
    used_ += bytes;
    return Status::OK();
  }
  const std::string size = bytes == kUnbounded ? "more than 8 EiB" : FormatBytes(bytes);
  return Status::InvalidArgument(
      what + ": " + size + (used_ > 0 ? " beside the " + FormatBytes(used_) + " of samples before it" : "") +
      ", over the " + FormatBytes(max_bytes_) + " the dataset's samples may hold (" +
      (machine_ ? "this machine's memory" : "DatasetOptions::max_sample_bytes") + "); fix: " + fix);
}

}  // namespace tmx::data
