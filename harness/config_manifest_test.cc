#include "harness/config_manifest.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(ConfigManifestTest, ParsesNamesRecipesAndSources) {
  StatusOr<std::vector<ManifestEntry>> m = ParseConfigManifest(
      "# a comment\n"
      "\n"
      "llama3_2/1B_lora   lora_finetune_distributed   torchtune   # trailing comment\n"
      "mine/renamed       full_finetune_single_device torchtune:llama3_2/1B_full_single_device\n"
      "tiny/qwen3_full_single_device full_finetune_single_device tiny:qwen3\n"
      "tiny/full_single_device full_finetune_single_device hand\n",
      "MANIFEST");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 4u);
  EXPECT_EQ((*m)[0].name, "llama3_2/1B_lora");
  EXPECT_EQ((*m)[0].recipe, "lora_finetune_distributed");
  EXPECT_EQ((*m)[0].source, ManifestEntry::Source::kTorchtune);
  EXPECT_EQ((*m)[0].torchtune_name, "llama3_2/1B_lora");
  EXPECT_EQ((*m)[0].line, 3);
  EXPECT_EQ((*m)[1].torchtune_name, "llama3_2/1B_full_single_device");
  EXPECT_EQ((*m)[2].source, ManifestEntry::Source::kTiny);
  EXPECT_EQ((*m)[2].tiny_family, "qwen3");
  EXPECT_EQ((*m)[3].source, ManifestEntry::Source::kHand);
  EXPECT_EQ(ManifestConfigsOf(*m, "full_finetune_single_device"),
            (std::vector<std::string>{"mine/renamed", "tiny/qwen3_full_single_device", "tiny/full_single_device"}));
  EXPECT_TRUE(ManifestConfigsOf(*m, "no_such_recipe").empty());
}

TEST(ConfigManifestTest, ErrorsNameTheFileLineAndProblem) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"a/b r\n", "M:1: expected 3 columns (name recipe source), found 2"},
      {"\na/b r torchtune extra\n", "M:2: expected 3 columns (name recipe source), found 4"},
      {"a/b r pypi\n", "M:1: unknown source 'pypi' for 'a/b'; use torchtune, torchtune:NAME, tiny:FAMILY or hand"},
      {"a/b r tiny:\n", "M:1: unknown source 'tiny:' for 'a/b'"},
      {"../etc/passwd r hand\n", "M:1: '../etc/passwd' is not a config name"},
      {"/abs r hand\n", "M:1: '/abs' is not a config name"},
      {"a/ r hand\n", "M:1: 'a/' is not a config name"},
      {"a/b r hand\nx y hand\na/b s hand\n", "M:3: 'a/b' is listed twice; keep one line"},
  };
  for (const Case& c : cases) {
    StatusOr<std::vector<ManifestEntry>> m = ParseConfigManifest(c.text, "M");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(m.status().message().rfind(c.message, 0), 0u) << m.status().message() << "\nexpected: " << c.message;
  }
}

TEST(ConfigManifestTest, TheBuiltInManifestParses) {
  const std::vector<ManifestEntry>& m = BuiltinConfigManifest();
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m.front().name, "llama2/7B_full_low_memory");
}

}  // namespace
}  // namespace tmx
