#include "recipes/models/decoder.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/record_function.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "recipes/models/presets.h"

namespace tmx::models {
namespace {

using torch::indexing::None;
using torch::indexing::Slice;

const c10::TensorOptions kMeta = c10::TensorOptions().device(torch::kMeta);

DecoderArgs Tiny(const std::string& family) {
  const ModelPreset* p = FindModelPreset("tiny_" + family);
  TORCH_CHECK(p != nullptr, "no tiny preset for ", family);
  return p->args;
}

std::map<std::string, torch::Tensor> Params(const torch::nn::Module& m) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : m.named_parameters()) out[item.key()] = item.value();
  return out;
}

torch::Tensor NextTokenLoss(Decoder& model, const torch::Tensor& tokens) {
  torch::Tensor logits = model(tokens.index({Slice(), Slice(0, -1)}));
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat),
                                   tokens.index({Slice(), Slice(1, torch::indexing::None)}).reshape({-1}));
}

// ----- Every tiny family trains -----

class TinyFamilyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyFamilyTest, FullStepLowersTheLossAndEveryParameterGetsAGradient) {
  torch::manual_seed(0);
  Decoder model(Tiny(GetParam()));
  for (auto& p : model->parameters()) p.requires_grad_(true);
  // Sequences longer than every tiny sliding window (16 and 32 tokens).
  torch::Tensor tokens = torch::randint(0, 259, {2, 48}, torch::kLong);
  torch::Tensor loss = NextTokenLoss(model, tokens);
  ASSERT_TRUE(std::isfinite(loss.item<double>()));
  // Near uniform at initialisation; Gemma's scaled, tied embeddings favour repeating the input token.
  EXPECT_GT(loss.item<double>(), std::log(512.0) - 1);
  EXPECT_LT(loss.item<double>(), std::log(512.0) + 2.5);
  loss.backward();
  for (const auto& [name, p] : Params(*model)) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>()) << name;
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0) << name;
  }
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.5));
  sgd.step();
  EXPECT_LT(NextTokenLoss(model, tokens).item<double>(), loss.item<double>());
}

TEST_P(TinyFamilyTest, LoraTrainsOnlyTheAdaptersOfEveryProjection) {
  torch::manual_seed(1);
  const DecoderArgs args = Tiny(GetParam());
  LoraArgs lora;
  lora.attn_modules = {"q_proj", "k_proj", "v_proj", "output_proj"};
  lora.apply_to_mlp = true;
  lora.apply_to_output = !args.tie_word_embeddings;
  Decoder model(args, lora);
  FreezeBaseParameters(*model);
  const auto adapters = AdapterParameters(*model);
  // 4 attention + 3 MLP projections per layer, plus the output projection when untied; A and B each. A mixture of
  // experts adds A and B of its experts' three stacked projections beside its shared expert's three.
  int64_t moe_layers = 0;
  for (int64_t i = 0; i < args.num_layers; ++i) moe_layers += args.moe_in_layer(i) ? 1 : 0;
  EXPECT_EQ(adapters.size(),
            static_cast<size_t>(2 * (7 * args.num_layers + (args.tie_word_embeddings ? 0 : 1)) + 6 * moe_layers));
  torch::Tensor tokens = torch::randint(0, 259, {2, 40}, torch::kLong);
  std::vector<torch::Tensor> trainable;
  for (const auto& item : adapters) trainable.push_back(item.second);
  torch::optim::Adam adam(trainable, torch::optim::AdamOptions(1e-2));
  const double first = NextTokenLoss(model, tokens).item<double>();
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad();
    NextTokenLoss(model, tokens).backward();
    adam.step();
  }
  EXPECT_LT(NextTokenLoss(model, tokens).item<double>(), first - 0.05);
  for (const auto& [name, p] : Params(*model)) {
    const bool adapter = name.find(".lora_") != std::string::npos;
    EXPECT_EQ(p.requires_grad(), adapter) << name;
  }
}

TEST_P(TinyFamilyTest, ActivationCheckpointingKeepsTheGradients) {
  torch::manual_seed(2);
  Decoder model(Tiny(GetParam()));
  for (auto& p : model->parameters()) p.requires_grad_(true);
  torch::Tensor tokens = torch::randint(0, 259, {1, 40}, torch::kLong);
  NextTokenLoss(model, tokens).backward();
  std::map<std::string, torch::Tensor> plain;
  for (const auto& [name, p] : Params(*model)) plain[name] = p.grad().clone();
  model->zero_grad();
  model->set_activation_checkpointing(true);
  NextTokenLoss(model, tokens).backward();
  for (const auto& [name, p] : Params(*model)) {
    EXPECT_TRUE(torch::allclose(p.grad(), plain[name], 1e-5, 1e-6)) << name;
  }
}

