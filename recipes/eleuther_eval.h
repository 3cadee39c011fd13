// torchtune's `eleuther_eval`: a model scored on EleutherAI's lm-evaluation-harness tasks, computed here as the
// harness 0.4.8 computes them under torchtune's _LLMEvalWrapper, without the harness or the network.
//
// The model and its weights come as in generation (SetupModel: checkpointer.checkpoint_dir, or the seed's; with
// `quantizer` the linears are int4 before the 8da4w checkpoint loads). Each task (recipes/eval_tasks.h: `tasks`,
// the first `limit` documents) becomes log-likelihood requests, a context and a continuation each, tokenized as the
// harness's _encode_pair does with the config's tokenizer without BOS or EOS (torchtune's tok_encode); each request's
// input is the last max_seq_length + 1 tokens of context + continuation less the last, and its log-likelihood is
// the sum of the float32 log-softmax of the continuation's tokens (torchtune's decoder returns float32 logits),
// with whether each was the most likely one (is_greedy). A rolling task's document (wikitext) is its text's disjoint
// windows of max_seq_length tokens, the first after BOS (EOS for a tokenizer without one: the harness's
// prefix_token_id), summed. Requests run `batch_size` at a time, longest first,
// right-padded (padding after a causal sequence changes none of its logits). Each batch is a "step" of the run
// summary (its input tokens over its time: the tokens/s of a cell), and the summary's `scores` hold each task's
// "<task>/acc" and "<task>/acc_stderr". The run prints the harness's table and writes
// <output_dir>/eval_results.json: per task the scores, where its documents came from, and per document the
// log-likelihoods, greedy flags and score (the harness's log_samples). `enable_kv_cache` is for generation tasks
// (none is shipped); apply_chat_template must be False.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/registry.h"
#include "recipes/data/chat_format.h"
#include "recipes/models/decoder.h"

namespace tmx::recipes {

RecipeSpec EleutherEvalRecipe();

// One log-likelihood request in token ids.
struct LoglikelihoodRequest {
  std::vector<int64_t> context;
  std::vector<int64_t> continuation;
};

// The harness's _encode_pair: whitespace ending the context moves to the front of the continuation; the
// continuation's ids are those of context + continuation after as many as the context alone has (so a token
// merged across the seam counts for the continuation). An empty context is [prefix_id].
LoglikelihoodRequest EncodePair(const data::ModelTokenizer& tokenizer, const std::string& context,
                                const std::string& continuation, int64_t prefix_id);

struct Loglikelihood {
  double value = 0;        // the sum of the continuation's log-probabilities
  bool is_greedy = false;  // each continuation token was the most likely one at its position
};

struct LoglikelihoodOptions {
  int64_t batch_size = 8;
  int64_t max_length = 4096;          // the harness's max_length (at most the model's max_seq_len)
  std::function<void()> synchronize;  // the device, before a batch's clock stops (none: the CPU)
};

// Each batch's time and input tokens (without padding), in the order run.
struct LoglikelihoodBatches {
  std::vector<double> seconds;
  std::vector<int64_t> tokens;
};

// Every request's log-likelihood, in the requests' order, computed by `model` (in inference mode) in batches as
// described above. Ids must be in the model's vocabulary; a request with no continuation scores 0 and greedy.
std::vector<Loglikelihood> ComputeLoglikelihoods(models::DecoderImpl& model,
                                                 const std::vector<LoglikelihoodRequest>& requests,
                                                 const LoglikelihoodOptions& options, LoglikelihoodBatches* batches);

}  // namespace tmx::recipes
