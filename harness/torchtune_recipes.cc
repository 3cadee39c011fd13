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
  // A `tune run <recipe>` line names the recipe that launches the config; "... in <recipe>.py" only the file
  // it was written for (torchtune's 70B generation configs say dev/generate_v2.py and launch
  // dev/generate_v2_distributed), so the first kind wins over the second.
  std::optional<RecipeHint> launched, written_for;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && !launched) {
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    if (line[first] != '#') break;  // only the comment block before the first key
    const RecipeHint hint_of_line{"", "its comment `" + line.substr(first) + "`"};
    size_t run = line.find("tune run ");
    if (run != std::string::npos) {
      // The first word that is not a launcher option: tune run --nproc_per_node 2 <recipe> --config ...
      std::istringstream words(line.substr(run + 9));
      std::string w;
      while (words >> w) {
        if (w.rfind("--", 0) != 0) {
          if (recognised(w)) launched = RecipeHint{w, hint_of_line.source};
          break;
        }
        if (w.find('=') == std::string::npos) words >> w;  // the option's value
      }
    }
    for (size_t at = line.find("in "); !written_for && at != std::string::npos; at = line.find("in ", at + 1)) {
      std::string word = WordAt(line, at + 3);
      if (!word.empty() && line.compare(at + 3 + word.size(), 3, ".py") == 0 && recognised(word)) {
        written_for = RecipeHint{word, hint_of_line.source};
      }
    }
  }
  if (launched) return *launched;
  if (written_for) return *written_for;
  std::string name = ConfigNameOf(path);
  for (const TorchtuneRecipe& r : TorchtuneRecipes()) {
    if (std::find(r.configs.begin(), r.configs.end(), name) != r.configs.end()) {
      return {r.name, "torchtune's registry, which lists " + name + " under it"};
    }
  }
  return {};
}

}  // namespace tmx