// aten::linear calls while a counter is installed: a layer's forward makes the same number each time and
// backward none, so each recomputed layer adds one layer's forward calls.
std::atomic<int64_t> linear_calls{0};

std::unique_ptr<at::ObserverContext> CountLinear(const at::RecordFunction& fn) {
  if (std::string(fn.name()) == "aten::linear") ++linear_calls;
  return nullptr;
}

// One forward and backward of `model`: the aten::linear calls they made, and the gradients.
std::pair<int64_t, std::map<std::string, torch::Tensor>> CountedStep(Decoder& model, const torch::Tensor& tokens) {
  model->zero_grad();
  linear_calls = 0;
  at::CallbackHandle handle =
      at::addGlobalCallback(at::RecordFunctionCallback(&CountLinear).scopes({at::RecordScope::FUNCTION}));
  NextTokenLoss(model, tokens).backward();
  at::removeCallback(handle);
  std::map<std::string, torch::Tensor> grads;
  for (const auto& [name, p] : Params(*model)) grads[name] = p.grad().clone();
  return {linear_calls.load(), grads};
}

// torchtune's ac_mode=selective, ac_option=2 (apply_selective_activation_checkpointing) wraps layers 1 and 3 of
// 0..3 (its counter starts at 1 and wraps where it divides by 2): those two are recomputed in backward, the
// others keep their activations, and the gradients are those of no checkpointing.
TEST(SelectiveCheckpointingTest, EveryNthLayerIsRecomputedAndTheGradientsStay) {
  torch::manual_seed(2);
  DecoderArgs args = Tiny("llama3");
  args.num_layers = 4;
  Decoder model(args);
  torch::Tensor tokens = torch::randint(0, 259, {1, 24}, torch::kLong);
  auto [plain_calls, plain] = CountedStep(model, tokens);
  model->set_activation_checkpointing(true);  // every layer: ac_mode=full, or ac_option 0 or 1
  auto [full_calls, full] = CountedStep(model, tokens);
  const int64_t per_layer = (full_calls - plain_calls) / 4;
  ASSERT_GT(per_layer, 0);
  ASSERT_EQ(full_calls, plain_calls + 4 * per_layer);
  model->set_activation_checkpointing_every(2);
  EXPECT_EQ(std::vector<bool>({model->checkpoints_layer(0), model->checkpoints_layer(1), model->checkpoints_layer(2),
                               model->checkpoints_layer(3)}),
            std::vector<bool>({false, true, false, true}));
  auto [selective_calls, selective] = CountedStep(model, tokens);
  EXPECT_EQ(selective_calls, plain_calls + 2 * per_layer);
  model->set_activation_checkpointing_every(3);
  EXPECT_EQ(CountedStep(model, tokens).first, plain_calls + per_layer);  // layer 2 alone
  model->set_activation_checkpointing(false);
  EXPECT_FALSE(model->checkpoints_layer(2));
  EXPECT_EQ(CountedStep(model, tokens).first, plain_calls);
  for (const auto& [name, grad] : plain) {
    EXPECT_TRUE(torch::allclose(selective[name], grad, 1e-5, 1e-6)) << name;
    EXPECT_TRUE(torch::allclose(full[name], grad, 1e-5, 1e-6)) << name;
  }
}

// A pack of two documents (data/packing.h) gives each the logits it gets alone: positions restart per
// document and attention stays within it, through every family's attention path (soft-capping, windows).
TEST_P(TinyFamilyTest, PackedDocumentsGetTheLogitsTheyGetAlone) {
  torch::manual_seed(7);
  Decoder model(Tiny(GetParam()));
  model->eval();
  torch::NoGradGuard no_grad;
  const int64_t vocab = model->args().vocab_size;
  torch::Tensor a = torch::randint(vocab, {1, 9}, torch::kLong);
  torch::Tensor b = torch::randint(vocab, {1, 21}, torch::kLong);
  torch::Tensor packed = torch::cat({a, b}, 1);
  torch::Tensor input_pos = torch::cat({torch::arange(9), torch::arange(21)}).unsqueeze(0);
  torch::Tensor document_ids = torch::cat({torch::zeros({9}, torch::kLong), torch::ones({21}, torch::kLong)}).unsqueeze(0);
  torch::Tensor logits = model->forward(packed, input_pos, document_ids);
  torch::Tensor alone_a = model->forward(a);
  torch::Tensor alone_b = model->forward(b);
  EXPECT_LT((logits.index({Slice(), Slice(0, 9)}) - alone_a).abs().max().item<double>(), 1e-5);
  EXPECT_LT((logits.index({Slice(), Slice(9, None)}) - alone_b).abs().max().item<double>(), 1e-5);
  // Without the document boundaries the second document sees the first: different logits.
  torch::Tensor unpacked = model->forward(packed);
  EXPECT_GT((unpacked.index({Slice(), Slice(9, None)}) - alone_b).abs().max().item<double>(), 1e-3);
}

