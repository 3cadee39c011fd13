#include "matrix/publish.h"

#include <sys/stat.h>

#include <map>
#include <sstream>

#include "harness/config_store.h"
#include "harness/file_util.h"
#include "matrix/journal.h"
#include "matrix/report.h"
#include "matrix/writeback.h"

namespace tmx::matrix {

Status WriteBackResults(const Registry& registry, const std::vector<CellResult>& records, std::ostream& log) {
  std::map<std::string, SupportMetadata> updates;
  std::map<std::string, std::map<std::string, std::string>> newest;  // config -> device type -> verified_at
  for (const auto& [key, cell] : LatestByCell(records)) {
    if (registry.RecipeForConfig(key.config) == nullptr) continue;
    std::string& seen = newest[key.config][cell.device_type];
    if (!seen.empty() && seen > cell.provenance.verified_at) continue;
    seen = cell.provenance.verified_at;
    updates[key.config][cell.device_type] = SupportFromCell(cell);
  }
  for (const auto& [config, support] : updates) {
    bool changed = false;
    std::string path = BuiltinConfigPath(config);
    TM_RETURN_IF_ERROR(WriteBackSupport(path, support, &changed));
    log << (changed ? "updated " : "unchanged ") << path << "\n";
  }
  return Status::OK();
}

Status WriteReports(const Registry& registry, const std::string& reports_dir) {
  std::vector<ConfigSupport> configs;
  for (const RecipeSpec& recipe : registry.recipes()) {
    for (const std::string& name : recipe.configs) {
      std::string path = BuiltinConfigPath(name);
      StatusOr<std::string> text = ReadFile(path);
      if (!text.ok()) return text.status();
      StatusOr<SupportMetadata> support = ReadSupportMetadata(*text, path);
      if (!support.ok()) return support.status();
      configs.push_back({name, recipe.name, *support});
    }
  }
  TM_RETURN_IF_ERROR(MakeDirs(reports_dir));
  std::ostringstream md, json;
  MarkdownReporter().Report(configs, {}, md);
  JsonReporter().Report(configs, {}, json);
  TM_RETURN_IF_ERROR(WriteFileAtomically(reports_dir + "/SUPPORT.md", md.str()));
  return WriteFileAtomically(reports_dir + "/support.json", json.str());
}

}  // namespace tmx::matrix
