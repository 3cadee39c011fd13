// Splitting one device's matrix over n CI jobs (`tune-matrix run --shard i/n`): every job plans the same
// cells and keeps its share. The split is deterministic and balanced by expected durations, so n jobs
// finish at about the same time, and the union of the n shares is every cell exactly once.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "matrix/cell.h"

namespace tmx::matrix {

struct ShardSpec {
  int index = 1;  // 1-based
  int count = 1;
};

// "i/n" with 1 <= i <= n; InvalidArgument naming the text otherwise.
StatusOr<ShardSpec> ParseShard(const std::string& text);

struct ShardItem {
  CellKey key;
  double duration_s = 0;  // expected duration (recorded wall time, or an estimate)
};

// The shard (1-based) of each item, in the items' order. Longest expected duration first (ties by key),
// each to the shard with the least expected time so far (ties: fewer cells, then lower index): a greedy
// split whose longest shard is within one cell's duration of the ideal. Depends only on the keys and
// durations, not on their order.
std::vector<int> AssignShards(const std::vector<ShardItem>& items, int count);

}  // namespace tmx::matrix
