// The fuzz targets as a short CTest test: a few seconds of seeded mutations per target (the same inputs on
// every run), so that CI catches a crash, a hang or a broken invariant on hostile configs, overrides,
// journals, write-back, safetensors headers, dataset files, tokenizer files and the Hub's listings. scripts/fuzz.sh
// runs the same loop for longer.
#include "fuzz/fuzzer.h"

#include <gtest/gtest.h>

#include "fuzz/mutator.h"
#include "fuzz/targets.h"

namespace tmx::fuzz {
namespace {

class FuzzTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzTest, SeededMutationsNeitherCrashNorHang) {
  for (FuzzTarget& target : AllTargets()) {
    if (target.name != GetParam()) continue;
    StatusOr<std::vector<std::string>> seeds = SeedCorpus(target.name, TM_SOURCE_DIR);
    ASSERT_TRUE(seeds.ok()) << seeds.status().ToString();
    ASSERT_FALSE(seeds->empty());
    FuzzOptions options;
    options.seed = 20261202;
    options.seconds = 4;  // nine targets: 36 s in all
    options.max_inputs = 200000;
    FuzzStats stats = Fuzz(target, *seeds, options);
    EXPECT_GE(stats.inputs, static_cast<int64_t>(seeds->size()));
    EXPECT_GT(stats.accepted, 0) << "no input was accepted: the seeds do not parse";
    std::printf("%s: %lld inputs, %lld accepted, %.1f s\n", target.name.c_str(), static_cast<long long>(stats.inputs),
                static_cast<long long>(stats.accepted), stats.seconds);
    return;
  }
  FAIL() << "no target " << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzTest,
                         ::testing::Values("config", "override", "journal", "writeback", "safetensors", "dataset",
                                           "tokenizer_json", "hub_listing", "sentencepiece_model"),
                         [](const auto& info) { return info.param; });

TEST(MutatorTest, TheSameSeedGivesTheSameInputs) {
  std::vector<std::string> corpus = {"a: 1\nb: [1, 2]\n", "c: ${a}\n"};
  Mutator a(7, YamlDictionary()), b(7, YamlDictionary()), c(8, YamlDictionary());
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    std::string x = a.Mutate(corpus[i % 2], corpus, 4096);
    EXPECT_EQ(x, b.Mutate(corpus[i % 2], corpus, 4096));
    EXPECT_LE(x.size(), 4096u);
    differs |= x != c.Mutate(corpus[i % 2], corpus, 4096);
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace tmx::fuzz
