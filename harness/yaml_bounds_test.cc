#include "harness/yaml_bounds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tmx {
namespace {

using ::testing::HasSubstr;

std::string Where(const YAML::Mark& mark) {
  return "t.yaml:" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

Status Check(const std::string& text, const YamlLimits& limits = {}) { return CheckYamlBounds(text, Where, limits); }

TEST(YamlBoundsTest, AcceptsOrdinaryDocumentsAndSharedAnchors) {
  EXPECT_TRUE(Check("a: 1\nb: [1, 2, {c: d}]\n").ok());
  EXPECT_TRUE(Check("a: &x {b: 1}\nc: *x\nd: [*x, *x]\n").ok());
  EXPECT_TRUE(Check("a: &s hello\nb: *s\n").ok());
  EXPECT_TRUE(Check("a: [1, 2\n").ok()) << "malformed YAML is left to the caller";
}

TEST(YamlBoundsTest, RefusesAnAliasInsideItsOwnAnchor) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"a: &x [*x]\n", "t.yaml:1:8: alias *x refers to the node &x that contains it"},
      {"a: &loop\n  b:\n    c: *loop\n", "t.yaml:3:8: alias *loop refers to the node &loop that contains it"},
      {"&r {a: *r}\n", "t.yaml:1:8: alias *r refers to the node &r that contains it"},
  };
  for (const Case& c : cases) {
    Status s = Check(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(YamlBoundsTest, CountsAliasesExpanded) {
  YamlLimits limits;
  // The anchor holds 4 nodes (the list and 3 items); the document: the mapping, 2 keys, 4, and 4 again.
  limits.max_nodes = 11;
  EXPECT_TRUE(Check("a: &x [1, 2, 3]\nb: *x\n", limits).ok());
  limits.max_nodes = 10;
  Status s = Check("a: &x [1, 2, 3]\nb: *x\n", limits);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "t.yaml:2:4: the document holds more than 10 values once its aliases are expanded (the limit; each "
            "*alias counts its anchor's whole content again); fix: use fewer aliases or a smaller value");
}

TEST(YamlBoundsTest, CountsDepthThroughAliases) {
  YamlLimits limits;
  limits.max_depth = 3;
  EXPECT_TRUE(Check("a: [[1]]\n", limits).ok());            // map, list, list
  EXPECT_FALSE(Check("a: [[[1]]]\n", limits).ok());         // one more
  EXPECT_TRUE(Check("a: &x [1]\nb: [*x]\n", limits).ok());  // map, list, aliased list
  Status s = Check("a: &x [[1]]\nb: [*x]\n", limits);       // map, list, aliased list of a list
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "t.yaml:2:5: values nest more than 3 levels deep (the limit, aliases expanded); fix: flatten "
            "the nesting");
}

TEST(YamlBoundsTest, DeepNestingStopsBeforeTheParserRecursesFar) {
  std::string text = std::string(100000, '[') + std::string(100000, ']');
  Status s = Check(text);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("t.yaml:1:65: values nest more than 64 levels deep"));
}

TEST(YamlBoundsTest, EveryDocumentIsCheckedAndAStrayCommaIsNotAnEndlessRun) {
  EXPECT_TRUE(CheckYamlBoundsAllDocuments("a: 1\n---\nb: &x [*y]\n", Where).ok()) << "*y: unknown, malformed";
  Status loop = CheckYamlBoundsAllDocuments("a: &x 1\n---\nb: &x [*x]\n", Where);
  ASSERT_FALSE(loop.ok()) << "anchors are per document: the second &x is still open";
  EXPECT_THAT(loop.message(), HasSubstr("t.yaml:3:8: alias *x refers to the node &x that contains it"));
  Status second = CheckYamlBounds("a: 1\n---\nb: &x [*x]\n", Where);
  ASSERT_FALSE(second.ok()) << "a reader of one document refuses a second";
  EXPECT_THAT(second.message(), HasSubstr("a second YAML document starts here"));
  // yaml-cpp 0.7: YAML::LoadAll(",") returns no more, allocating empty documents until memory runs out.
  for (const char* text : {",", "a: 1\n...\n,\n", "# c\n, a: 1\n"}) {
    Status s = CheckYamlBoundsAllDocuments(text, Where);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_THAT(s.message(), HasSubstr("the text holds more than 100 YAML documents")) << text;
  }
  std::string many;
  for (int i = 0; i < 100; ++i) many += (i ? "---\na: " : "a: ") + std::to_string(i) + "\n";
  EXPECT_TRUE(CheckYamlBoundsAllDocuments(many, Where).ok());
  EXPECT_FALSE(CheckYamlBoundsAllDocuments(many + "---\nb: 1\n", Where).ok());
}

TEST(YamlBoundsTest, CopyTreeGivesEveryAliasItsOwnNodes) {
  YAML::Node shared = YAML::Load("a: &x {b: 1}\nc: *x\n");
  YAML::Node tree = CopyTree(shared);
  tree["a"]["b"] = 2;
  EXPECT_EQ(tree["c"]["b"].as<int>(), 1);
  EXPECT_EQ(shared["c"]["b"].as<int>(), 1);
  EXPECT_EQ(CountNodes(tree), 9);
  YAML::Node quoted = CopyTree(YAML::Load("a: '1'\nb: ~\n"));
  EXPECT_EQ(quoted["a"].Tag(), "!");
  EXPECT_TRUE(quoted["b"].IsNull());
}

}  // namespace
}  // namespace tmx