TEST_P(TinyFamilyTest, KvCacheGivesTheLogitsOfOneForward) {
  torch::manual_seed(11);
  Decoder model(Tiny(GetParam()));
  torch::NoGradGuard no_grad;
  // 48 tokens: past every tiny sliding window (16 and 32), so the cache must hide the positions beyond it.
  torch::Tensor tokens = torch::randint(model->args().vocab_size, {2, 48}, torch::kLong);
  torch::Tensor whole = model->forward(tokens);
  model->SetupCaches(2, 48);
  // A prompt, a chunk of several new tokens (queries that see part of the cache), then one token at a time.
  std::vector<torch::Tensor> parts = {model->forward(tokens.index({Slice(), Slice(0, 20)})),
                                      model->forward(tokens.index({Slice(), Slice(20, 25)}))};
  for (int64_t i = 25; i < 48; ++i) parts.push_back(model->forward(tokens.index({Slice(), Slice(i, i + 1)})));
  EXPECT_EQ(model->cache_position(), 48);
  EXPECT_LT((torch::cat(parts, 1) - whole).abs().max().item<double>(), 1e-4);
  // Full: one more token is refused, naming the capacity; a reset starts again at position 0.
  EXPECT_THROW(model->forward(tokens.index({Slice(), Slice(0, 1)})), c10::Error);
  model->ResetCaches();
  EXPECT_LT((model->forward(tokens.index({Slice(), Slice(0, 30)})) - whole.index({Slice(), Slice(0, 30)}))
                .abs().max().item<double>(),
            1e-4);
  model->ClearCaches();
  EXPECT_FALSE(model->caches_enabled());
  EXPECT_LT((model->forward(tokens) - whole).abs().max().item<double>(), 1e-6);
}

TEST(DecoderTest, KvCacheRefusesWhatItCannotServe) {
  torch::manual_seed(0);
  Decoder model(Tiny("llama3"));
  torch::NoGradGuard no_grad;
  EXPECT_THROW(model->SetupCaches(1, model->args().max_seq_len + 1), c10::Error);
  model->SetupCaches(1, 8);
  EXPECT_EQ(model->cache_capacity(), 8);
  torch::Tensor tokens = torch::randint(model->args().vocab_size, {1, 4}, torch::kLong);
  // Another batch size, explicit positions and packed documents do not fit a cache of whole sequences.
  EXPECT_THROW(model->forward(torch::cat({tokens, tokens})), c10::Error);
  EXPECT_THROW(model->forward(tokens, torch::arange(4).unsqueeze(0)), c10::Error);
  EXPECT_THROW(model->forward(tokens.repeat({1, 3})), c10::Error);  // 12 > capacity 8
  EXPECT_EQ(model->cache_position(), 0);
}

// An all-reduce for ranks played by threads: every rank's tensor is added up, and each gets the sum once all
// have given theirs (in arrival order; the tolerance below absorbs the order).
class ThreadSum {
 public:
  explicit ThreadSum(int ranks) : ranks_(ranks) {}
  torch::Tensor operator()(const torch::Tensor& part) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return read_ == 0; });  // the previous sum has been read by every rank
    sum_ = added_ == 0 ? part.clone() : sum_ + part;
    if (++added_ == ranks_) cv_.notify_all();
    cv_.wait(lock, [&] { return added_ == ranks_; });
    torch::Tensor out = sum_.clone();
    if (++read_ == ranks_) {
      added_ = 0;
      read_ = 0;
      cv_.notify_all();
    }
    return out;
  }

 private:
  int ranks_, added_ = 0, read_ = 0;
  torch::Tensor sum_;
  std::mutex mutex_;
  std::condition_variable cv_;
};

