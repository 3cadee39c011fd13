#include "harness/proxy.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"

namespace tmx {

std::vector<ModelDepth> ModelDepths(const Config& config, const Registry& registry) {
  std::vector<ModelDepth> models;
  if (!config.root().IsMap()) return models;
  for (const auto& item : config.root()) {
    const std::string key = item.first.as<std::string>();
    const YAML::Node& node = item.second;
    if (!node.IsMap() || !node["_component_"] || !node["_component_"].IsScalar()) continue;
    const ComponentSpec* spec = registry.FindComponent(node["_component_"].Scalar());
    if (spec == nullptr || spec->kind != "model") continue;
    ModelDepth depth{key, spec->layers};
    if (!config.IsNull(key + ".num_layers")) {
      StatusOr<int64_t> written = config.GetInt(key + ".num_layers");
      if (written.ok() && *written > 0) depth.layers = *written;
    }
    models.push_back(depth);
  }
  std::sort(models.begin(), models.end(), [](const ModelDepth& a, const ModelDepth& b) { return a.key < b.key; });
  return models;
}

StatusOr<ProxyCut> ProxyOf(const Config& config, const Registry& registry, int64_t layers) {
  std::vector<ModelDepth> models = ModelDepths(config, registry);
  if (models.empty()) {
    return Status::FailedPrecondition("the config builds no model whose layers could be cut");
  }
  int64_t shallowest = 0;
  for (const ModelDepth& m : models) {
    if (m.layers <= 0) {
      return Status::FailedPrecondition(m.key + " '" + config.Find(m.key + "._component_").Scalar() +
                                        "' has no known depth to cut");
    }
    shallowest = shallowest == 0 ? m.layers : std::min(shallowest, m.layers);
  }
  if (layers < 1 || layers >= shallowest) {
    return Status::FailedPrecondition("a proxy of " + std::to_string(layers) + " layers cuts nothing from " +
                                      std::to_string(shallowest));
  }
  ProxyCut cut;
  cut.layers = layers;
  cut.real_layers = shallowest;
  std::vector<std::string> parts;
  for (const ModelDepth& m : models) {
    const double share = static_cast<double>(layers) * static_cast<double>(m.layers) / static_cast<double>(shallowest);
    const int64_t kept = std::max<int64_t>(1, std::llround(share));
    cut.overrides.push_back(m.key + ".num_layers=" + std::to_string(kept));
    parts.push_back(m.key + ".num_layers " + std::to_string(kept) + " of " + std::to_string(m.layers));
  }
  cut.description = JoinStrings(parts, ", ");
  return cut;
}

}  // namespace tmx
