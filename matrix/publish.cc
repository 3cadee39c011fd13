#include "matrix/publish.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/clock.h"
#include "base/file_util.h"
#include "base/folder.h"
#include "base/input_file.h"
#include "base/text.h"
#include "harness/config_store.h"
#include "matrix/git_show.h"
#include "matrix/html_report.h"
#include "matrix/journal.h"
#include "matrix/record_rules.h"
#include "matrix/report.h"
#include "matrix/support_block.h"

namespace tmx::matrix {

namespace {

// A built-in config that is a symbolic link (git stores them) would have its block written into the file it
// points to, which may be another config or any file on the machine: refused before anything is written.
// A folder on the way that is a link outside the configs folder is refused the same way.
Status CheckOwnFile(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::OK();  // the reader names a missing file
  if (!S_ISLNK(st.st_mode)) {
    char real_dir[PATH_MAX], real_file[PATH_MAX];
    if (::realpath(BuiltinConfigDir().c_str(), real_dir) == nullptr || ::realpath(path.c_str(), real_file) == nullptr) {
      return Status::OK();
    }
    if (std::string(real_file).rfind(std::string(real_dir) + "/", 0) == 0) return Status::OK();
    return Status::InvalidArgument(path + ": lies outside the configs folder " + BuiltinConfigDir() + " (it is " +
                                   real_file + ", reached through a linked folder); the matrix writes support "
                                   "blocks only inside the configs folder; fix: replace the linked folder by a copy");
  }
  StatusOr<std::string> target = ResolveSymlinks(path);
  return Status::InvalidArgument(
      path + ": is a symbolic link" + (target.ok() ? " to " + *target : std::string()) +
      "; the matrix writes each config's support block into the config's own file and never through a link; "
      "fix: replace the link by a copy of the file it names (cp --remove-destination \"$(readlink -f " + path +
      ")\" " + path + ")");
}

}  // namespace

namespace {

// Which of a config's entries `support` (the records' new entries) replaces: an entry verified after the record
// (merged from a newer journal earlier) is not rolled back, unless it is dated after this machine's clock (such
// an entry would pin its cell for ever); a disturbed record keeps the entry's speeds. Erases the entries kept.
void KeepNewerEntries(const std::string& path, const std::string& config, const SupportEntries& existing,
                      const std::map<ConfigColumn, const CellResult*>& disturbed, int64_t now,
                      SupportEntries* support, std::ostream& log, const PublishLog& how) {
  WriteBackTally none;
  WriteBackTally& tally = how.tally != nullptr ? *how.tally : none;
  for (auto it = support->begin(); it != support->end();) {
    auto old = existing.find(it->first);
    ++tally.statuses[it->second.status];
    if (old != existing.end() && DatedAhead(old->second.verified_at, now)) {
      log << "replaced " << path << " " << it->first << ": its entry is dated " << old->second.verified_at
          << ", after this machine's clock (" << FormatUtc(now) << ")\n";
    } else if (old != existing.end() && old->second.verified_at > it->second.verified_at) {
      if (how.verbose) {
        log << "kept " << path << " " << it->first << ": its entry (" << old->second.verified_at
            << ") is newer than the journals' record (" << it->second.verified_at << ")\n";
      }
      ++tally.kept_newer;
      it = support->erase(it);
      continue;
    } else if (auto cell = disturbed.find({config, it->first}); cell != disturbed.end()) {
      const bool marked = KeepOrMarkSpeeds(old != existing.end() ? &old->second : nullptr, *cell->second, &it->second);
      ++tally.disturbed;
      if (marked) ++tally.disturbed_published;
      if (how.verbose) {
        log << (marked ? "published the speeds of " : "kept the speeds of ") << path << " " << it->first
            << (marked ? " marked: the new record was measured beside other work (--accept-disturbed)\n"
                       : ": the new record was measured beside other work (disturbed)\n");
      }
    }
    ++it;
  }
}

// Counts each entry written back as new, updated or unchanged, comparing the config's entries before with
// those its rendered block reads back as (rounded and summarised as the block holds them).
void CountWrittenEntries(const SupportEntries& before, const SupportEntries& written, const std::string& rendered,
                         const std::string& path, WriteBackTally* tally) {
  StatusOr<SupportEntries> after = ReadSupportEntries(rendered, path);
  for (const auto& [column, entry] : written) {
    auto old = before.find(column);
    if (old == before.end()) {
      ++tally->new_entries;
    } else if (after.ok() && after->count(column) && after->at(column) == old->second) {
      ++tally->unchanged;
    } else {
      ++tally->updated;
    }
  }
}

}  // namespace

std::string TallyLine(const WriteBackTally& t) {
  const int cells = t.new_entries + t.updated + t.unchanged + t.kept_newer;
  if (cells == 0) return "";
  std::vector<std::string> what;
  if (t.new_entries > 0) what.push_back(std::to_string(t.new_entries) + " new");
  if (t.updated > 0) what.push_back(std::to_string(t.updated) + " updated");
  if (t.unchanged > 0) what.push_back(std::to_string(t.unchanged) + " unchanged");
  if (t.kept_newer > 0) what.push_back(std::to_string(t.kept_newer) + " kept (a newer entry stands)");
  std::vector<std::string> statuses;
  for (const CellStatusInfo& info : CellStatuses()) {  // in the order messages list statuses
    auto n = t.statuses.find(info.name);
    if (n != t.statuses.end() && n->second > 0) statuses.push_back(std::to_string(n->second) + " " + info.name);
  }
  std::string line = "Tally: " + Counted(cells, "cell") + ": " + JoinStrings(what, ", ");
  if (!statuses.empty()) line += "; " + JoinStrings(statuses, ", ");
  if (t.disturbed > 0) {
    line += "; " + std::to_string(t.disturbed) + " measured beside other work (status recorded, speeds kept" +
            (t.disturbed_published > 0
                 ? "; " + std::to_string(t.disturbed_published) + " published marked, --accept-disturbed)"
                 : ")");
  }
  return line + "; " + Counted(t.files_written, "config file") + " updated";
}

Status WriteBackResults(const Registry& registry, const std::vector<CellResult>& records, std::ostream& log,
                        const PublishLog& how) {
  const int64_t now = UnixNow();
  std::map<std::string, SupportEntries> updates;
  // (config, column) measured beside other work, with the record
  std::map<ConfigColumn, const CellResult*> disturbed;
  const std::map<ConfigColumn, CellResult> latest = LatestByColumn(records);
  for (const auto& [key, cell] : latest) {
    if (registry.RecipeForConfig(key.first) == nullptr) continue;
    updates[key.first][key.second] = SupportFromCell(cell);
    if (!cell.disturbed.empty()) disturbed[key] = &cell;
  }
  // Every config is rendered before any is written, so a config that cannot take its block stops the
  // write-back with no file changed.
  std::vector<std::pair<std::string, std::string>> writes;  // path, new text
  for (auto& [config, support] : updates) {
    std::string path = BuiltinConfigPath(config);
    TM_RETURN_IF_ERROR(CheckOwnFile(path));
    StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    StatusOr<SupportEntries> existing = ReadSupportEntries(*text, path);
    if (!existing.ok()) return existing.status();
    KeepNewerEntries(path, config, *existing, disturbed, now, &support, log, how);
    StatusOr<std::string> rendered = UpdateSupport(*text, support, path);
    if (!rendered.ok()) return rendered.status();
    if (how.tally != nullptr) CountWrittenEntries(*existing, support, *rendered, path, how.tally);
    TM_RETURN_IF_ERROR(CheckConfigFitsReaders(path, rendered->size()));
    if (*rendered == *text) {
      if (how.verbose) log << "unchanged " << path << "\n";
    } else {
      writes.emplace_back(path, std::move(rendered).value());
    }
  }
  for (const auto& [path, text] : writes) {
    TM_RETURN_IF_ERROR(WriteFileAtomically(path, text));
    if (how.verbose) log << "updated " << path << "\n";
    if (how.tally != nullptr) ++how.tally->files_written;
  }
  return Status::OK();
}

Status RecordHistory(const Registry& registry, const std::vector<CellResult>& records, const std::string& reports_dir,
                     std::ostream& log) {
  std::vector<CellResult> builtin;
  for (const CellResult& r : records) {
    if (registry.RecipeForConfig(r.key.config) != nullptr) builtin.push_back(r);
  }
  HistoryUpdate update;
  std::string dir = HistoryDir(reports_dir);
  TM_RETURN_IF_ERROR(AddToHistory(dir, builtin, &update));
  if (update.added > 0) {
    log << "added " << update.added << " measurement(s) to " << dir << " (" << update.files_written << " file(s))\n";
  }
  return Status::OK();
}

StatusOr<std::vector<ConfigSupport>> ReadBuiltinClaims(const Registry& registry) {
  std::vector<ConfigSupport> out;
  for (const RecipeSpec& recipe : registry.recipes()) {
    for (const std::string& name : recipe.configs) {
      std::string path = BuiltinConfigPath(name);
      StatusOr<std::string> text = ReadFile(path, ConfigInput());  // what validate, run and plan take
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

const std::vector<ReportFile>& ReportFiles() {
  static const std::vector<ReportFile> files = {
      {"SUPPORT.md", [](const History&, const ReportOptions&) -> std::unique_ptr<SupportReporter> {
         return std::make_unique<MarkdownReporter>();
       }},
      {"support.json", [](const History&, const ReportOptions&) -> std::unique_ptr<SupportReporter> {
         return std::make_unique<JsonReporter>();
       }},
      {"index.html", [](const History& history, const ReportOptions& options) -> std::unique_ptr<SupportReporter> {
         return std::make_unique<HtmlReporter>(history, HtmlReportOptions{options.repository_url});
       }},
  };
  return files;
}

std::string ReportFileList(const std::string& prefix, const std::string& conjunction) {
  std::vector<std::string> names;
  for (const ReportFile& f : ReportFiles()) names.push_back(prefix + f.file);
  return JoinAlternatives(names, conjunction);
}

std::vector<GeneratedReport> RenderReports(const std::vector<ConfigSupport>& configs, const History& history,
                                           const ReportOptions& options) {
  std::vector<GeneratedReport> reports;
  for (const ReportFile& f : ReportFiles()) {
    std::ostringstream text;
    f.reporter(history, options)->Report(configs, {}, text);
    reports.push_back({f.file, text.str()});
  }
  return reports;
}

Status WriteReports(const Registry& registry, const std::string& reports_dir,
                    const std::optional<ReportOptions>& options) {
  StatusOr<std::vector<ConfigSupport>> configs = ReadBuiltinClaims(registry);
  if (!configs.ok()) return configs.status();
  StatusOr<History> history = ReadHistoryOf(HistoryDir(reports_dir), *configs);
  if (!history.ok()) return history.status();
  TM_RETURN_IF_ERROR(MakeDirs(reports_dir));
  const ReportOptions rendering = options ? *options : ReportOptions{OriginWebUrl(reports_dir)};
  for (const GeneratedReport& r : RenderReports(*configs, *history, rendering)) {
    TM_RETURN_IF_ERROR(WriteFileAtomically(reports_dir + "/" + r.name, r.text));
  }
  return Status::OK();
}

Status PublishResults(const Registry& registry, const std::vector<CellResult>& records, const std::string& reports_dir,
                      std::ostream& log, const PublishLog& how) {
  TM_RETURN_IF_ERROR(MakeDirs(reports_dir));
  // Temporary files a killed write left behind (their writer's pid is gone) are removed first. Callers hold
  // the checkout lock, so no writer of this checkout is running: any age will do.
  StaleTempOptions stale;
  stale.min_age_s = 0;
  for (const std::string& dir : {BuiltinConfigDir(), reports_dir}) {
    StatusOr<std::vector<std::string>> removed = RemoveStaleTempFiles(dir, stale);
    if (!removed.ok()) return removed.status();
    for (const std::string& path : *removed) log << "removed " << path << ", left by a write that was killed\n";
  }
  // What could refuse (a damaged config block or history file) is read first, so it stops the publish with
  // nothing written.
  StatusOr<std::vector<ConfigSupport>> claims = ReadBuiltinClaims(registry);
  if (!claims.ok()) return claims.status();
  StatusOr<History> history = ReadHistoryOf(HistoryDir(reports_dir), *claims);
  if (!history.ok()) return history.status();
  // The configs first: their write-back renders every config and refuses (a block past the size its readers take)
  // before it writes any, so a refusal leaves history as it was too.
  TM_RETURN_IF_ERROR(WriteBackResults(registry, records, log, how));
  TM_RETURN_IF_ERROR(RecordHistory(registry, records, reports_dir, log));
  TM_RETURN_IF_ERROR(WriteReports(registry, reports_dir));
  log << "wrote " << ReportFileList(reports_dir + "/", "and") << "\n";
  return Status::OK();
}

Status PublishJournalResults(const std::vector<CellResult>& records, const std::string& reports_dir,
                             std::ostream& log) {
  TM_RETURN_IF_ERROR(MakeDirs(reports_dir));
  const std::string dir = HistoryDir(reports_dir);
  HistoryUpdate update;
  TM_RETURN_IF_ERROR(AddToHistory(dir, records, &update));
  if (update.added > 0) {
    log << "added " << update.added << " measurement(s) to " << dir << " (" << update.files_written << " file(s))\n";
  }
  std::vector<ConfigColumn> cells;
  for (const auto& [cell, record] : LatestByColumn(records)) cells.push_back(cell);
  StatusOr<History> history = ReadHistory(dir, cells);
  if (!history.ok()) return history.status();
  std::map<std::string, ConfigSupport> configs;
  for (const auto& [cell, measured] : *history) {
    if (measured.empty()) continue;
    const CellResult newest = LatestByColumn(measured).begin()->second;
    SupportEntry entry = SupportFromCell(newest);
    if (!newest.disturbed.empty()) {
      std::vector<CellResult> calm;
      std::copy_if(measured.begin(), measured.end(), std::back_inserter(calm),
                   [](const CellResult& r) { return r.disturbed.empty(); });
      std::optional<SupportEntry> previous;
      if (!calm.empty()) previous = SupportFromCell(LatestByColumn(calm).begin()->second);
      KeepOrMarkSpeeds(previous ? &*previous : nullptr, newest, &entry);
    }
    ConfigSupport& config = configs[cell.first];
    config.config = cell.first;
    config.recipe = newest.recipe;
    config.current_hash = newest.config_hash;
    if (entry.status == CellStatusName(CellStatus::kRuns)) config.supported_devices.push_back(cell.second);
    config.entries[cell.second] = std::move(entry);
  }
  std::vector<ConfigSupport> sorted;
  for (auto& [name, config] : configs) {
    AddTorchSummaries(&config.entries);  // as a block would hold them
    sorted.push_back(std::move(config));
  }
  for (const GeneratedReport& r : RenderReports(sorted, *history, {OriginWebUrl(reports_dir)})) {
    TM_RETURN_IF_ERROR(WriteFileAtomically(reports_dir + "/" + r.name, r.text));
  }
  log << "wrote " << ReportFileList(reports_dir + "/", "and") << "\n";
  return Status::OK();
}

}  // namespace tmx::matrix
