// The eleuther_eval recipe against EleutherAI's lm-evaluation-harness 0.4.8 (recipes/testdata/eleuther_eval,
// made by scripts/make_eval_fixtures.py with transformers 4.57.6 and torch 2.11.0): the harness's HFLM ran a tiny
// random Llama (the committed bf16 checkpoint, computed in float32) with transformers' Qwen2Tokenizer over the
// shipped byte-level BPE on the first 40 TruthfulQA questions. Here the recipe runs the same checkpoint through
// tune_matrix.models.tiny_llama3_2 and qwen2_tokenizer in float32 on the cpu, and must give the same token ids, each
// request's log-likelihood within 5e-4 (measured: 8.4e-5 at most; sums of about 25 float32 log-probabilities, of
// magnitude up to 600, summed in another order), the same greedy flags, and each task's score within 1e-4. Also: the
// schema (torchtune's evaluation configs validate unchanged; bad values are named with file:line:column and key),
// an unknown task, and `tune run` of the built-in tiny config end to end.
#include "recipes/eleuther_eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "harness/config_store.h"
#include "harness/run_summary.h"
#include "recipes/builtin.h"
#include "recipes/data/samples.h"
#include "recipes/eval_tasks.h"
#include "recipes/train_setup.h"
#include "tests/cli_exec.h"
#include "tests/in_process_run.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

const std::string kFixtures = std::string(TM_SOURCE_DIR) + "/recipes/testdata/eleuther_eval";

