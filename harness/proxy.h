// A depth-reduced proxy of a config: the same config with only its models' layers cut, so that every
// operation, dtype and shape it has runs on a device whose memory or time budget the whole model exceeds.
// Where even one layer does not fit (the embeddings and output of a large vocabulary), the proxy cuts the
// vocabulary too: the models keep the first ids of their embedding and output, and the data's ids fold into
// them (DecoderArgs::vocab_cut_from); every operation and dtype still runs, two shapes are narrower.
// The matrix runs a proxy at two depths and extrapolates to the real one (matrix/proxy_cell.h); here is only
// what a proxy is, from the config and the registry: which keys build models, how deep each is, and the
// overrides that cut them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/config.h"
#include "harness/registry.h"

namespace tmx {

// A model the config builds: a top-level key whose component is of kind "model" ("model", "teacher_model").
struct ModelDepth {
  std::string key;
  int64_t layers = 0;  // its transformer layers: the config's `<key>.num_layers`, else the component's
  int64_t vocab = 0;   // ids of its embedding (ComponentSpec::vocab_size); 0: unknown
};

// Every model of `config` (schema defaults applied) in key order. A model whose depth is unknown (a
// component without `layers` and no num_layers in the config) has layers 0.
std::vector<ModelDepth> ModelDepths(const Config& config, const Registry& registry);

// One proxy of a config.
struct ProxyCut {
  // The shallowest model's layers in the proxy, and in the config: what the matrix extrapolates over.
  int64_t layers = 0;
  int64_t real_layers = 0;
  // With a vocabulary cut: the shallowest model's ids in the proxy and in the config (0 and 0: not cut).
  int64_t vocab = 0;
  int64_t real_vocab = 0;
  // "<key>.num_layers=<n>" for every model: the shallowest at `layers`, each other at its depth in the same
  // proportion (rounded, at least 1), so the proxy's cost is linear in `layers` with every model cut alike;
  // with a vocabulary cut, "<key>.vocab_size=<n>" after each.
  std::vector<std::string> overrides;
  // What was cut, for a reader: "model.num_layers 2 of 16, teacher_model.num_layers 4 of 32" (and
  // "model.vocab_size 16064 of 128256" with a vocabulary cut).
  std::string description;
};

// The ids a proxy keeps of a vocabulary of `vocab` cut by `divisor`: vocab / divisor rounded up to a multiple
// of 64 (whole tiles for the output's matmul), at least 64.
int64_t CutVocabulary(int64_t vocab, int64_t divisor);

// The proxy of `config` whose shallowest model keeps `layers` layers and, with `vocab_divisor` above 1, every
// model CutVocabulary(its ids, vocab_divisor) ids. FailedPrecondition, saying why no proxy is possible, for a
// config that builds no model, a model of unknown depth (or vocabulary, for a vocabulary cut), or `layers`
// not below the shallowest model's depth (nothing to cut).
StatusOr<ProxyCut> ProxyOf(const Config& config, const Registry& registry, int64_t layers, int64_t vocab_divisor = 1);

}  // namespace tmx
