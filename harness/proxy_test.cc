#include "harness/proxy.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

Registry Models() {
  Registry r;
  for (auto [name, layers] : {std::pair<const char*, int64_t>{"student_16", 16}, {"teacher_32", 32}, {"sized", 0}}) {
    ComponentSpec model;
    model.name = name;
    model.kind = "model";
    model.layers = layers;
    model.vocab_size = layers > 0 ? 1000 * layers : 0;
    EXPECT_TRUE(r.AddComponent(model).ok());
  }
  ComponentSpec adamw;
  adamw.name = "AdamW";
  adamw.kind = "optimizer";
  EXPECT_TRUE(r.AddComponent(adamw).ok());
  return r;
}

Config Load(const std::string& text) {
  StatusOr<Config> c = Config::FromString(text, "c.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(ProxyTest, ModelDepthsAreTheModelComponentsWithTheirLayers) {
  Config c = Load(
      "teacher_model:\n  _component_: teacher_32\n  num_layers: null\nmodel:\n  _component_: student_16\noptimizer:\n  _component_: AdamW\n"
      "other:\n  _component_: nothing_known\n");
  std::vector<ModelDepth> depths = ModelDepths(c, Models());
  ASSERT_EQ(depths.size(), 2u);
  EXPECT_EQ(depths[0].key, "model");
  EXPECT_EQ(depths[0].layers, 16);
  EXPECT_EQ(depths[1].key, "teacher_model");
  EXPECT_EQ(depths[1].layers, 32);
  // A model sized by its config says its depth in num_layers.
  std::vector<ModelDepth> sized = ModelDepths(Load("model:\n  _component_: sized\n  num_layers: 22\n"), Models());
  ASSERT_EQ(sized.size(), 1u);
  EXPECT_EQ(sized[0].layers, 22);
}

TEST(ProxyTest, CutsTheShallowestModelAndOthersInProportion) {
  Config c = Load("model:\n  _component_: student_16\nteacher_model:\n  _component_: teacher_32\n");
  StatusOr<ProxyCut> one = ProxyOf(c, Models(), 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->layers, 1);
  EXPECT_EQ(one->real_layers, 16);
  EXPECT_EQ(one->overrides, (std::vector<std::string>{"model.num_layers=1", "teacher_model.num_layers=2"}));
  EXPECT_EQ(one->description, "model.num_layers 1 of 16, teacher_model.num_layers 2 of 32");
  StatusOr<ProxyCut> two = ProxyOf(c, Models(), 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->overrides, (std::vector<std::string>{"model.num_layers=2", "teacher_model.num_layers=4"}));
  // The cut applies to the config: the overrides set the depths ModelDepths then reads.
  Config cut = c;
  ASSERT_TRUE(cut.ApplyOverrides(two->overrides).ok());
  EXPECT_EQ(ModelDepths(cut, Models())[1].layers, 4);
}

// Where even one layer does not fit, every model keeps its vocabulary divided (whole tiles of 64 ids), and the
// cut says so beside the layers.
TEST(ProxyTest, CutsTheVocabularyOfEveryModelWhenAsked) {
  EXPECT_EQ(CutVocabulary(128256, 8), 16064);
  EXPECT_EQ(CutVocabulary(128256, 1), 128256);
  EXPECT_EQ(CutVocabulary(100, 8), 64);
  Config c = Load("model:\n  _component_: student_16\nteacher_model:\n  _component_: teacher_32\n");
  StatusOr<ProxyCut> cut = ProxyOf(c, Models(), 1, 4);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(cut->vocab, 4032);
  EXPECT_EQ(cut->real_vocab, 16000);
  EXPECT_EQ(cut->overrides, (std::vector<std::string>{"model.num_layers=1", "model.vocab_size=4032",
                                                      "teacher_model.num_layers=2", "teacher_model.vocab_size=8000"}));
  EXPECT_EQ(cut->description,
            "model.num_layers 1 of 16, model.vocab_size 4032 of 16000, teacher_model.num_layers 2 of 32, "
            "teacher_model.vocab_size 8000 of 32000");
  StatusOr<ProxyCut> layers_only = ProxyOf(c, Models(), 1);
  ASSERT_TRUE(layers_only.ok());
  EXPECT_EQ(layers_only->vocab, 0);
  EXPECT_EQ(ProxyOf(Load("model:\n  _component_: sized\n  num_layers: 22\n"), Models(), 1, 2).status().message(),
            "model 'sized' has no known vocabulary to cut");
}

TEST(ProxyTest, SaysWhyNoProxyIsPossible) {
  EXPECT_EQ(ProxyOf(Load("optimizer:\n  _component_: AdamW\n"), Models(), 1).status().message(),
            "the config builds no model whose layers could be cut");
  EXPECT_EQ(ProxyOf(Load("model:\n  _component_: sized\n"), Models(), 1).status().message(),
            "model 'sized' has no known depth to cut");
  Config c = Load("model:\n  _component_: student_16\n");
  EXPECT_EQ(ProxyOf(c, Models(), 16).status().message(), "a proxy of 16 layers cuts nothing from 16");
  EXPECT_FALSE(ProxyOf(c, Models(), 0).ok());
}

}  // namespace
}  // namespace tmx
