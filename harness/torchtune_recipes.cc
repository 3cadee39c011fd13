#include "harness/torchtune_recipes.h"

#include <algorithm>
#include <optional>
#include <sstream>

namespace tmx {
namespace {

// The word at `pos` of `line` made of recipe-name characters (letters, digits, '_', '/').
std::string WordAt(const std::string& line, size_t pos) {
  size_t end = pos;
  while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_' ||
                               line[end] == '/')) {
    ++end;
  }
  return line.substr(pos, end - pos);
}

// "family/name" of ".../family/name.yaml".
std::string ConfigNameOf(const std::string& path) {
  std::string p = path;
  if (p.size() > 5 && p.compare(p.size() - 5, 5, ".yaml") == 0) p.resize(p.size() - 5);
  size_t last = p.rfind('/');
  if (last == std::string::npos) return p;
  size_t before = last == 0 ? std::string::npos : p.rfind('/', last - 1);
  return p.substr(before == std::string::npos ? 0 : before + 1);
}

}  // namespace

const TorchtuneRecipe* FindTorchtuneRecipe(const std::string& name) {
  for (const TorchtuneRecipe& r : TorchtuneRecipes()) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

RecipeHint RecipeHintForFile(const std::string& path, const std::string& text, const std::vector<std::string>& known) {
  auto recognised = [&](const std::string& name) {
    return FindTorchtuneRecipe(name) != nullptr || std::find(known.begin(), known.end(), name) != known.end();
  };
  // The first recognised recipe of the comment block, "tune run <recipe>" or "... in <recipe>.py", unless a later
  // `tune run <recipe> --config <this file's name>` says which launches this very config: torchtune's KD configs
  // first show how to fine-tune their teacher, and its 70B generation configs are "in dev/generate_v2.py" but
  // launched by dev/generate_v2_distributed.
  const std::string name = ConfigNameOf(path);
  std::optional<RecipeHint> first, launches_this;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && !launches_this) {
    size_t first_char = line.find_first_not_of(" \t\r");
    if (first_char == std::string::npos) continue;
    if (line[first_char] != '#') break;  // only the comment block before the first key
    const std::string source = "its comment `" + line.substr(first_char) + "`";
    std::string found, config;
    size_t run = line.find("tune run ");
    if (run != std::string::npos) {
      // The first word that is not a launcher option: tune run --nproc_per_node 2 <recipe> --config <name> ...
      std::istringstream words(line.substr(run + 9));
      std::string w;
      while (words >> w) {
        if (w.rfind("--", 0) != 0) {
          found = w;
          break;
        }
        if (w.find('=') == std::string::npos) words >> w;  // the option's value
      }
      while (words >> w) {
        if (w == "--config" && (words >> config)) break;
      }
    }
    for (size_t at = line.find("in "); found.empty() && at != std::string::npos; at = line.find("in ", at + 1)) {
      std::string word = WordAt(line, at + 3);
      if (!word.empty() && line.compare(at + 3 + word.size(), 3, ".py") == 0) found = word;
    }
    if (found.empty() || !recognised(found)) continue;
    if (!first) first = RecipeHint{found, source};
    if (!config.empty() && config == name) launches_this = RecipeHint{found, source};
  }
  if (launches_this) return *launches_this;
  if (first) return *first;
  for (const TorchtuneRecipe& r : TorchtuneRecipes()) {
    if (std::find(r.configs.begin(), r.configs.end(), name) != r.configs.end()) {
      return {r.name, "torchtune's registry, which lists " + name + " under it"};
    }
  }
  return {};
}

}  // namespace tmx
