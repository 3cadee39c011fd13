#include "harness/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

namespace tmx {
namespace {

Config Load(const std::string& text) {
  StatusOr<Config> c = Config::FromString(text, "cfg.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Config();
}

const char* kBase =
    "output_dir: /tmp/run  # where outputs go\n"
    "model:\n"
    "  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n"
    "  lora_attn_modules: ['q_proj', 'v_proj']\n"
    "  lora_rank: 64\n"
    "metric_logger:\n"
    "  log_dir: ${output_dir}/logs\n"
    "batch_size: 4\n"
    "device: cuda\n";

TEST(ConfigTest, ParsesValuesWithPositions) {
  Config c = Load(kBase);
  EXPECT_EQ(c.Find("model.lora_rank").as<int>(), 64);
  EXPECT_EQ(c.OriginOf("model.lora_rank").ToString(), "cfg.yaml:5:14");
  EXPECT_EQ(c.OriginOf("batch_size").ToString(), "cfg.yaml:8:13");
  EXPECT_FALSE(c.Find("model.nope").IsDefined());
}

TEST(ConfigTest, MalformedYamlNamesFileLineAndColumn) {
  StatusOr<Config> c = Config::FromString("a: 1\nb: [1, 2\nc: 3\n", "bad.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().ExitCode(), 2);
  EXPECT_NE(c.status().message().find("bad.yaml:"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("malformed YAML"), std::string::npos);
}

TEST(ConfigTest, RejectsDuplicateKeysAndNonMappingTopLevel) {
  StatusOr<Config> dup = Config::FromString("a: 1\nb: 2\na: 3\n", "d.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(), "d.yaml:3:1: key 'a' appears twice; keep one of them");
  StatusOr<Config> list = Config::FromString("- a\n- b\n", "l.yaml");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("top level must be a mapping"), std::string::npos);
  StatusOr<Config> empty = Config::FromString("# only a comment\n", "e.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "e.yaml: the config is empty; it must be a mapping of keys to values");
}

TEST(ConfigTest, ASecondDocumentIsRefusedNamingFileAndLine) {
  // YAML::Load read the first document and ignored the rest: these lr and batch_size never applied.
  StatusOr<Config> two = Config::FromString("lr: 1\n---\nlr: 2\nbatch_size: 4\n", "two.yaml");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().ExitCode(), 2);
  EXPECT_NE(two.status().message().find("two.yaml:2:1: a second YAML document starts here, and only the first is "
                                        "read"),
            std::string::npos)
      << two.status().message();
  EXPECT_NE(two.status().message().find("fix: remove the document marker ('---' or '...')"), std::string::npos);
  for (const char* one : {"---\nlr: 1\n", "lr: 1\n...\n", "lr: 1\n# ---\n"}) {
    EXPECT_TRUE(Config::FromString(one, "one.yaml").ok()) << one;
  }
}

TEST(ConfigTest, MissingFileIsNotFound) {
  StatusOr<Config> c = Config::LoadFile("/nonexistent/x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(c.status().message(), "/nonexistent/x.yaml: no such file");
}

struct OverrideCase {
  std::string arg;
  std::string key;
  std::string expect_yaml;  // the emitted value at key
};

TEST(ConfigTest, EveryOverrideForm) {
  const OverrideCase cases[] = {
      {"batch_size=8", "batch_size", "8"},
      {"model.lora_rank=16", "model.lora_rank", "16"},
      {"optimizer.lr=3e-4", "optimizer.lr", "3e-4"},
      {"model.lora_attn_modules=[q_proj,k_proj,v_proj]", "model.lora_attn_modules", "[q_proj, k_proj, v_proj]"},
      {"seed=None", "seed", "~"},
      {"seed=null", "seed", "~"},
      {"compile=True", "compile", "True"},
      {"new.nested.key=x", "new.nested.key", "x"},
      {"output_dir=", "output_dir", "\"\""},
      {"device=cuda:1", "device", "cuda:1"},
  };
  for (const OverrideCase& c : cases) {
    Config config = Load(kBase);
    Status s = config.ApplyOverrides({c.arg});
    ASSERT_TRUE(s.ok()) << c.arg << ": " << s.ToString();
    YAML::Emitter e;
    e.SetSeqFormat(YAML::Flow);
    e << config.Find(c.key);
    EXPECT_EQ(std::string(e.c_str()), c.expect_yaml) << c.arg;
    EXPECT_EQ(config.OriginOf(c.key).ToString(), "override '" + c.arg + "'") << c.arg;
  }
}

TEST(ConfigTest, RemovesKeysButNotComponents) {
  Config c = Load(kBase);
  ASSERT_TRUE(c.ApplyOverrides({"~model.lora_rank"}).ok());
  EXPECT_FALSE(c.Find("model.lora_rank").IsDefined());
  Status s = c.ApplyOverrides({"~model"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "override '~model': 'model' is a component and cannot be removed; replace it with model=<component name>");
  Status missing = c.ApplyOverrides({"~batch_sise"});
  EXPECT_EQ(missing.message(), "override '~batch_sise': there is no key 'batch_sise' to remove; did you mean 'batch_size'?");
}

TEST(ConfigTest, ComponentOverrideReplacesComponentName) {
  Config c = Load(kBase);
  ASSERT_TRUE(c.ApplyOverrides({"model=tune_matrix.models.llama3_2.lora_llama3_2_3b"}).ok());
  EXPECT_EQ(c.Find("model._component_").Scalar(), "tune_matrix.models.llama3_2.lora_llama3_2_3b");
  EXPECT_EQ(c.Find("model.lora_rank").as<int>(), 64);  // the other keys stay
}

TEST(ConfigTest, BadOverridesAreErrorsAndLeaveConfigUnchanged) {
  struct Bad {
    std::string arg, message;
  } cases[] = {
      {"batch_size", "override 'batch_size': expected key=value (or ~key to remove a key), e.g. device=cpu"},
      {"a..b=1", "override 'a..b=1': 'a..b' is not a key path; use names joined by dots, e.g. model.lora_rank=16"},
      {"=3", "override '=3': '' is not a key path; use names joined by dots, e.g. model.lora_rank=16"},
      {"batch_size.x=1", "override 'batch_size.x=1': cannot set 'batch_size.x' because 'batch_size' is '16', not a mapping"},
      {"~seed=1", "override '~seed=1': ~key removes a key and takes no value"},
  };
  for (const Bad& b : cases) {
    Config c = Load(kBase);
    std::string before = c.ToYaml();
    Status s = c.ApplyOverrides({"batch_size=16", b.arg});
    ASSERT_FALSE(s.ok()) << b.arg;
    EXPECT_EQ(s.ExitCode(), 2);
    EXPECT_EQ(s.message(), b.message);
    EXPECT_EQ(c.ToYaml(), before) << "a failed override call must not change the config";
  }
  Config c = Load(kBase);
  Status s = c.ApplyOverrides({"model.lora_attn_modules=[q_proj,"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the value is not valid YAML"), std::string::npos) << s.message();
}

TEST(ConfigTest, Interpolation) {
  Config c = Load(kBase + std::string("copy_of_batch: ${batch_size}\nchain: ${metric_logger.log_dir}/x\n"));
  ASSERT_TRUE(c.ApplyOverrides({"output_dir=/data/out"}).ok());
  ASSERT_TRUE(c.ResolveInterpolations().ok());
  EXPECT_EQ(c.Find("metric_logger.log_dir").Scalar(), "/data/out/logs");
  EXPECT_EQ(c.Find("chain").Scalar(), "/data/out/logs/x");
  EXPECT_EQ(c.Find("copy_of_batch").as<int>(), 4);
}

TEST(ConfigTest, InterpolationErrors) {
  Config unknown = Load("a: ${output_dirr}/x\noutput_dir: /tmp\n");
  Status s = unknown.ResolveInterpolations();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "cfg.yaml:1:4: key 'a' refers to ${output_dirr}, which is not in the config; did you mean ${output_dir}?");
  Config cycle = Load("a: ${b}\nb: ${a}\n");
  Status c = cycle.ResolveInterpolations();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("refers to itself"), std::string::npos) << c.message();
}

TEST(ConfigTest, TypedGettersNameKeyAndOrigin) {
  Config c = Load(kBase);
  EXPECT_EQ(*c.GetInt("batch_size", 1), 4);
  EXPECT_EQ(*c.GetInt("missing", 7), 7);
  ASSERT_TRUE(c.ApplyOverrides({"batch_size=four"}).ok());
  StatusOr<int64_t> bad = c.GetInt("batch_size", 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "override 'batch_size=four': key 'batch_size': expected an integer, got 'four'");
}

// A section the file lacks, made by overrides of its keys, is placed on the command line, not in the file.
TEST(ConfigTest, ASectionMadeByOverridesIsPlacedOnTheCommandLine) {
  Config c = Load(kBase);
  ASSERT_TRUE(c.ApplyOverrides({"profiler.enabled=True", "profiler.wait_steps=1"}).ok());
  EXPECT_EQ(c.OriginOf("profiler").override_arg, "profiler.enabled=True");
  EXPECT_EQ(c.OriginOf("profiler.wait_steps").override_arg, "profiler.wait_steps=1");
  EXPECT_EQ(c.OriginOf("batch_size").override_arg, "");  // from the file
}

TEST(ConfigTest, CopiesAreDeep) {
  Config a = Load(kBase);
  Config b = a;
  ASSERT_TRUE(b.ApplyOverrides({"batch_size=99"}).ok());
  EXPECT_EQ(a.Find("batch_size").as<int>(), 4);
  EXPECT_EQ(b.Find("batch_size").as<int>(), 99);
}


// Hostile YAML must give one InvalidArgument (exit 2) naming the place and the limit, quickly, without
// crashing: yaml-cpp builds a graph, and an unbounded walk of it overflows the stack or runs for ever.
using ::testing::HasSubstr;

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Nine levels of ten aliases each: 10^9 values once expanded.
std::string BillionLaughs() {
  std::string text = "l0: &a0 [lol]\n";
  for (int i = 1; i < 10; ++i) {
    std::string ref = "*a" + std::to_string(i - 1);
    text += "l" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + ref + Repeat(", " + ref, 9) + "]\n";
  }
  return text;
}

void ExpectRefusedQuickly(const std::function<Status()>& load, const std::string& where, const std::string& what) {
  auto start = std::chrono::steady_clock::now();
  Status s = load();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(s.ok()) << where;
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_THAT(s.message(), HasSubstr(where));
  EXPECT_THAT(s.message(), HasSubstr(what));
  EXPECT_LT(seconds, 5.0) << s.message();
}

TEST(ConfigBoundsTest, SelfReferencingAliasInFileIsRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"a: &x [*x]\n", "cfg.yaml:1:8"},
      {"a: &x\n  b: *x\n", "cfg.yaml:2:6"},
      {"a: &x {b: [1, *x]}\n", "cfg.yaml:1:15"},
  };
  for (const auto& [text, where] : cases) {
    ExpectRefusedQuickly([&] { return Config::FromString(text, "cfg.yaml").status(); }, where,
                         "alias *x refers to the node &x that contains it");
  }
}

TEST(ConfigBoundsTest, SelfReferencingAliasInOverrideIsRefusedAndConfigUnchanged) {
  Config c = Load(kBase);
  std::string before = c.ToYaml();
  ExpectRefusedQuickly([&] { return c.ApplyOverrides({"batch_size=&x [1, *x]"}); },
                       "override 'batch_size=&x [1, *x]' at column 19", "refers to the node &x that contains it");
  EXPECT_EQ(c.ToYaml(), before);
  EXPECT_TRUE(c.ResolveInterpolations().ok());
}

TEST(ConfigBoundsTest, AliasBombIsRefusedInFileAndOverride) {
  ExpectRefusedQuickly([&] { return Config::FromString(BillionLaughs(), "bomb.yaml").status(); }, "bomb.yaml:",
                       "more than 100000 values once its aliases are expanded");
  Config c = Load(kBase);
  std::string flow = "[&a0 [lol" + Repeat(", lol", 9) + "]";  // the same bomb as one flow list
  for (int i = 1; i < 9; ++i) {
    std::string ref = "*a" + std::to_string(i - 1);
    flow += ", &a" + std::to_string(i) + " [" + ref + Repeat(", " + ref, 9) + "]";
  }
  flow += "]";
  ExpectRefusedQuickly([&] { return c.ApplyOverrides({"x=" + flow}); }, "override 'x=",
                       "more than 100000 values");
}

TEST(ConfigBoundsTest, DeepNestingAndHugeDocumentsAreRefused) {
  ExpectRefusedQuickly(
      [&] { return Config::FromString("a: " + Repeat("[", 200) + Repeat("]", 200) + "\n", "deep.yaml").status(); },
      "deep.yaml:1:", "nest more than 64 levels deep");
  ExpectRefusedQuickly(
      [&] { return Config::FromString("a: [" + Repeat("1, ", 100001) + "1]\n", "big.yaml").status(); },
      "big.yaml:1:", "more than 100000 values");
  Config c = Load(kBase);
  ExpectRefusedQuickly([&] { return c.ApplyOverrides({Repeat("a.", 100000) + "a=1"}); }, "override 'a.a.a",
                       "more than 64 parts");
}

TEST(ConfigBoundsTest, AnOverrideChangesOnlyItsPlaceNotTheAliasesOfIt) {
  Config c = Load("a: &x {b: 1}\nc: *x\n");
  ASSERT_TRUE(c.ApplyOverrides({"a.b=2"}).ok());
  EXPECT_EQ(c.Find("a.b").as<int>(), 2);
  EXPECT_EQ(c.Find("c.b").as<int>(), 1);
  EXPECT_EQ(c.OriginOf("c.b").ToString(), "cfg.yaml:1:11");
}

TEST(ConfigBoundsTest, InterpolationFanOutIsRefused) {
  // Ten references per level, ten levels: 10^10 bytes.
  std::string strings = "k0: xxxxxxxxxx\n";
  // Two whole references per level, forty levels: 2^40 values.
  std::string maps = "k0:\n  v: 1\n";
  for (int i = 1; i <= 40; ++i) {
    std::string prev = "${k" + std::to_string(i - 1) + "}";
    if (i <= 10) strings += "k" + std::to_string(i) + ": " + Repeat(prev, 10) + "\n";
    maps += "k" + std::to_string(i) + ":\n  a: " + prev + "\n  b: " + prev + "\n";
  }
  Config s = Load(strings);
  ExpectRefusedQuickly([&] { return s.ResolveInterpolations(); }, "cfg.yaml:", "more than 1048576 bytes");
  Config m = Load(maps);
  ExpectRefusedQuickly([&] { return m.ResolveInterpolations(); }, "cfg.yaml:", "more than 100000 values");
}

}  // namespace
}  // namespace tmx
