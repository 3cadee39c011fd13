// A depth-reduced proxy of a config: the same config with only its models' layers cut, so that every
// operation, dtype and shape it has runs on a device whose memory or time budget the whole model exceeds.
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
};

// Every model of `config` (schema defaults applied) in key order. A model whose depth is unknown (a
// component without `layers` and no num_layers in the config) has layers 0.
std::vector<ModelDepth> ModelDepths(const Config& config, const Registry& registry);

// One proxy of a config.
struct ProxyCut {
  // The shallowest model's layers in the proxy, and in the config: what the matrix extrapolates over.
  int64_t layers = 0;
  int64_t real_layers = 0;
  // "<key>.num_layers=<n>" for every model: the shallowest at `layers`, each other at its depth in the same
  // proportion (rounded, at least 1), so the proxy's cost is linear in `layers` with every model cut alike.
  std::vector<std::string> overrides;
  // What was cut, for a reader: "model.num_layers 2 of 16, teacher_model.num_layers 4 of 32".
  std::string description;
};

// The proxy of `config` whose shallowest model keeps `layers` layers. FailedPrecondition, saying why no
// proxy is possible, for a config that builds no model, a model of unknown depth, or `layers` not below the
// shallowest model's depth (nothing to cut).
StatusOr<ProxyCut> ProxyOf(const Config& config, const Registry& registry, int64_t layers);

}  // namespace tmx
