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
    ModelDepth depth{key, spec->layers, spec->vocab_size};
    if (!config.IsNull(key + ".num_layers")) {
      StatusOr<int64_t> written = config.GetInt(key + ".num_layers");
      if (written.ok() && *written > 0) depth.layers = *written;
    }
    models.push_back(depth);
  }
  std::sort(models.begin(), models.end(), [](const ModelDepth& a, const ModelDepth& b) { return a.key < b.key; });
  return models;
}

int64_t CutVocabulary(int64_t vocab, int64_t divisor) {
  constexpr int64_t kTile = 64;
  const int64_t kept = (vocab + divisor - 1) / std::max<int64_t>(1, divisor);
  return std::max<int64_t>(kTile, (kept + kTile - 1) / kTile * kTile);
}

StatusOr<ProxyCut> ProxyOf(const Config& config, const Registry& registry, int64_t layers, int64_t vocab_divisor) {
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
    if (vocab_divisor <= 1) continue;
    const int64_t ids = CutVocabulary(m.vocab, vocab_divisor);
    if (m.vocab <= 0 || ids >= m.vocab) {
      return Status::FailedPrecondition(m.key + " '" + config.Find(m.key + "._component_").Scalar() + "' has " +
                                        (m.vocab <= 0 ? "no known vocabulary to cut"
                                                      : "a vocabulary of " + std::to_string(m.vocab) +
                                                            " ids, too small to cut by " +
                                                            std::to_string(vocab_divisor)));
    }
    if (m.layers == shallowest && cut.vocab == 0) {
      cut.vocab = ids;
      cut.real_vocab = m.vocab;
    }
    cut.overrides.push_back(m.key + ".vocab_size=" + std::to_string(ids));
    parts.push_back(m.key + ".vocab_size " + std::to_string(ids) + " of " + std::to_string(m.vocab));
  }
  cut.description = JoinStrings(parts, ", ");
  return cut;
}

}  // namespace tmx
