#include "matrix/publish.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "harness/config_store.h"
#include "harness/file_util.h"
#include "matrix/journal.h"
#include "matrix/report.h"
#include "matrix/support_block.h"

namespace tmx::matrix {

Status WriteBackResults(const Registry& registry, const std::vector<CellResult>& records, std::ostream& log) {
  std::map<std::string, SupportEntries> updates;
  for (const auto& [key, cell] : LatestByDeviceType(records)) {
    if (registry.RecipeForConfig(key.first) == nullptr) continue;
    updates[key.first][key.second] = SupportFromCell(cell);
  }
  // Every config is rendered before any is written, so a config that cannot take its block stops the
  // write-back with no file changed.
  std::vector<std::pair<std::string, std::string>> writes;  // path, new text
  for (auto& [config, support] : updates) {
    std::string path = BuiltinConfigPath(config);
    StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    // An entry verified after the record (merged from a newer journal earlier) is not rolled back.
    StatusOr<SupportEntries> existing = ReadSupportEntries(*text, path);
    if (!existing.ok()) return existing.status();
    for (auto it = support.begin(); it != support.end();) {
      auto old = existing->find(it->first);
      if (old != existing->end() && old->second.verified_at > it->second.verified_at) {
        log << "kept " << path << " " << it->first << ": its entry (" << old->second.verified_at
            << ") is newer than the journals' record (" << it->second.verified_at << ")\n";
        it = support.erase(it);
      } else {
        ++it;
      }
    }
    StatusOr<std::string> rendered = UpdateSupport(*text, support, path);
    if (!rendered.ok()) return rendered.status();
    if (*rendered == *text) {
      log << "unchanged " << path << "\n";
    } else {
      writes.emplace_back(path, std::move(rendered).value());
    }
  }
  for (const auto& [path, text] : writes) {
    TM_RETURN_IF_ERROR(WriteFileAtomically(path, text));
    log << "updated " << path << "\n";
  }
  return Status::OK();
}

StatusOr<std::vector<ConfigSupport>> ReadBuiltinClaims(const Registry& registry) {
  std::vector<ConfigSupport> out;
  for (const RecipeSpec& recipe : registry.recipes()) {
    for (const std::string& name : recipe.configs) {
      std::string path = BuiltinConfigPath(name);
      StatusOr<std::string> text = ReadFile(path);
      if (!text.ok()) return text.status();
      StatusOr<ConfigSupport> c = ReadConfigSupport(*text, path);
      if (!c.ok()) return c.status();
      c->config = name;
      c->recipe = recipe.name;
      c->path = path;
      c->current_hash = ConfigHash(*text);
      out.push_back(std::move(c).value());
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ConfigSupport& a, const ConfigSupport& b) { return a.config < b.config; });
  return out;
}

std::vector<GeneratedReport> RenderReports(const std::vector<ConfigSupport>& configs) {
  std::ostringstream md, json;
  MarkdownReporter().Report(configs, {}, md);
  JsonReporter().Report(configs, {}, json);
  return {{"SUPPORT.md", md.str()}, {"support.json", json.str()}};
}

Status WriteReports(const Registry& registry, const std::string& reports_dir) {
  StatusOr<std::vector<ConfigSupport>> configs = ReadBuiltinClaims(registry);
  if (!configs.ok()) return configs.status();
  TM_RETURN_IF_ERROR(MakeDirs(reports_dir));
  for (const GeneratedReport& r : RenderReports(*configs)) {
    TM_RETURN_IF_ERROR(WriteFileAtomically(reports_dir + "/" + r.name, r.text));
  }
  return Status::OK();
}

Status PublishResults(const Registry& registry, const std::vector<CellResult>& records, const std::string& reports_dir,
                      std::ostream& log) {
  TM_RETURN_IF_ERROR(MakeDirs(reports_dir));
  TM_RETURN_IF_ERROR(WriteBackResults(registry, records, log));
  TM_RETURN_IF_ERROR(WriteReports(registry, reports_dir));
  log << "wrote " << reports_dir << "/SUPPORT.md and " << reports_dir << "/support.json\n";
  return Status::OK();
}

}  // namespace tmx::matrix
