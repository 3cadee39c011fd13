#include "recipes/flops.h"

#include <algorithm>
#include <string>
#include <vector>

namespace tmx {
namespace {

// One linear layer of the model: its input and output widths and whether LoRA adapts it.
struct LinearShape {
  int64_t in = 0;
  int64_t out = 0;
  bool adapted = false;
};

bool Adapts(const std::optional<models::LoraArgs>& lora, const std::string& name) {
  return lora && std::find(lora->attn_modules.begin(), lora->attn_modules.end(), name) != lora->attn_modules.end();
}

// The linears one position passes through: every layer's projections, then the output.
std::vector<LinearShape> Linears(const FlopModel& m) {
  const models::DecoderArgs& a = m.args;
  const int64_t q = a.num_heads * a.resolved_head_dim();
  const int64_t kv = a.num_kv_heads * a.resolved_head_dim();
  const bool mlp = m.lora && m.lora->apply_to_mlp;
  const std::vector<LinearShape> attention = {
      {a.embed_dim, q, Adapts(m.lora, "q_proj")},
      {a.embed_dim, kv, Adapts(m.lora, "k_proj")},
      {a.embed_dim, kv, Adapts(m.lora, "v_proj")},
      {q, a.embed_dim, Adapts(m.lora, "output_proj")},
  };
  std::vector<LinearShape> all;
  for (int64_t i = 0; i < a.num_layers; ++i) {
    all.insert(all.end(), attention.begin(), attention.end());
    // A mixture of experts: the router, then the MLPs a token passes through (its top-k experts and the shared
    // one); a dense layer: its one MLP.
    const int64_t hidden = a.mlp_dim_of_layer(i);
    const int64_t mlps = a.moe_in_layer(i) ? a.experts_per_token + (a.shared_expert ? 1 : 0) : 1;
    if (a.moe_in_layer(i)) all.push_back({a.embed_dim, a.num_experts, false});
    for (int64_t k = 0; k < mlps; ++k) {
      all.push_back({a.embed_dim, hidden, mlp});
      all.push_back({a.embed_dim, hidden, mlp});
      all.push_back({hidden, a.embed_dim, mlp});
    }
  }
  all.push_back({a.embed_dim, a.output_dim(), m.lora && m.lora->apply_to_output});
  return all;
}

// Attention's FLOPs of one forward over one row, every layer: q k^T and weights x v, 2 x head_dim each per head
// and attended pair.
double AttentionForward(const models::DecoderArgs& a, int64_t length) {
  double flops = 0;
  for (int64_t layer = 0; layer < a.num_layers; ++layer) {
    // Chunked attention (Llama 4's RoPE layers): each full chunk of c positions attends c (c + 1) / 2 pairs.
    const int64_t chunk = a.rope_in_layer(layer) ? a.attention_chunk_size : 0;
    const int64_t pairs = chunk > 0 && chunk < length ? (length / chunk) * AttendedPairs(chunk, 0) +
                                                            AttendedPairs(length % chunk, 0)
                                                      : AttendedPairs(length, a.window_of_layer(layer));
    flops += 4.0 * static_cast<double>(a.num_heads * a.resolved_head_dim()) * static_cast<double>(pairs);
  }
  return flops;
}

}  // namespace

int64_t AttendedPairs(int64_t length, int64_t window) {
  if (length <= 0) return 0;
  if (window <= 0 || window >= length) return length * (length + 1) / 2;
  // Positions 0..window-1 see 1..window positions, the rest window each.
  return window * (window + 1) / 2 + (length - window) * window;
}

namespace {

// FLOPs over `rows` x `length` positions: `per_frozen` and `per_trained` FLOPs per weight and position for the
// base weights (trained in full fine-tuning, frozen under LoRA), `per_trained` for the adapters' weights, and
// attention's forward `attention_passes` times.
double Count(const FlopModel& model, int64_t rows, int64_t length, double per_frozen, double per_trained,
             double attention_passes) {
  double per_position = 0;
  for (const LinearShape& l : Linears(model)) {
    per_position += (model.lora ? per_frozen : per_trained) * static_cast<double>(l.in * l.out);
    if (l.adapted) per_position += per_trained * static_cast<double>(model.lora->rank * (l.in + l.out));
  }
  const double positions = static_cast<double>(rows * length);
  return positions * per_position + attention_passes * static_cast<double>(rows) * AttentionForward(model.args, length);
}

}  // namespace

double ForwardFlops(const FlopModel& model, int64_t rows, int64_t length) {
  return Count(model, rows, length, 2, 2, 1);
}

double PrefillFlops(const FlopModel& model, int64_t rows, int64_t length) {
  const double output = 2.0 * static_cast<double>(model.args.embed_dim) * static_cast<double>(model.args.output_dim());
  return ForwardFlops(model, rows, length) - output * static_cast<double>(rows) * static_cast<double>(length - 1);
}

double DecodeStepBytes(const models::DecoderArgs& args, double weight_bytes, int64_t rows, int64_t context,
                       int cache_element_bytes) {
  double cached = 0;  // positions x kv width summed over the layers
  for (int64_t layer = 0; layer < args.num_layers; ++layer) {
    const int64_t window = args.window_of_layer(layer);
    cached += static_cast<double>(window > 0 ? std::min(context, window) : context);
  }
  const double kv_width = 2.0 * static_cast<double>(args.num_kv_heads * args.resolved_head_dim());
  return weight_bytes + static_cast<double>(rows) * cached * kv_width * cache_element_bytes;
}

double DecodeWeightBytes(const models::DecoderArgs& args, double stored_bytes, int element_bytes) {
  if (args.tie_word_embeddings) return stored_bytes;
  return stored_bytes - static_cast<double>(args.vocab_size) * static_cast<double>(args.embed_dim) * element_bytes;
}

double TrainingFlops(const FlopModel& model, int64_t rows, int64_t length) {
  // The backward of both attention products computes two gradients each: twice the forward.
  return Count(model, rows, length, 4, 6, 3);
}

}  // namespace tmx
