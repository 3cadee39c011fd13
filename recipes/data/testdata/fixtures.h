// Test helpers: the committed fixtures of recipes/data/testdata (made by scripts/make_tokenizer_fixtures.py from
// the reference Python implementations) and the shipped samples of recipes/data/samples.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace tmx::test {

inline std::string TestDataPath(const std::string& name) {
  return std::string(TM_SOURCE_DIR) + "/recipes/data/testdata/" + name;
}

inline std::string SampleTokenizerPath(const std::string& name) {
  return std::string(TM_SOURCE_DIR) + "/recipes/data/samples/tokenizers/" + name;
}

inline std::string SampleDatasetPath(const std::string& name) {
  return std::string(TM_SOURCE_DIR) + "/recipes/data/samples/datasets/" + name;
}

// The parsed fixture file; fails the test (and returns null) when it cannot be read.
inline nlohmann::json LoadFixture(const std::string& name) {
  std::ifstream in(TestDataPath(name));
  EXPECT_TRUE(in.good()) << "missing fixture " << TestDataPath(name)
                         << "; regenerate it with scripts/make_tokenizer_fixtures.py";
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

inline void WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace tmx::test
