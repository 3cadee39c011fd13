// torchtune's generation recipes, `generate`, `dev/generate_v2` and `dev/generate_v2_distributed`: one prompt through the model a checkpoint
// holds, its tokens written out with how fast they came.
//
// A Llama 3.2 Vision model (one device) loads as its training loop does (LoadVisionModel); prompt.user.image, a PNG
// or PPM file (or one under the shipped datasets; a URL or absent file: a shipped image with stand-ins), is tiled by the
// model's transform, collated with its cross-attention mask and encoded once, then models::Generate decodes with
// the fusion layers reading it.
//
// The model and its weights come as in fine-tuning (SetupModel: checkpointer.checkpoint_dir, or the seed's
// with stand-ins), so a fine-tuned run's merged output folder generates as the base model does. With generate's
// `quantizer` (Int8DynActInt4WeightQuantizer) the linears are int4-quantised before the weights load, so the
// checkpoint the quantize recipe wrote (recipes/quantize.h) generates with int4 weights and int8 activations. The prompt
// (`prompt: {system, user}`, user a string or {text: ...}) becomes a system message when set, a user message and
// an open assistant turn, written in the tokenizer's chat format and prompt template. Tokens are drawn with
// `temperature` and `top_k` (models/generation.h), through the KV cache unless enable_kv_cache=False, until a
// stop token of the tokenizer or max_new_tokens. The run prints the text, the time to the first token, prefill
// and decode tokens/s and peak memory, and writes <output_dir>/summary.json: each decode step is a "step" (one
// new token per sequence; the first is the warm-up), so its tokens/s is the decode rate, and the prefill is
// recorded beside it (time_to_first_token_s, prefill_tokens_per_second).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"
#include "recipes/data/messages.h"

namespace tmx::recipes {

// The recipe `name`: "generate", "dev/generate_v2" (its configs carry no enable_kv_cache or quantizer) or
// "dev/generate_v2_distributed" (ranks: tensor parallel, every rank holding an equal share of each layer's heads
// and MLP width, models/decoder.h TensorParallelArgs; embeddings, norms and the output projection whole, where
// torchtune's plan shards them too; each rank reads the whole checkpoint first, as torchtune's recipe does).
RecipeSpec GenerateRecipe(const std::string& name);

// The config's `prompt` as messages: [system,] user (with one image when prompt.user.image is set), and an empty
// assistant message to answer. InvalidArgument naming the key for anything else (an unknown role or part, a
// non-string text).
StatusOr<std::vector<data::Message>> PromptMessages(const Config& config);

// prompt.user.image (a PNG or PPM file a Llama 3.2 Vision model reads through its encoder), or "" when the prompt has none.
std::string PromptImage(const Config& config);

// Peak memory and work of generating: the weights, the KV cache for the prompt (tokenizer.max_seq_len, or a
// typical sample's length) and max_new_tokens, the logits, one layer's prompt activations and the runtime;
// over `ranks` tensor-parallel ranks, each rank's share of the layers and cache plus, in host memory, the whole
// model every rank reads first (ranks on one host add up). Work of a step (one new token per sequence): one pass
// over the parameters. A decode step reads every weight for one token, so on most devices it takes longer than
// that work at a training step's rate; the plan learns the real time once a cell has run.
StatusOr<CellEstimate> EstimateGenerate(const Config& config, const Registry& registry, const DeviceInfo& device,
                                        int ranks = 1);

}  // namespace tmx::recipes