nlohmann::json Expected() {
  StatusOr<std::string> text = ReadFile(kFixtures + "/expected.json");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

// A config as torchtune's evaluation configs are written, over the fixture's model and tokenizer, in float32.
std::string FixtureConfig(const std::string& dir) {
  const std::string tokenizers = data::SamplesDir() + "/tokenizers";
  return "# tune run eleuther_eval --config this\n"
         "output_dir: " +
         dir +
         "/out\n"
         "model:\n  _component_: tune_matrix.models.tiny_llama3_2\n  vocab_size: 2000\n"
         "checkpointer:\n  _component_: torchtune.training.FullModelHFCheckpointer\n"
         "  checkpoint_dir: " +
         kFixtures +
         "/model\n  checkpoint_files: [model.safetensors]\n"
         "  output_dir: ${output_dir}\n  model_type: LLAMA3_2\n"
         "resume_from_checkpoint: False\n"
         "tokenizer:\n  _component_: torchtune.models.qwen2.qwen2_tokenizer\n"
         "  path: " +
         tokenizers + "/tiny_bpe_vocab.json\n  merges_file: " + tokenizers +
         "/tiny_bpe_merges.txt\n"
         "  max_seq_len: null\n"
         "apply_chat_template: False\n"
         "device: cpu\ndtype: fp32\nseed: 1234\n"
         "tasks: [\"truthfulqa_mc1\", \"truthfulqa_mc2\"]\nlimit: null\nmax_seq_length: 512\nbatch_size: 8\n"
         "enable_kv_cache: True\nquantizer: null\n";
}

class EleutherEvalTest : public ::testing::Test {
 protected:
  std::string WriteConfig(const std::string& text) {
    const std::string path = scratch_.path() + "/eval" + std::to_string(files_++) + ".yaml";
    EXPECT_TRUE(WriteFileAtomically(path, text).ok());
    return path;
  }
  // A config file, resolved for the recipe (its defaults applied), as `tune run eleuther_eval --config <path>`.
  StatusOr<Config> Load(const std::string& path, const std::vector<std::string>& overrides = {}) {
    StatusOr<LocatedConfig> located = LocateConfig(path, BuiltinRegistry());
    if (!located.ok()) return located.status();
    return LoadResolvedConfig(*located, overrides, BuiltinRegistry().FindRecipe("eleuther_eval"), &BuiltinRegistry());
  }
  // The recipe run on `path` in this process on the cpu, as tests/in_process_run.h runs a built-in config.
  InProcessRun Run(const std::string& path, const std::vector<std::string>& overrides = {}) {
    InProcessRun run;
    StatusOr<Config> config = Load(path, overrides);
    if (!config.ok()) {
      run.status = config.status();
      return run;
    }
    RunContext context;
    context.registry = &BuiltinRegistry();
    context.device = *ProbeDevice(*ParseDeviceSelector("cpu"));
    context.config_name = path;
    std::ostringstream out;
    context.out = &out;
    run.status = EleutherEvalRecipe().run(*config, context);
    run.printed = out.str();
    run.output_dir = config->Find("output_dir").Scalar();
    StatusOr<std::string> text = ReadFile(run.output_dir + "/summary.json");
    if (text.ok()) run.summary = nlohmann::json::parse(*text);
    return run;
  }
  std::vector<Problem> Problems(const std::string& path, const std::vector<std::string>& overrides = {}) {
    StatusOr<Config> c = Load(path, overrides);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return {};
    return ValidateConfig(*c, *BuiltinRegistry().FindRecipe("eleuther_eval"), BuiltinRegistry(), nullptr);
  }

  test::ScratchDir scratch_{"tm_eleuther_eval_test"};
  int files_ = 0;
};

TEST_F(EleutherEvalTest, TokenIdsAreTheHarnesss) {
  StatusOr<Config> config = Load(WriteConfig(FixtureConfig(scratch_.path())));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  StatusOr<ModelChoice> choice = ModelFromConfig(*config, BuiltinRegistry());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  std::vector<std::string> stand_ins;
  StatusOr<std::unique_ptr<data::ModelTokenizer>> tok = SetupTokenizer(*config, choice->args, false, &stand_ins);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const nlohmann::json e = Expected()["tasks"]["truthfulqa_mc2"];
  for (const nlohmann::json& doc : e["docs"]) {
    const auto continuations = doc["continuations"].get<std::vector<std::string>>();
    for (size_t i = 0; i < continuations.size(); ++i) {
      const LoglikelihoodRequest r = EncodePair(**tok, doc["context"], continuations[i], -1);
      EXPECT_EQ(static_cast<int64_t>(r.context.size()), doc["context_tokens"].get<int64_t>());
      EXPECT_EQ(static_cast<int64_t>(r.continuation.size()), doc["continuation_tokens"][i].get<int64_t>());
      const int64_t id = doc["doc_id"].get<int64_t>();
      if (id < static_cast<int64_t>(e["tokens"].size())) {
        EXPECT_EQ(r.context, e["tokens"][id]["context_ids"].get<std::vector<int64_t>>()) << "document " << id;
        EXPECT_EQ(r.continuation, e["tokens"][id]["continuation_ids"][i].get<std::vector<int64_t>>())
            << "document " << id << " choice " << i;
      }
    }
  }
}

TEST_F(EleutherEvalTest, LoglikelihoodsAndScoresAreTheHarnesss) {
  const InProcessRun run = Run(WriteConfig(FixtureConfig(scratch_.path())));
  ASSERT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
  StatusOr<std::string> text = ReadFile(run.output_dir + "/eval_results.json");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const nlohmann::json got = nlohmann::json::parse(*text);
  const nlohmann::json expected = Expected();
  double worst = 0;
  for (const char* name : {"truthfulqa_mc1", "truthfulqa_mc2"}) {
    const nlohmann::json& want = expected["tasks"][name];
    const nlohmann::json& have = got["tasks"][name];
    ASSERT_EQ(have["docs"].size(), want["docs"].size()) << name;
    for (size_t d = 0; d < want["docs"].size(); ++d) {
      const auto lls = have["docs"][d]["loglikelihoods"].get<std::vector<double>>();
      const auto want_lls = want["docs"][d]["loglikelihoods"].get<std::vector<double>>();
      ASSERT_EQ(lls.size(), want_lls.size());
      for (size_t i = 0; i < lls.size(); ++i) {
        EXPECT_NEAR(lls[i], want_lls[i], 5e-4) << name << " document " << d << " choice " << i;
        worst = std::max(worst, std::abs(lls[i] - want_lls[i]));
      }
      EXPECT_EQ(have["docs"][d]["is_greedy"], want["docs"][d]["is_greedy"]) << name << " document " << d;
      EXPECT_NEAR(have["docs"][d]["acc"].get<double>(), want["docs"][d]["acc"].get<double>(), 1e-4)
          << name << " document " << d;
    }
    EXPECT_NEAR(have["acc"].get<double>(), want["acc"].get<double>(), 1e-4) << name;
    EXPECT_NEAR(have["acc_stderr"].get<double>(), want["acc_stderr"].get<double>(), 1e-4) << name;
    EXPECT_NEAR(run.summary["scores"][std::string(name) + "/acc"].get<double>(), want["acc"].get<double>(), 1e-4);
  }
  std::cout << "largest log-likelihood difference from the harness: " << worst << "\n";
  EXPECT_TRUE(run.summary["ok"].get<bool>());
  EXPECT_EQ(run.summary["step_times_s"].size(), 65u);  // 520 requests, 8 a batch
  EXPECT_GT(run.summary["tokens_per_second"].get<double>(), 0);
  EXPECT_NE(run.printed.find("|truthfulqa_mc2|2|none|0|acc|↑|0.4389|±|0.0783|"), std::string::npos) << run.printed;
}

// wikitext (loglikelihood_rolling) on the shipped pages with llama2_tokenizer over m.model (the harness ran
// transformers' LlamaTokenizer, legacy, on it: the same ids) and windows of 64 tokens: the same windows, each page's
// summed log-likelihood within 1e-3 (measured: 8.3e-5; sums of about 300 float32 log-probabilities, about -5000
// in all) and the perplexities within 1e-5 of themselves.
TEST_F(EleutherEvalTest, RollingPerplexityIsTheHarnesss) {
  std::string text = FixtureConfig(scratch_.path());
  const std::string tokenizers = data::SamplesDir() + "/tokenizers";
  const size_t from = text.find("tokenizer:\n"), to = text.find("apply_chat_template");
  text.replace(from, to - from,
               "tokenizer:\n  _component_: torchtune.models.llama2.llama2_tokenizer\n  path: " + tokenizers +
                   "/m.model\n  max_seq_len: null\n");
  const InProcessRun run = Run(WriteConfig(text), {"tasks=[wikitext]", "max_seq_length=64"});
  ASSERT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
  StatusOr<std::string> results = ReadFile(run.output_dir + "/eval_results.json");
  ASSERT_TRUE(results.ok());
  const nlohmann::json have = nlohmann::json::parse(*results)["tasks"]["wikitext"];
  StatusOr<std::string> expected_text = ReadFile(kFixtures + "/expected_rolling.json");
  ASSERT_TRUE(expected_text.ok());
  const nlohmann::json want = nlohmann::json::parse(*expected_text);
  ASSERT_EQ(have["docs"].size(), want["docs"].size());
  double worst = 0;
  for (size_t d = 0; d < want["docs"].size(); ++d) {
    EXPECT_EQ(have["docs"][d]["windows"], want["docs"][d]["windows"].size()) << "page " << d;
    const double ll = have["docs"][d]["loglikelihood"].get<double>();
    EXPECT_NEAR(ll, want["docs"][d]["loglikelihood"].get<double>(), 1e-3) << "page " << d;
    worst = std::max(worst, std::abs(ll - want["docs"][d]["loglikelihood"].get<double>()));
  }
  std::cout << "largest page log-likelihood difference from the harness: " << worst << "\n";
  for (const char* metric : {"word_perplexity", "byte_perplexity", "bits_per_byte"}) {
    const double w = want[metric].get<double>();
    EXPECT_NEAR(have[metric].get<double>(), w, 1e-5 * w) << metric;
    EXPECT_NEAR(run.summary["scores"][std::string("wikitext/") + metric].get<double>(), w, 1e-5 * w) << metric;
  }
  EXPECT_NE(run.printed.find("|wikitext|2|none|0|bits_per_byte|↓|"), std::string::npos) << run.printed;
}

TEST_F(EleutherEvalTest, TorchtunesEvaluationConfigsValidateUnchanged) {
  // qwen3/evaluation.yaml as torchtune ships it, but for its paths; eleuther_evaluation.yaml's extra keys too.
  const std::string text =
      "# Config for EleutherEvalRecipe in eleuther_eval.py\n#    tune run eleuther_eval --config qwen3/evaluation\n"
      "output_dir: ./ # Not needed\nmodel:\n  _component_: torchtune.models.qwen3.qwen3_0_6b_instruct\n"
      "checkpointer:\n  _component_: torchtune.training.FullModelHFCheckpointer\n  checkpoint_dir: /tmp/Qwen3-0.6B\n"
      "  checkpoint_files: [\n    model.safetensors,\n  ]\n  output_dir: ${output_dir}\n  model_type: QWEN3\n"
      "tokenizer:\n  _component_: torchtune.models.qwen3.qwen3_tokenizer\n  path: /tmp/Qwen3-0.6B/vocab.json\n"
      "  merges_file: /tmp/Qwen3-0.6B/merges.txt\n  max_seq_len: null\napply_chat_template: False\n"
      "resume_from_checkpoint: False\ndevice: cuda\ndtype: bf16\nseed: 1234\ntasks: [\"truthfulqa_mc2\"]\n"
      "limit: null\nmax_seq_length: 4096\nbatch_size: 8\nenable_kv_cache: True\nquantizer: null\n";
  const std::string path = WriteConfig(text);
  for (const Problem& p : Problems(path)) ADD_FAILURE() << p.ToString();
}

TEST_F(EleutherEvalTest, BadValuesAreNamedWithFileLineAndKey) {
  const std::string path = WriteConfig(
      "# tune run eleuther_eval --config this\noutput_dir: /tmp/x\nmodel:\n  _component_: "
      "tune_matrix.models.tiny_llama3_2\n"
      "tokenizer:\n  _component_: tune_matrix.data.byte_tokenizer\ndevice: cpu\n"
      "tasks: [\"truthfulqa_mc2\", \"hellaswag\"]\nbatch_size: 0\nlimit: -1\napply_chat_template: True\n");
  std::map<std::string, std::string> found;
  for (const Problem& p : Problems(path)) found[p.key] = p.where + ": " + p.message;
  ASSERT_EQ(found.size(), 4u);
  EXPECT_NE(found["tasks"].find(path + ":8:"), std::string::npos) << found["tasks"];
  EXPECT_NE(found["tasks"].find("task 'hellaswag' is not one tune-matrix scores (it has: truthfulqa_mc1, "
                                "truthfulqa_mc2, wikitext); fix: choose among those"),
            std::string::npos)
      << found["tasks"];
  EXPECT_NE(found["batch_size"].find(path + ":9:"), std::string::npos) << found["batch_size"];
  EXPECT_NE(found["limit"].find(path + ":10:"), std::string::npos) << found["limit"];
  EXPECT_NE(found["apply_chat_template"].find("fix: set it to False"), std::string::npos)
      << found["apply_chat_template"];
}

TEST_F(EleutherEvalTest, AnIncludePathWithoutTheTasksDataIsNamedBeforeTheModelLoadsAndOneWithItIsRead) {
  const InProcessRun run =
      Run(WriteConfig(FixtureConfig(scratch_.path())), {"include_path=" + scratch_.path() + "/none"});
  EXPECT_EQ(run.status.code(), Status::Code::kNotFound) << run.status.ToString();
  EXPECT_NE(run.status.message().find("include_path: " + scratch_.path() +
                                      "/none/truthfulqa_mc.json does not exist; "
                                      "fix: put the harness's truthfulqa_mc1 data"),
            std::string::npos)
      << run.status.message();
  EXPECT_EQ(run.printed.find("Building"), std::string::npos) << run.printed;
  // A folder holding the file: its documents are scored instead of the shipped ones (here the first 3 of them).
  const std::string folder = scratch_.path() + "/split";
  ASSERT_TRUE(MakeDirs(folder).ok());
  StatusOr<std::string> sample = ReadFile(data::SamplesDir() + "/eval/truthfulqa_mc.json");
  ASSERT_TRUE(sample.ok());
  nlohmann::json docs = nlohmann::json::parse(*sample);
  docs.erase(docs.begin() + 3, docs.end());
  ASSERT_TRUE(WriteFileAtomically(folder + "/truthfulqa_mc.json", docs.dump()).ok());
  const InProcessRun three = Run(WriteConfig(FixtureConfig(scratch_.path())), {"include_path=" + folder});
  ASSERT_TRUE(three.status.ok()) << three.status.ToString() << three.printed;
  EXPECT_NE(
      three.printed.find("truthfulqa_mc2: 3 of the split's 817 documents, from " + folder + "/truthfulqa_mc.json"),
      std::string::npos)
      << three.printed;
}

TEST_F(EleutherEvalTest, TuneRunsTheTinyConfigAndPrintsTheScore) {
  const test::Result r = test::Exec({test::kTune, "run", "eleuther_eval", "--config", "tiny/eleuther_evaluation",
                                     "device=cpu", "output_dir=" + scratch_.path() + "/tiny"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("note: the weights are seed-initialised (checkpointer.checkpoint_dir is null), not "
                          "trained ones: the scores below are a random model's"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("truthfulqa_mc2: 8 of the split's 817 documents"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("|truthfulqa_mc2|2|none|0|acc|↑|"), std::string::npos) << r.output;
  StatusOr<RunSummary> summary = ReadRunSummary(scratch_.path() + "/tiny");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_TRUE(summary->ok);
  ASSERT_TRUE(summary->scores.count("truthfulqa_mc2/acc"));
  EXPECT_GT(summary->scores["truthfulqa_mc2/acc"], 0);
  EXPECT_LT(summary->scores["truthfulqa_mc2/acc"], 1);
  EXPECT_TRUE(summary->tokens_per_second.has_value());
}

}  // namespace
}  // namespace tmx::recipes
