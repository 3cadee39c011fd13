// The model_type records: names are unique, every preset's model_type has one, and each preset carries its
// type's fixed traits (the one place they are written).
#include "recipes/models/model_types.h"

#include <gtest/gtest.h>

#include <set>

#include "recipes/models/presets.h"

namespace tmx::models {
namespace {

TEST(ModelTypesTest, NamesAreUniqueAndListedInOrder) {
  std::set<std::string> names;
  for (const ModelTypeRecord& t : ModelTypes()) {
    EXPECT_TRUE(names.insert(t.name).second) << t.name << " has two records";
    EXPECT_FALSE(t.causal_lm.empty()) << t.name;
    EXPECT_EQ(FindModelType(t.name), &t);
  }
  EXPECT_EQ(ModelTypeNames(), "llama, mistral, qwen2, qwen3, gemma, gemma2, phi3, llama4_text");
  EXPECT_EQ(FindModelType("falcon"), nullptr);
  EXPECT_EQ(FindModelType("llama4"), nullptr);  // the multimodal wrapper: its text_config is llama4_text
  EXPECT_EQ(FindWrappedModelType("llama4"), FindModelType("llama4_text"));
  EXPECT_EQ(FindWrappedModelType("llama"), nullptr);
  EXPECT_EQ(FindModelType(""), nullptr);
}

TEST(ModelTypesTest, EveryPresetHasItsTypesFixedTraits) {
  for (const ModelPreset& p : ModelPresets()) {
    const ModelTypeRecord* type = FindModelType(p.hf_model_type);
    ASSERT_NE(type, nullptr) << p.builder << ": model_type '" << p.hf_model_type << "'";
    DecoderArgs expected = p.args;
    ApplyFixedTraits(*type, &expected);
    EXPECT_TRUE(DecoderArgsDifferences(p.args, expected).empty()) << p.builder;
  }
}

TEST(ModelTypesTest, FixedTraitsSetEveryColumnBothWays) {
  DecoderArgs a;
  ApplyFixedTraits(*FindModelType("gemma2"), &a);
  EXPECT_TRUE(a.scale_embeddings && a.norm_plus_one && a.post_norms && a.alternate_sliding_window);
  EXPECT_EQ(a.rope_layout, RopeLayout::kInterleaved);
  ApplyFixedTraits(*FindModelType("qwen2"), &a);
  EXPECT_FALSE(a.scale_embeddings || a.norm_plus_one || a.post_norms || a.alternate_sliding_window || a.qk_norm);
  EXPECT_TRUE(a.qkv_bias);
  EXPECT_EQ(a.rope_layout, RopeLayout::kHalf);
  ApplyFixedTraits(*FindModelType("qwen3"), &a);
  EXPECT_TRUE(a.qk_norm);
  EXPECT_FALSE(a.qkv_bias);
}

}  // namespace
}  // namespace tmx::models
