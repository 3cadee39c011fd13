// A deterministic, seeded mutator for fuzzing text formats (YAML configs, overrides, JSON-lines journals).
//
// Small and dependency-free so that the fuzz test runs under g++ in CI; the same seed gives the same inputs
// on every machine (only the engine's raw output is used, never a library distribution).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tmx::fuzz {

class Mutator {
 public:
  // `dictionary`: tokens worth inserting whole (YAML and JSON syntax, anchors, interpolations, numbers at
  // the edge of their range).
  Mutator(uint64_t seed, std::vector<std::string> dictionary);

  // One to four random edits of `input` (bit flips, byte changes, token insertions, deletions, duplications,
  // repetitions, line swaps, splices with another corpus entry), the result cut to `max_size` bytes.
  std::string Mutate(const std::string& input, const std::vector<std::string>& corpus, size_t max_size);

  // A number in [0, n). REQUIRES: n > 0.
  size_t Below(size_t n) { return static_cast<size_t>(engine_() % n); }

 private:
  void MutateOnce(std::string* s, const std::vector<std::string>& corpus);

  std::mt19937_64 engine_;
  std::vector<std::string> dictionary_;
};

// Tokens for YAML configs and overrides, and for JSON journals.
std::vector<std::string> YamlDictionary();
std::vector<std::string> JsonDictionary();

}  // namespace tmx::fuzz
