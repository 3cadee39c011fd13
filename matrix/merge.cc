#include "matrix/merge.h"

#include <algorithm>
#include <cctype>

#include "harness/device.h"
#include "harness/file_util.h"
#include "matrix/journal.h"
#include "matrix/publish.h"

namespace tmx::matrix {
namespace {

// "YYYY-MM-DDTHH:MM:SSZ", the one form whose text order is time order.
bool IsUtcTimestamp(const std::string& s) {
  static const char kForm[] = "dddd-dd-ddTdd:dd:ddZ";
  if (s.size() != sizeof(kForm) - 1) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (kForm[i] == 'd' ? !std::isdigit(static_cast<unsigned char>(s[i])) : s[i] != kForm[i]) return false;
  }
  return true;
}

Status CheckBelongs(const CellResult& r, const std::string& where, const Registry& registry) {
  const char* fix = "; fix: merge only journals written by this checkout's tune-matrix, or delete that line";
  const RecipeSpec* recipe = registry.RecipeForConfig(r.key.config);
  if (recipe == nullptr) {
    return Status::InvalidArgument(where + ": config \"" + r.key.config +
                                   "\" is not a built-in config of this checkout (a foreign journal, or one from "
                                   "a branch with other configs)" +
                                   fix);
  }
  if (r.recipe != recipe->name) {
    return Status::InvalidArgument(where + ": config \"" + r.key.config + "\" is recorded with recipe \"" + r.recipe +
                                   "\" but belongs to recipe \"" + recipe->name + "\"" + fix);
  }
  StatusOr<DeviceSelector> device = ParseDeviceSelector(r.key.device);
  if (!device.ok() || device->is_auto) {
    return Status::InvalidArgument(where + ": device \"" + r.key.device +
                                   "\" is not a device string such as cpu or "
                                   "cuda:0" +
                                   fix);
  }
  if (r.device_type != device->type) {
    return Status::InvalidArgument(where + ": device type \"" + r.device_type + "\" does not match device \"" +
                                   r.key.device + "\"" + fix);
  }
  if (!IsUtcTimestamp(r.provenance.verified_at)) {
    return Status::InvalidArgument(where + ": provenance.verified_at \"" + r.provenance.verified_at +
                                   "\" is not a UTC time of the form 2026-12-02T11:30:00Z, so the record cannot be "
                                   "ordered against other journals" +
                                   fix);
  }
  return Status::OK();
}

}  // namespace

StatusOr<JournalSet> LoadJournals(const std::vector<std::string>& paths, const Registry& registry) {
  JournalSet set;
  set.paths = paths;
  for (const std::string& path : paths) {
    std::vector<std::string> origins;
    StatusOr<std::vector<CellResult>> records = ReadJournal(path, &set.warnings, &origins);
    if (!records.ok()) {
      if (records.status().code() == Status::Code::kNotFound) {
        return Status::NotFound(path +
                                ": no such journal; fix: pass the journal files the jobs wrote "
                                "(reports/journal.jsonl or the --journal path of each run)");
      }
      return records.status();
    }
    // A journal none of whose configs are built in here is foreign and refused. In a journal of this
    // project, records of a config that has since been renamed or removed are dropped with a warning, so
    // renaming a config does not make the committed journal unreadable.
    size_t known = 0;
    for (const CellResult& r : *records) known += registry.RecipeForConfig(r.key.config) != nullptr;
    for (size_t i = 0; i < records->size(); ++i) {
      const CellResult& r = (*records)[i];
      if (known > 0 && registry.RecipeForConfig(r.key.config) == nullptr) {
        set.warnings.push_back(origins[i] + ": dropped the record of \"" + r.key.config + "\" on " + r.key.device +
                               ": no longer a built-in config (renamed or removed?)");
        continue;
      }
      TM_RETURN_IF_ERROR(CheckBelongs(r, origins[i], registry));
      set.records.push_back(std::move((*records)[i]));
      set.origins.push_back(origins[i]);
    }
  }
  return set;
}

std::string CombinedJournalText(const std::vector<CellResult>& records) {
  std::string text;
  for (const auto& [key, cell] : LatestByCell(records)) {
    text += JournalLine(cell) + "\n";
  }
  return text;
}

Status MergeJournals(const JournalSet& journals, const Registry& registry, const MergeOptions& options,
                     std::ostream& log) {
  // The journal's folder first: one that cannot be made must stop the merge before any config changes.
  if (!options.journal_out.empty()) TM_RETURN_IF_ERROR(MakeDirs(ParentDir(options.journal_out)));
  TM_RETURN_IF_ERROR(PublishResults(registry, journals.records, options.reports_dir, log));
  if (!options.journal_out.empty()) {
    std::string text = CombinedJournalText(journals.records);
    TM_RETURN_IF_ERROR(WriteFileAtomically(options.journal_out, text));
    log << "wrote " << options.journal_out << " (" << std::count(text.begin(), text.end(), '\n') << " cells)\n";
  }
  return Status::OK();
}

}  // namespace tmx::matrix
