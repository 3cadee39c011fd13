#include "harness/interpolate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tmx {
namespace {

using ::testing::HasSubstr;

std::string Where(const std::string& dotted) { return "t.yaml(" + dotted + ")"; }

Status Resolve(YAML::Node root, const YamlLimits& limits = {}) { return ResolveReferences(root, Where, limits); }

TEST(InterpolateTest, ResolvesStringsAndWholeValues) {
  YAML::Node root = YAML::Load("a: /x\nb: ${a}/y\nc: ${n}\nn: 4\nm: ${map}\nmap: {k: '${b}'}\nl: ['${a}', '${n}']\n");
  ASSERT_TRUE(Resolve(root).ok());
  EXPECT_EQ(root["b"].Scalar(), "/x/y");
  EXPECT_EQ(root["c"].as<int>(), 4);
  EXPECT_EQ(root["l"][0].Scalar(), "/x");
  // A mapping referenced before it is itself resolved is copied resolved.
  EXPECT_EQ(root["m"]["k"].Scalar(), "/x/y");
  root["map"]["k"] = "changed";
  EXPECT_EQ(root["m"]["k"].Scalar(), "/x/y") << "a whole reference is a copy";
}

TEST(InterpolateTest, CyclesThroughAMappingAreFound) {
  for (const char* text : {"a: {x: '${a}'}\n", "a: ${b}\nb: {c: '${a}'}\n", "l: ['${l}']\n"}) {
    Status s = Resolve(YAML::Load(text));
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_THAT(s.message(), HasSubstr("refers to itself")) << text;
  }
}

TEST(InterpolateTest, EachLimitIsNamed) {
  YamlLimits limits;
  limits.max_interpolated_bytes = 10;
  Status bytes = Resolve(YAML::Load("a: 123456\nb: ${a}${a}\n"), limits);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.message(),
            "t.yaml(b): key 'b' makes ${...} interpolation produce more than 10 bytes in all (the limit: keys that "
            "refer to keys that each refer to several others grow exponentially); fix: refer to fewer keys");

  limits = YamlLimits();
  limits.max_interpolation_refs = 2;
  Status refs = Resolve(YAML::Load("a: x\nb: ${a}${a}${a}\n"), limits);
  ASSERT_FALSE(refs.ok());
  EXPECT_THAT(refs.message(), HasSubstr("key 'b' makes the config substitute more than 2 ${...} references"));

  limits = YamlLimits();
  limits.max_nodes = 5;
  Status nodes = Resolve(YAML::Load("a: {x: 1, y: 2}\nb: ${a}\nc: ${a}\n"), limits);
  ASSERT_FALSE(nodes.ok());
  EXPECT_THAT(nodes.message(), HasSubstr("t.yaml(c): key 'c' makes ${...} references copy more than 5 values"));

  limits = YamlLimits();
  limits.max_reference_chain = 3;
  EXPECT_TRUE(Resolve(YAML::Load("a: ${b}\nb: ${c}\nc: ${d}\nd: 1\n"), limits).ok());
  Status chain = Resolve(YAML::Load("a: ${b}\nb: ${c}\nc: ${d}\nd: ${e}\ne: 1\n"), limits);
  ASSERT_FALSE(chain.ok());
  EXPECT_THAT(chain.message(), HasSubstr("t.yaml(d): key 'd' is reached through a chain of more than 3"));
}

TEST(InterpolateTest, ALongChainStopsAtTheLimitInsteadOfOverflowingTheStack) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "k" + std::to_string(i) + ": ${k" + std::to_string(i + 1) + "}\n";
  text += "k2000: end\n";
  Status s = Resolve(YAML::Load(text));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("chain of more than 64"));
}

}  // namespace
}  // namespace tmx
