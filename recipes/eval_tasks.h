// The evaluation tasks the eleuther_eval recipe runs, as EleutherAI's lm-evaluation-harness (0.4.8) defines them:
// each document becomes a context and one continuation per answer choice, every continuation is scored by its
// log-likelihood after the context, and the document's score comes from those log-likelihoods.
//
//   truthfulqa_mc1  TruthfulQA's single-true multiple choice: 1 when the first (true) answer has the highest
//                   log-likelihood (the first of equal ones, numpy's argmax), else 0.
//   truthfulqa_mc2  TruthfulQA's multi-true multiple choice: the probability mass of the true answers,
//                   exp(ll) of each normalised over all answers (the harness's process_results_mc2).
//   wikitext        loglikelihood_rolling over whole documents: each page, detokenized as the harness's
//                   wikitext_detokenizer does, is scored in disjoint windows of the model's length (RollingWindows);
//                   word_perplexity, byte_perplexity and bits_per_byte from the summed log-likelihoods over the
//                   words and bytes of the original pages (the harness's weighted_perplexity and bits_per_byte).
//
// The context is the harness's six-question TruthfulQA preamble, then "\n\nQ: <question>\nA:"; each continuation is
// " " + the answer. A task's score is the mean over the documents and its stderr the sample standard deviation
// over sqrt(n) (the harness's mean_stderr). The documents come from a shipped sample of the validation split
// (SamplesDir()/eval/truthfulqa_mc.json: the first 40 of TruthfulQA's 817 questions, Apache-2.0, in the Hub
// dataset's layout), or from a file of the same name in a folder the run names (the whole split); wikitext's from
// SamplesDir()/eval/wikitext.json (4 pages written for tune-matrix in wikitext-2's raw format, so a run needs no
// network: the real split, EleutherAI/wikitext_document_level wikitext-2-raw-v1, is CC BY-SA and not shipped), or
// the same file name in that folder. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tmx::recipes {

enum class EvalScoring { kTrueFirst, kTrueMass, kPerplexity };  // truthfulqa_mc1's, truthfulqa_mc2's, wikitext's

struct EvalTask {
  std::string name;       // "truthfulqa_mc2", as the harness and torchtune's configs spell it
  std::string doc;        // one line
  std::string data_file;  // the file of its documents, under SamplesDir()/eval or a folder the run names
  int64_t full_size = 0;  // documents of the whole split (the shipped sample has fewer)
  EvalScoring scoring = EvalScoring::kTrueMass;
};

// Every task the recipe knows, in a fixed order.
const std::vector<EvalTask>& EvalTasks();
const EvalTask* FindEvalTask(const std::string& name);
// "truthfulqa_mc1, truthfulqa_mc2": for messages.
std::string EvalTaskNames();

// One document as the harness hands it to the model: the context, a continuation per choice, and which choices
// are true (`true_count` leading ones for mc2; the first for mc1).
struct EvalDoc {
  std::string context;
  std::vector<std::string> continuations;
  int64_t true_count = 1;
  // A rolling task's document: the text scored whole, and the words and UTF-8 bytes of the page it came from.
  std::string text;
  int64_t words = 0, bytes = 0;
};

bool IsRolling(const EvalTask& task);

// The task's documents from `path` (a JSON list of {question, mc1_targets: {choices, labels}, mc2_targets: ...}),
// the first `limit` of them when set. InvalidArgument naming the file and the document for a malformed one (no
// question, choices and labels of different lengths, no true or no false answer for mc2).
StatusOr<std::vector<EvalDoc>> LoadEvalDocs(const EvalTask& task, const std::string& path,
                                            std::optional<int64_t> limit = std::nullopt);

// The harness's TruthfulQA context for `question`.
std::string TruthfulQaContext(const std::string& question);

// The harness's wikitext_detokenizer: " @-@ " -> "-", " , " -> ", ", "= = Heading = =" -> "== Heading ==", ...
std::string WikitextDetokenize(const std::string& page);
// Python's len(re.split(r"\s+", text)): one more than the runs of whitespace (a leading or trailing run counts).
int64_t SplitWordCount(const std::string& text);

// The harness's rolling windows of `tokens` for a model of `max_length` positions (get_rolling_token_windows with
// context_len 1, made disjoint): each a context and the continuation it predicts; the first is [prefix_id] and up to
// max_length tokens, each next one predicts up to max_length more after the last max_length + 1 - n tokens before
// them. Every token is predicted once. None for no tokens. REQUIRES: max_length >= 1.
std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> RollingWindows(const std::vector<int64_t>& tokens,
                                                                                  int64_t prefix_id,
                                                                                  int64_t max_length);

// A rolling task's metrics from each document's summed log-likelihood, words and bytes.
struct Perplexities {
  double word_perplexity = 0, byte_perplexity = 0, bits_per_byte = 0;
};
Perplexities PerplexitiesOf(const std::vector<double>& loglikelihoods, const std::vector<EvalDoc>& docs);

// The harness's `limit`: none (every document), a fraction below 1 (of the documents, rounded up), or a count.
std::optional<int64_t> DocumentLimit(std::optional<double> limit, int64_t documents);

// The document's score from its continuations' log-likelihoods (one per continuation, in order).
double ScoreEvalDoc(const EvalTask& task, const EvalDoc& doc, const std::vector<double>& loglikelihoods);

// The mean of `scores` and its standard error (sample standard deviation / sqrt(n); 0 for fewer than 2).
struct EvalMetric {
  double mean = 0;
  double stderr_of_mean = 0;
};
EvalMetric MeanWithStderr(const std::vector<double>& scores);

}  // namespace tmx::recipes
