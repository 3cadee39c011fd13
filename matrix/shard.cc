#include "matrix/shard.h"

#include <algorithm>
#include <numeric>

namespace tmx::matrix {

StatusOr<ShardSpec> ParseShard(const std::string& text) {
  ShardSpec spec;
  size_t slash = text.find('/');
  bool ok = slash != std::string::npos && slash > 0 && slash + 1 < text.size() &&
            text.find_first_not_of("0123456789/") == std::string::npos &&
            text.find('/', slash + 1) == std::string::npos;
  if (ok) {
    try {
      spec.index = std::stoi(text.substr(0, slash));
      spec.count = std::stoi(text.substr(slash + 1));
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || spec.count < 1 || spec.index < 1 || spec.index > spec.count) {
    return Status::InvalidArgument("--shard: '" + text +
                                   "' is not a shard; fix: write i/n with 1 <= i <= n, e.g. --shard 2/3");
  }
  return spec;
}

std::vector<int> AssignShards(const std::vector<ShardItem>& items, int count) {
  std::vector<int> shard(items.size(), 1);
  if (count <= 1) return shard;
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (items[a].duration_s != items[b].duration_s) return items[a].duration_s > items[b].duration_s;
    return items[a].key < items[b].key;
  });
  std::vector<double> load(static_cast<size_t>(count), 0);
  std::vector<size_t> cells(static_cast<size_t>(count), 0);
  for (size_t i : order) {
    size_t best = 0;
    for (size_t s = 1; s < load.size(); ++s) {
      if (load[s] < load[best] || (load[s] == load[best] && cells[s] < cells[best])) best = s;
    }
    load[best] += std::max(0.0, items[i].duration_s);
    ++cells[best];
    shard[i] = static_cast<int>(best) + 1;
  }
  return shard;
}

}  // namespace tmx::matrix
