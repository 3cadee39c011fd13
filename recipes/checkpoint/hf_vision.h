// Hugging Face's MllamaForConditionalGeneration tensors <-> the vision model's (torchtune's) names and layouts
// (models/vision_model.h). Differences besides the names:
//  - The text decoder: transformers numbers self- and cross-attention layers in one list (its
//    cross_attention_layers), torchtune keeps the self-attention layers' numbers and hangs each cross-attention
//    layer, as fusion_layer, on the layer after it.
//  - RoPE layout: the self-attention q/k rows are permuted per head to the interleaved order (as hf_convert.h);
//    the cross-attention q/k, which rotate nothing, are kept as they are.
//  - embed_tokens holds vocab_size + num_special_tokens rows: the first vocab_size are tok_embeddings.weight, the
//    rest tok_embeddings.fusion_embedding.weight.
//  - The tile tables: transformers holds one row per supported aspect ratio (row 0 unused), each the h * w grid
//    tiles' entries in order; torchtune one entry per grid tile [T, T, n, D]. Reading takes every ratio's tiles
//    (a published checkpoint's rows agree where they overlap); writing fills each ratio's row from the grid.
// Names are read in both spellings transformers has saved: "language_model.model.*", "vision_model.*",
// "multi_modal_projector.*", "language_model.lm_head.*" (the Hub's checkpoints) and, from transformers 4.52 on
// in memory, "model.language_model.*", "model.vision_model.*", "model.multi_modal_projector.*", "lm_head.*".
// Writing uses the first.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/models/vision_model.h"

namespace tmx::checkpoint {

enum class MllamaLayout {
  kSame,        // one tensor, same layout
  kRopeHeads,   // q/k rows permuted per head (`count` heads)
  kEmbeddings,  // embed_tokens: tok_embeddings.weight then fusion_embedding.weight
  kTileTable,   // [ratios + 1, T * count * D] <-> [T, T, count, D]
};

struct MllamaTensorMap {
  std::string hf_name;    // in the Hub's spelling
  std::string tune_name;  // for kEmbeddings, the first of the two
  MllamaLayout layout = MllamaLayout::kSame;
  int64_t count = 0;
};

// Every tensor of a checkpoint of a model with `args`, encoder first.
std::vector<MllamaTensorMap> MllamaTensorMaps(const models::VisionModelArgs& args);

// "model.language_model.x" -> "language_model.model.x" and the other pairs above; other names unchanged.
std::string HubMllamaName(const std::string& name);

// Hugging Face tensors -> the model's state dict. InvalidArgument naming `source` and the first tensor missing,
// of a shape the layout cannot hold, repeated, or without a place in the model, with the fix.
StatusOr<NamedTensors> MllamaHfToTune(const NamedTensors& hf, const models::VisionModelArgs& args,
                                      const std::string& source);

// The model's state dict (adapters merged) -> Hugging Face tensors in the Hub's names. InvalidArgument naming a
// tensor missing or left over.
StatusOr<NamedTensors> MllamaTuneToHf(const NamedTensors& tune, const models::VisionModelArgs& args);

}  // namespace tmx::checkpoint
