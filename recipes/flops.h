// Model FLOPs of a training step, from the architecture and the batch's shape: the arithmetic the step needs,
// not what the kernels happened to do. The matrix divides it by the step time and by the device's measured
// matmul peak (harness/matmul_peak.h) to say how close a cell comes to what its device can do.
//
// What is counted (a multiply-add is 2 FLOPs):
//   - every linear layer (q, k, v, output_proj, w1, w2, w3, output; LoRA's lora_a and lora_b) at 2 FLOPs per
//     weight per position in the forward, 2 more for its input's gradient in the backward, and 2 more for its
//     weight's gradient when the weight trains: 6 per trained weight, 4 per frozen one (a LoRA model's base,
//     a QLoRA base however it is stored);
//   - attention's two products (q k^T and the weights times v) at 4 x head_dim FLOPs per head for each pair of
//     positions a query attends to (causal, within its layer's sliding window), times 3 with the backward;
//   - a DPO reference's or a distillation teacher's forward (2 per weight per position, attention once).
// Not counted: embeddings (a lookup), norms, activations, RoPE, the loss, the optimizer, DoRA's row norms, a
// QLoRA base's dequantisation, and recomputation under activation checkpointing: the usual "model FLOPs", so
// the share of the peak is comparable across configs and devices.
#pragma once

#include <cstdint>
#include <optional>

#include "recipes/models/decoder.h"

namespace tmx {

// One model's shape as the count needs it.
struct FlopModel {
  models::DecoderArgs args;
  std::optional<models::LoraArgs> lora;  // set: only the adapters (and DoRA's magnitudes) train
};

// Pairs of positions that attend within one sequence of `length` positions, causal, each query to at most
// `window` positions (itself included; 0: no window).
int64_t AttendedPairs(int64_t length, int64_t window);

// FLOPs of one forward over `rows` sequences of `length` positions (a padded batch; padding is computed too).
double ForwardFlops(const FlopModel& model, int64_t rows, int64_t length);

// FLOPs of one forward and backward over such a batch, the weights trained as `model` says.
double TrainingFlops(const FlopModel& model, int64_t rows, int64_t length);

// FLOPs of a generation's prefill: the forward over `rows` prompts of `length` positions, the output projection
// for the last position only (generation computes no other logits). Over the time to the first token, and the
// device's matmul peak at the model's dtype, it is the prefill's share of the peak.
double PrefillFlops(const FlopModel& model, int64_t rows, int64_t length);

// Bytes one decode step reads (a step: one new token for each of `rows` sequences, the KV cache holding
// `context` positions per sequence, the new one included), what its share of the device's memory bandwidth is
// taken from:
//   bytes = weight_bytes + rows x sum over layers of 2 x min(context, window) x kv_heads x head_dim x cache_bytes
// weight_bytes: the weights as stored (parameters x the dtype's size; a quantised linear's codes and scales),
// less an untied embedding table (DecodeWeightBytes), each read once per step whatever the batch; then each
// layer's cached keys and values, within its sliding window. Activations (a few vectors of embed_dim per
// sequence) are left out. A lower bound on the traffic: a device whose caches hold the weights (a tiny model)
// reads them faster than its memory, and its share passes 100%.
double DecodeStepBytes(const models::DecoderArgs& args, double weight_bytes, int64_t rows, int64_t context,
                       int cache_element_bytes);

// The weights a decode step reads of `stored_bytes` (every parameter and quantised buffer as stored): all but an
// untied input embedding table, of which a step reads one row per token (`element_bytes` its size per number).
double DecodeWeightBytes(const models::DecoderArgs& args, double stored_bytes, int element_bytes);

}  // namespace tmx