TEST_P(TinyFamilyTest, TensorParallelShardsGiveTheWholeModelsLogits) {
  torch::manual_seed(13);
  Decoder whole(Tiny(GetParam()));
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(whole->args().vocab_size, {2, 40}, torch::kLong);
  const torch::Tensor expected = whole->forward(tokens);
  constexpr int kRanks = 2;
  StatusOr<DecoderArgs> local = TensorParallelArgs(whole->args(), kRanks);
  if (whole->args().num_experts > 0) {
    ASSERT_FALSE(local.ok());
    EXPECT_NE(local.status().message().find("mixture-of-experts model is not implemented"), std::string::npos);
    return;
  }
  if (whole->args().num_kv_heads % kRanks != 0) {
    ASSERT_FALSE(local.ok());
    EXPECT_NE(local.status().message().find("num_kv_heads (1) evenly"), std::string::npos) << local.status().message();
    return;
  }
  ASSERT_TRUE(local.ok()) << local.status().message();
  EXPECT_EQ(local->num_heads * kRanks, whole->args().num_heads);
  EXPECT_EQ(local->resolved_head_dim(), whole->args().resolved_head_dim());
  ThreadSum sum(kRanks);
  std::vector<torch::Tensor> logits(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      torch::NoGradGuard rank_no_grad;
      Decoder shard(*local);
      CopyTensorParallelShard(*whole, r, kRanks, *shard);
      shard->set_partial_sum([&](const torch::Tensor& t) { return sum(t); });
      // Through the KV cache too: the prompt, then one token at a time.
      shard->SetupCaches(2, 40);
      std::vector<torch::Tensor> parts = {shard->forward(tokens.index({Slice(), Slice(0, 30)}))};
      for (int64_t i = 30; i < 40; ++i) parts.push_back(shard->forward(tokens.index({Slice(), Slice(i, i + 1)})));
      logits[r] = torch::cat(parts, 1);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_LT((logits[r] - expected).abs().max().item<double>(), 1e-4) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Families, TinyFamilyTest, ::testing::ValuesIn(TinyFamilies()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ----- Attention against a direct implementation, option by option -----

torch::Tensor ReferenceRmsNorm(const torch::Tensor& x, const torch::Tensor& scale, double eps, bool plus_one) {
  torch::Tensor n = x * torch::rsqrt(x.pow(2).mean(-1, true) + eps);
  return plus_one ? n * (1 + scale) : n * scale;
}

// One head at a time, with explicit masks: what each DecoderArgs option means, written out.
torch::Tensor ReferenceAttention(const DecoderArgs& a, int64_t layer, std::map<std::string, torch::Tensor> w,
                                 const torch::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), h = a.num_heads, kv = a.num_kv_heads, d = a.resolved_head_dim();
  auto proj = [&](const std::string& name) {
    torch::Tensor y = torch::matmul(x, w[name + ".weight"].t());
    return w.count(name + ".bias") ? y + w[name + ".bias"] : y;
  };
  torch::Tensor q = proj("q_proj").view({b, t, h, d});
  torch::Tensor k = proj("k_proj").view({b, t, kv, d});
  torch::Tensor v = proj("v_proj").view({b, t, kv, d});
  if (a.qk_norm) {
    q = ReferenceRmsNorm(q, w["q_norm.scale"], a.norm_eps, a.norm_plus_one);
    k = ReferenceRmsNorm(k, w["k_norm.scale"], a.norm_eps, a.norm_plus_one);
  }
  torch::Tensor angles =
      torch::outer(torch::arange(t, torch::kFloat), RopeInverseFrequencies(d, a.rope_base, a.rope_scaling));
  q = ApplyRotaryEmbedding(q, angles.cos(), angles.sin(), a.rope_layout);
  k = ApplyRotaryEmbedding(k, angles.cos(), angles.sin(), a.rope_layout);
  const double scale = 1 / std::sqrt(a.query_pre_attn_scalar > 0 ? a.query_pre_attn_scalar : double(d));
  const int64_t window = a.window_of_layer(layer);
  torch::Tensor masked = torch::ones({t, t}, torch::kBool).triu(1);
  if (window > 0) masked = masked | torch::ones({t, t}, torch::kBool).tril(-window);
  std::vector<torch::Tensor> heads;
  for (int64_t head = 0; head < h; ++head) {
    const int64_t g = head / (h / kv);
    torch::Tensor s = torch::matmul(q.select(2, head), k.select(2, g).transpose(1, 2)) * scale;
    if (a.attn_softcap > 0) s = a.attn_softcap * torch::tanh(s / a.attn_softcap);
    s = s.masked_fill(masked, -std::numeric_limits<float>::infinity());
    heads.push_back(torch::matmul(torch::softmax(s, -1), v.select(2, g)));
  }
  return torch::matmul(torch::cat(heads, -1), w["output_proj.weight"].t());
}

TEST(DecoderTest, AttentionOptionsMatchTheReference) {
  struct Case {
    const char* name;
    std::function<void(DecoderArgs*)> set;
    int64_t layer = 0;
  };
  const Case cases[] = {
      {"plain", [](DecoderArgs*) {}},
      {"qkv bias", [](DecoderArgs* a) { a->qkv_bias = true; }},
      {"half rope", [](DecoderArgs* a) { a->rope_layout = RopeLayout::kHalf; }},
      {"qk norm, head_dim 24", [](DecoderArgs* a) { a->qk_norm = true, a->head_dim = 24; }},
      {"qk norm (1 + w)", [](DecoderArgs* a) { a->qk_norm = true, a->norm_plus_one = true; }},
      {"softcap 2 and scale 7^-0.5", [](DecoderArgs* a) { a->attn_softcap = 2, a->query_pre_attn_scalar = 7; }},
      {"scale only", [](DecoderArgs* a) { a->query_pre_attn_scalar = 7; }},
      {"window 3", [](DecoderArgs* a) { a->sliding_window = 3; }},
      {"window 3 with softcap", [](DecoderArgs* a) { a->sliding_window = 3, a->attn_softcap = 5; }},
      {"alternating window, layer 0",
       [](DecoderArgs* a) { a->sliding_window = 3, a->alternate_sliding_window = true; }},
      {"alternating window, layer 1", [](DecoderArgs* a) { a->sliding_window = 3, a->alternate_sliding_window = true; },
       1},
      {"one kv head", [](DecoderArgs* a) { a->num_kv_heads = 1; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    torch::manual_seed(3);
    DecoderArgs args = Tiny("llama3");
    c.set(&args);
    ASSERT_TRUE(ValidateDecoderArgs(args).ok()) << ValidateDecoderArgs(args).message();
    Attention attn(args, LayerLora{}, c10::TensorOptions(), c.layer);
    auto w = Params(*attn);
    torch::NoGradGuard no_grad;
    // Larger weights so that the soft-cap binds and the normalisations matter.
    for (auto& [name, p] : w) p.normal_(0, name.find("norm") != std::string::npos ? 0.5 : 0.3);
    torch::Tensor x = torch::randn({2, 9, args.embed_dim});
    const int64_t d = args.resolved_head_dim();
    EXPECT_EQ(w["q_proj.weight"].sizes(), torch::IntArrayRef({args.num_heads * d, args.embed_dim}));
    EXPECT_EQ(w["output_proj.weight"].sizes(), torch::IntArrayRef({args.embed_dim, args.num_heads * d}));
    EXPECT_EQ(w.count("q_proj.bias"), args.qkv_bias ? 1u : 0u);
    EXPECT_EQ(w.count("q_norm.scale"), args.qk_norm ? 1u : 0u);
    torch::Tensor out =
        attn(x,
             torch::outer(torch::arange(9, torch::kFloat), RopeInverseFrequencies(d, args.rope_base, args.rope_scaling))
                 .cos(),
             torch::outer(torch::arange(9, torch::kFloat), RopeInverseFrequencies(d, args.rope_base, args.rope_scaling))
                 .sin());
    torch::Tensor expected = ReferenceAttention(args, c.layer, w, x);
    EXPECT_TRUE(torch::allclose(out, expected, 1e-4, 1e-5)) << (out - expected).abs().max();
    EXPECT_EQ(attn->sliding_window(), args.window_of_layer(c.layer));
  }
}

// ----- Each option changes the forward the way it says -----

// Which positions' logits change when the token at `position` changes.
std::vector<int64_t> AffectedPositions(Decoder& model, int64_t t, int64_t position) {
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, 259, {1, t}, torch::kLong);
  torch::Tensor changed = tokens.clone();
  changed[0][position] = (tokens[0][position].item<int64_t>() + 7) % 259;
  torch::Tensor diff = (model(tokens) - model(changed)).abs().amax(-1)[0];
  std::vector<int64_t> affected;
  for (int64_t i = 0; i < t; ++i) {
    if (diff[i].item<double>() > 1e-6) affected.push_back(i);
  }
  return affected;
}

TEST(DecoderTest, SlidingWindowHidesPositionsBeyondIt) {
  torch::manual_seed(4);
  DecoderArgs args = Tiny("mistral");
  args.num_layers = 1;
  args.sliding_window = 4;
  Decoder windowed(args);
  // One layer with a 4-token window: token 2 reaches positions 2..5 only.
  EXPECT_EQ(AffectedPositions(windowed, 12, 2), (std::vector<int64_t>{2, 3, 4, 5}));
  args.sliding_window = 0;
  torch::manual_seed(4);
  Decoder global(args);
  EXPECT_EQ(AffectedPositions(global, 12, 2).size(), 10u);
  // Two windowed layers see twice as far (positions 2..8); with Gemma 2's alternation layer 1 is global.
  args.num_layers = 2;
  args.sliding_window = 4;
  Decoder two(args);
  EXPECT_EQ(AffectedPositions(two, 12, 2), (std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8}));
  args.alternate_sliding_window = true;
  Decoder alternating(args);
  EXPECT_EQ(AffectedPositions(alternating, 12, 2).size(), 10u);
}

TEST(DecoderTest, FinalSoftCapBoundsTheLogits) {
  DecoderArgs capped_args = Tiny("gemma2");
  capped_args.final_softcap = 2;
  DecoderArgs plain_args = capped_args;
  plain_args.final_softcap = 0;
  // The same seed gives the same weights: the cap adds no parameter.
  torch::manual_seed(5);
  Decoder capped(capped_args);
  torch::manual_seed(5);
  Decoder plain(plain_args);
  EXPECT_EQ(Params(*capped).count("norm.rms_norm.scale"), 1u);
  EXPECT_EQ(Params(*plain).count("norm.scale"), 1u);
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, 259, {2, 20}, torch::kLong);
  torch::Tensor raw = plain(tokens);
  torch::Tensor logits = capped(tokens);
  ASSERT_GT(raw.abs().max().item<double>(), 3);  // the cap binds
  EXPECT_LT(logits.abs().max().item<double>(), 2);
  EXPECT_TRUE(torch::allclose(logits, 2 * torch::tanh(raw / 2), 1e-5, 1e-5));
}

TEST(DecoderTest, EmbeddingScalingMultipliesTheInputBySqrtDim) {
  // With tied embeddings, scaling the input by sqrt(64) = 8 equals embedding weights 8x larger and logits
  // divided by 8: both feed 8 E[x] to layer 0, and the output projection uses E vs 8E.
  DecoderArgs scaled_args = Tiny("gemma");
  DecoderArgs plain_args = scaled_args;
  plain_args.scale_embeddings = false;
  torch::manual_seed(6);
  Decoder scaled(scaled_args);
  torch::manual_seed(6);
  Decoder plain(plain_args);
  torch::NoGradGuard no_grad;
  Params(*plain)["tok_embeddings.weight"].mul_(8);
  torch::Tensor tokens = torch::randint(0, 259, {1, 10}, torch::kLong);
  torch::Tensor expected = plain(tokens) / 8;
  EXPECT_TRUE(torch::allclose(scaled(tokens), expected, 1e-4, 1e-5)) << (scaled(tokens) - expected).abs().max();
}

TEST(DecoderTest, ATiedEmbeddingGetsOneDenseGradientOfBothUses) {
  // The lookup's gradient is sparse where the weight is tied (EmbeddingImpl): the weight's .grad must still be
  // one dense tensor, the output projection's gradient plus the looked-up rows', as an untied model with the
  // same weights gets in two tensors.
  DecoderArgs tied_args = Tiny("llama3");
  tied_args.tie_word_embeddings = true;
  DecoderArgs untied_args = tied_args;
  untied_args.tie_word_embeddings = false;
  torch::manual_seed(8);
  Decoder tied(tied_args);
  Decoder untied(untied_args);
  {
    torch::NoGradGuard no_grad;
    std::map<std::string, torch::Tensor> from = Params(*tied);
    for (auto& [name, p] : Params(*untied)) p.copy_(from.at(name == "output.weight" ? "tok_embeddings.weight" : name));
  }
  for (Decoder* m : {&tied, &untied}) {
    for (auto& p : (*m)->parameters()) p.requires_grad_(true);
  }
  // Token 7 three times: a row looked up more than once gets each use's gradient.
  torch::Tensor tokens = torch::randint(0, 259, {2, 24}, torch::kLong);
  tokens.index_put_({0, Slice(0, 3)}, 7);
  NextTokenLoss(tied, tokens).backward();
  NextTokenLoss(untied, tokens).backward();
  const torch::Tensor grad = Params(*tied)["tok_embeddings.weight"].grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_EQ(grad.layout(), torch::kStrided);
  const torch::Tensor expected =
      Params(*untied)["tok_embeddings.weight"].grad() + Params(*untied)["output.weight"].grad();
  EXPECT_TRUE(torch::allclose(grad, expected, 1e-5, 1e-7)) << (grad - expected).abs().max();
  // The looked-up rows did arrive: without them the gradient would be the output projection's alone.
  EXPECT_GT((grad - Params(*untied)["output.weight"].grad()).index({7}).abs().max().item<double>(), 1e-6);
}

TEST(DecoderTest, NormPlusOneMultipliesByOnePlusScale) {
  torch::manual_seed(7);
  RMSNorm gemma(8, 1e-6, c10::TensorOptions(), /*plus_one=*/true);
  RMSNorm llama(8, 1e-6);
  EXPECT_TRUE(torch::equal(Params(*gemma)["scale"], torch::zeros({8})));
  EXPECT_TRUE(torch::equal(Params(*llama)["scale"], torch::ones({8})));
  torch::NoGradGuard no_grad;
  torch::Tensor s = torch::randn({8});
  Params(*gemma)["scale"].copy_(s);
  Params(*llama)["scale"].copy_(1 + s);
  torch::Tensor x = torch::randn({3, 8});
  EXPECT_TRUE(torch::allclose(gemma(x), llama(x), 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(gemma(x), ReferenceRmsNorm(x, s, 1e-6, true), 1e-6, 1e-6));
}

TEST(DecoderTest, PostNormsScaleTheResidualBranches) {
  // Gemma 2 with every sa_scale and mlp_scale at -1: (1 + scale) = 0 removes both branches, so the logits are
  // those of the scaled embeddings through the final norm and the tied output, soft-capped.
  torch::manual_seed(8);
  const DecoderArgs args = Tiny("gemma2");
  Decoder model(args);
  auto w = Params(*model);
  EXPECT_EQ(w.count("layers.0.sa_scale.scale") + w.count("layers.1.mlp_scale.scale"), 2u);
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, 259, {1, 6}, torch::kLong);
  torch::Tensor before = model(tokens);
  for (auto& [name, p] : w) {
    if (name.find("_scale.scale") != std::string::npos) p.fill_(-1);
  }
  const torch::Tensor e = w["tok_embeddings.weight"];
  torch::Tensor h = ReferenceRmsNorm(e.index({tokens}) * 8, w["norm.rms_norm.scale"], args.norm_eps, true);
  torch::Tensor expected = 30 * torch::tanh(torch::matmul(h, e.t()) / 30);
  torch::Tensor after = model(tokens);
  EXPECT_TRUE(torch::allclose(after, expected, 1e-4, 1e-5)) << (after - expected).abs().max();
  EXPECT_FALSE(torch::allclose(before, after));
}

TEST(DecoderTest, GegluUsesTanhGelu) {
  torch::manual_seed(9);
  DecoderArgs args = Tiny("gemma");
  FeedForward geglu(args, LayerLora{});
  args.mlp_activation = MlpActivation::kSilu;
  FeedForward swiglu(args, LayerLora{});
  auto w = Params(*geglu);
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : Params(*swiglu)) p.copy_(w[name]);
  torch::Tensor x = torch::randn({2, 3, args.embed_dim});
  torch::Tensor a = torch::matmul(x, w["w1.weight"].t());
  torch::Tensor up = torch::matmul(x, w["w3.weight"].t());
  torch::Tensor gelu_tanh = 0.5 * a * (1 + torch::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a.pow(3))));
  EXPECT_TRUE(torch::allclose(geglu(x), torch::matmul(gelu_tanh * up, w["w2.weight"].t()), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(swiglu(x), torch::matmul(torch::silu(a) * up, w["w2.weight"].t()), 1e-5, 1e-6));
}

