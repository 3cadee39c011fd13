// WordCache: the ids of pre-tokenized pieces already encoded, shared by the BPE tokenizers (torchtune keeps an
// lru_cache of the same for Qwen2). Thread-safe; bounded: cleared when it reaches its limit.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tmx::data {

class WordCache {
 public:
  explicit WordCache(size_t limit = 1 << 16) : limit_(limit) {}
  WordCache(const WordCache&) = delete;
  WordCache& operator=(const WordCache&) = delete;

  // Appends the ids of `word` to *ids when cached.
  bool Lookup(std::string_view word, std::vector<int64_t>* ids) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(std::string(word));
    if (it == map_.end()) return false;
    ids->insert(ids->end(), it->second.begin(), it->second.end());
    return true;
  }

  void Insert(std::string_view word, std::vector<int64_t> ids) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (map_.size() >= limit_) map_.clear();
    map_.emplace(std::string(word), std::move(ids));
  }

 private:
  size_t limit_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> map_;
};

}  // namespace tmx::data
