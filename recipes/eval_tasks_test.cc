// The tasks against EleutherAI's lm-evaluation-harness 0.4.8 itself: recipes/testdata/eleuther_eval/expected.json
// (scripts/make_eval_fixtures.py) holds the harness's contexts, continuations, per-document scores and task scores
// for the shipped TruthfulQA sample. Here the same documents must give the same texts, and the harness's own
// log-likelihoods, scored here, the same scores (to 1e-12: the same formulas in double).
#include "recipes/eval_tasks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "recipes/data/samples.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

nlohmann::json Expected() {
  StatusOr<std::string> text = ReadFile(std::string(TM_SOURCE_DIR) + "/recipes/testdata/eleuther_eval/expected.json");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

std::string SamplePath() { return data::SamplesDir() + "/eval/truthfulqa_mc.json"; }

TEST(EvalTasksTest, TheFixtureComesFromTheHarnessVersionTorchtuneAccepts) {
  const nlohmann::json e = Expected();
  EXPECT_EQ(e["harness"], "lm-eval 0.4.8");  // torchtune's eleuther_eval accepts 0.4.5 to 0.4.8
  EXPECT_EQ(e["tasks"]["truthfulqa_mc2"]["docs"].size(), 40u);
}

TEST(EvalTasksTest, ContextsAndContinuationsAreTheHarnesss) {
  const nlohmann::json e = Expected();
  for (const char* name : {"truthfulqa_mc1", "truthfulqa_mc2"}) {
    const EvalTask* task = FindEvalTask(name);
    ASSERT_NE(task, nullptr) << name;
    StatusOr<std::vector<EvalDoc>> docs = LoadEvalDocs(*task, SamplePath());
    ASSERT_TRUE(docs.ok()) << docs.status().ToString();
    const nlohmann::json& expected = e["tasks"][name]["docs"];
    ASSERT_EQ(docs->size(), expected.size()) << name;
    for (size_t i = 0; i < docs->size(); ++i) {
      EXPECT_EQ((*docs)[i].context, expected[i]["context"].get<std::string>()) << name << " document " << i;
      EXPECT_EQ((*docs)[i].continuations, expected[i]["continuations"].get<std::vector<std::string>>())
          << name << " document " << i;
    }
  }
}

TEST(EvalTasksTest, TheHarnesssLoglikelihoodsScoreAsTheHarnessScoredThem) {
  const nlohmann::json e = Expected();
  for (const char* name : {"truthfulqa_mc1", "truthfulqa_mc2"}) {
    const EvalTask& task = *FindEvalTask(name);
    StatusOr<std::vector<EvalDoc>> docs = LoadEvalDocs(task, SamplePath());
    ASSERT_TRUE(docs.ok()) << docs.status().ToString();
    const nlohmann::json& expected = e["tasks"][name];
    std::vector<double> scores;
    for (size_t i = 0; i < docs->size(); ++i) {
      const auto lls = expected["docs"][i]["loglikelihoods"].get<std::vector<double>>();
      scores.push_back(ScoreEvalDoc(task, (*docs)[i], lls));
      const double want = expected["docs"][i]["acc"].get<double>();
      EXPECT_NEAR(scores.back(), want, 1e-12 * std::max(1.0, std::abs(want))) << name << " document " << i;
    }
    const EvalMetric m = MeanWithStderr(scores);
    EXPECT_NEAR(m.mean, expected["acc"].get<double>(), 1e-12) << name;
    EXPECT_NEAR(m.stderr_of_mean, expected["acc_stderr"].get<double>(), 1e-12) << name;
  }
}

TEST(EvalTasksTest, Mc1TakesTheFirstOfEqualBestAnswersAndMc2TheTrueShare) {
  const EvalTask& mc1 = *FindEvalTask("truthfulqa_mc1");
  const EvalTask& mc2 = *FindEvalTask("truthfulqa_mc2");
  EvalDoc doc;
  doc.continuations = {" a", " b", " c"};
  doc.true_count = 2;
  EXPECT_EQ(ScoreEvalDoc(mc1, doc, {-1, -1, -3}), 1.0);  // numpy's argmax: the first of equals
  EXPECT_EQ(ScoreEvalDoc(mc1, doc, {-2, -1, -3}), 0.0);
  EXPECT_NEAR(ScoreEvalDoc(mc2, doc, {std::log(0.2), std::log(0.3), std::log(0.5)}), 0.5, 1e-15);
  // Where the harness's unshifted exp underflows to 0/0, the share is still defined.
  EXPECT_NEAR(ScoreEvalDoc(mc2, doc, {-1000, -1000, -1000 - std::log(2.0)}), 0.8, 1e-12);
}

TEST(EvalTasksTest, LimitIsACountOrAFractionRoundedUp) {
  EXPECT_EQ(DocumentLimit(std::nullopt, 40), std::nullopt);
  EXPECT_EQ(DocumentLimit(8, 40), 8);
  EXPECT_EQ(DocumentLimit(0.1, 45), 5);  // ceil(4.5), the harness's rounding
  StatusOr<std::vector<EvalDoc>> docs = LoadEvalDocs(*FindEvalTask("truthfulqa_mc2"), SamplePath(), 3);
  ASSERT_TRUE(docs.ok());
  EXPECT_EQ(docs->size(), 3u);
}

TEST(EvalTasksTest, AMalformedDocumentIsNamedWithItsFileAndPlace) {
  test::ScratchDir dir("eval_tasks_test");
  const std::string path = dir.path() + "/truthfulqa_mc.json";
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {"{}", "not a JSON list of documents"},
      {R"([{"mc2_targets": {"choices": ["a"], "labels": [1]}}])", "document 0: no question text"},
      {R"([{"question": "q", "mc2_targets": {"choices": ["a", "b"], "labels": [1]}}])",
       "document 0: mc2_targets needs choices and labels, lists of one length"},
      {R"([{"question": "q", "mc2_targets": {"choices": ["a", "b"], "labels": [0, 1]}}])",
       "document 0: mc2_targets needs true answers (label 1) first, then a false one (label 0)"},
      {"[1,", "invalid JSON"},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(WriteFileAtomically(path, c.text).ok());
    Status s = LoadEvalDocs(*FindEvalTask("truthfulqa_mc2"), path).status();
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.text;
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
}

nlohmann::json ExpectedRolling() {
  StatusOr<std::string> text =
      ReadFile(std::string(TM_SOURCE_DIR) + "/recipes/testdata/eleuther_eval/expected_rolling.json");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

// The shipped pages (written in wikitext-2's raw format) detokenize, and count words and bytes, as the harness's
// wikitext task does (expected_rolling.json).
TEST(EvalTasksTest, WikitextPagesAreDetokenizedAndCountedAsTheHarnessDoes) {
  const nlohmann::json e = ExpectedRolling();
  EXPECT_EQ(e["harness"], "lm-eval 0.4.8");
  StatusOr<std::vector<EvalDoc>> docs =
      LoadEvalDocs(*FindEvalTask("wikitext"), data::SamplesDir() + "/eval/wikitext.json");
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  ASSERT_EQ(docs->size(), e["docs"].size());
  for (size_t i = 0; i < docs->size(); ++i) {
    EXPECT_EQ((*docs)[i].text, e["docs"][i]["text"].get<std::string>()) << "page " << i;
    EXPECT_EQ((*docs)[i].words, e["docs"][i]["words"].get<int64_t>()) << "page " << i;
    EXPECT_EQ((*docs)[i].bytes, e["docs"][i]["bytes"].get<int64_t>()) << "page " << i;
  }
  // Each rule on its own: number separators, punctuation, brackets (to the first closing one), headings, 's.
  EXPECT_EQ(WikitextDetokenize(" = = Song = = \n 3 @.@ 5 ( 1 @,@ 352 ft ) , \" Sorrel \" Reid 's N "),
            " == Song ==\n3.5 (1,352 ft), \"Sorrel\" Reid's 1 ");
  EXPECT_EQ(WikitextDetokenize("( a ( b ) c )"), "(a ( b) c )");
  EXPECT_EQ(SplitWordCount(" a  b\n"), 4);  // re.split: "", "a", "b", ""
  EXPECT_EQ(SplitWordCount("a"), 1);
}

TEST(EvalTasksTest, RollingWindowsAreTheHarnesssAndPredictEachTokenOnce) {
  const nlohmann::json e = ExpectedRolling();
  const int64_t prefix = e["prefix_token_id"].get<int64_t>();
  const int64_t length = e["max_length"].get<int64_t>();
  for (const nlohmann::json& doc : e["docs"]) {
    const auto tokens = doc["token_ids"].get<std::vector<int64_t>>();
    const auto windows = RollingWindows(tokens, prefix, length);
    ASSERT_EQ(windows.size(), doc["windows"].size());
    for (size_t w = 0; w < windows.size(); ++w) {
      EXPECT_EQ(windows[w].first, doc["windows"][w]["context"].get<std::vector<int64_t>>()) << "window " << w;
      EXPECT_EQ(windows[w].second, doc["windows"][w]["continuation"].get<std::vector<int64_t>>()) << "window " << w;
    }
  }
  EXPECT_TRUE(RollingWindows({}, 1, 4).empty());
  using Windows = std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>;
  EXPECT_EQ(RollingWindows({5, 6, 7}, 1, 4), (Windows{{{1}, {5, 6, 7}}}));
  EXPECT_EQ(RollingWindows({5, 6, 7, 8, 9}, 1, 4), (Windows{{{1}, {5, 6, 7, 8}}, {{5, 6, 7, 8}, {9}}}));
  EXPECT_EQ(RollingWindows({5, 6, 7}, 1, 1), (Windows{{{1}, {5}}, {{5}, {6}}, {{6}, {7}}}));
}

TEST(EvalTasksTest, PerplexitiesFromTheHarnesssLoglikelihoodsAreItsMetrics) {
  const nlohmann::json e = ExpectedRolling();
  StatusOr<std::vector<EvalDoc>> docs =
      LoadEvalDocs(*FindEvalTask("wikitext"), data::SamplesDir() + "/eval/wikitext.json");
  ASSERT_TRUE(docs.ok());
  std::vector<double> lls;
  for (const nlohmann::json& doc : e["docs"]) lls.push_back(doc["loglikelihood"].get<double>());
  const Perplexities p = PerplexitiesOf(lls, *docs);
  for (const auto& [have, key] : std::vector<std::pair<double, const char*>>{{p.word_perplexity, "word_perplexity"},
                                                                             {p.byte_perplexity, "byte_perplexity"},
                                                                             {p.bits_per_byte, "bits_per_byte"}}) {
    const double want = e[key].get<double>();
    EXPECT_NEAR(have, want, 1e-12 * want) << key;
  }
}

TEST(EvalTasksTest, EveryTaskIsFoundByItsHarnessName) {
  EXPECT_EQ(EvalTaskNames(), "truthfulqa_mc1, truthfulqa_mc2, wikitext");
  EXPECT_EQ(FindEvalTask("hellaswag"), nullptr);
  for (const EvalTask& t : EvalTasks()) EXPECT_EQ(FindEvalTask(t.name), &t);
}

}  // namespace
}  // namespace tmx::recipes