TEST(DecoderTest, ClassifierHeadScoresEveryPosition) {
  torch::manual_seed(10);
  DecoderArgs args = Tiny("llama2");
  args.num_classes = 1;
  Decoder model(args);
  EXPECT_EQ(Params(*model)["output.weight"].sizes(), torch::IntArrayRef({1, args.embed_dim}));
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model(torch::randint(0, 259, {2, 5}, torch::kLong)).sizes(), torch::IntArrayRef({2, 5, 1}));
  args.tie_word_embeddings = true;
  EXPECT_EQ(ValidateDecoderArgs(args).message(),
            "tie_word_embeddings: a classifier head (num_classes 1) cannot share the token embedding; set "
            "tie_word_embeddings to false");
}

TEST(DecoderTest, StateDictNamesFollowTorchtunePerFamily) {
  struct Case {
    const char* family;
    std::set<std::string> layer0;  // names under layers.0.
    std::set<std::string> top;
  };
  const std::set<std::string> llama_layer = {"sa_norm.scale",      "attn.q_proj.weight",      "attn.k_proj.weight",
                                             "attn.v_proj.weight", "attn.output_proj.weight", "mlp_norm.scale",
                                             "mlp.w1.weight",      "mlp.w2.weight",           "mlp.w3.weight"};
  std::set<std::string> qwen2_layer = llama_layer;
  qwen2_layer.insert({"attn.q_proj.bias", "attn.k_proj.bias", "attn.v_proj.bias"});
  std::set<std::string> qwen3_layer = llama_layer;
  qwen3_layer.insert({"attn.q_norm.scale", "attn.k_norm.scale"});
  std::set<std::string> gemma2_layer = llama_layer;
  gemma2_layer.insert({"sa_scale.scale", "mlp_scale.scale"});
  const Case cases[] = {
      {"llama3_2", llama_layer, {"tok_embeddings.weight", "norm.scale"}},
      {"llama3_1", llama_layer, {"tok_embeddings.weight", "norm.scale", "output.weight"}},
      {"qwen2", qwen2_layer, {"tok_embeddings.weight", "norm.scale"}},
      {"qwen3", qwen3_layer, {"tok_embeddings.weight", "norm.scale"}},
      {"gemma", llama_layer, {"tok_embeddings.weight", "norm.scale"}},
      {"gemma2", gemma2_layer, {"tok_embeddings.weight", "norm.rms_norm.scale"}},
      {"phi3", llama_layer, {"tok_embeddings.weight", "norm.scale", "output.weight"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.family);
    Decoder model(Tiny(c.family), std::nullopt, kMeta);
    std::set<std::string> layer0, top;
    for (const auto& [name, p] : Params(*model)) {
      if (name.rfind("layers.0.", 0) == 0) layer0.insert(name.substr(9));
      if (name.rfind("layers.", 0) != 0) top.insert(name);
    }
    EXPECT_EQ(layer0, c.layer0);
    EXPECT_EQ(top, c.top);
  }
}

TEST(DecoderTest, FeaturesAndDifferencesNameTheOptions) {
  EXPECT_EQ(DecoderFeatures(Tiny("qwen3")),
            (std::vector<std::string>{"grouped-query attention", "decoupled head_dim", "half-split rope", "q/k norm",
                                      "tied embeddings"}));
  DecoderArgs a = Tiny("llama3");
  DecoderArgs b = a;
  b.head_dim = 16;               // = 64 / 4: the same model
  b.query_pre_attn_scalar = 16;  // = head_dim: the same scale
  EXPECT_EQ(DecoderArgsDifferences(a, b), std::vector<std::string>{});
  b.rope_base = 1e6;
  b.tie_word_embeddings = true;
  b.rope_scaling = RopeScaling{8, 1, 4, 8192};
  EXPECT_EQ(DecoderArgsDifferences(a, b),
            (std::vector<std::string>{"rope_base (500000 vs 1e+06)", "rope_scaling (none vs 8/1/4/8192)",
                                      "tie_word_embeddings (false vs true)"}));
}

TEST(DecoderTest, ValidateNamesTheOption) {
  DecoderArgs a = Tiny("gemma2");
  a.head_dim = 15;
  EXPECT_EQ(ValidateDecoderArgs(a).message(), "head_dim: must be even for RoPE, got 15");
  a = Tiny("gemma2");
  a.sliding_window = 0;
  EXPECT_EQ(ValidateDecoderArgs(a).message(),
            "alternate_sliding_window: set, but sliding_window is 0; set sliding_window or unset the alternation");
  a = Tiny("gemma2");
  a.attn_softcap = -1;
  EXPECT_EQ(ValidateDecoderArgs(a).message(), "attn_softcap: must be 0 (off) or a positive number, got -1");
  // head_dim frees embed_dim from num_heads: 4 heads of 32 on a width of 66 is fine.
  a = Tiny("qwen3");
  a.embed_dim = 66;
  EXPECT_TRUE(ValidateDecoderArgs(a).ok());
  a.head_dim = 0;
  EXPECT_EQ(ValidateDecoderArgs(a).message(), "embed_dim: must be divisible by num_heads (4), got 66");
  EXPECT_EQ(MakeDecoder(a).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace tmx::models
