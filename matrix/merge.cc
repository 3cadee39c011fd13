#include "matrix/merge.h"

#include <sys/stat.h>

#include <algorithm>

#include "base/file_util.h"
#include "base/text.h"
#include "matrix/journal.h"
#include "matrix/publish.h"

namespace tmx::matrix {
namespace {

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
  return Status::OK();
}

constexpr char kPassJournals[] =
    "fix: pass the journal files the jobs wrote (reports/journal.jsonl or the --journal path of each run)";

// Only a regular file can be a journal: a folder or /dev/null would read as no records (and replace the
// committed journal with none), a FIFO would block. Checked before reading, without opening it.
Status CheckIsJournalFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::NotFound(path + ": no such journal; " + kPassJournals);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(path + ": is " + DescribeFileKind(st.st_mode) + ", not a journal file; " +
                                   kPassJournals);
  }
  return Status::OK();
}

}  // namespace

StatusOr<JournalSet> LoadJournals(const std::vector<std::string>& paths, const Registry& registry, int64_t now) {
  JournalSet set;
  set.paths = paths;
  for (const std::string& path : paths) {
    TM_RETURN_IF_ERROR(CheckIsJournalFile(path));
    std::vector<std::string> origins;
    StatusOr<std::vector<CellResult>> records = ReadJournal(path, &set.warnings, &origins, now);
    if (!records.ok()) {
      if (records.status().code() == Status::Code::kNotFound) {
        return Status::NotFound(path + ": no such journal; " + kPassJournals);
      }
      return records.status();
    }
    if (records->empty()) {
      return Status::InvalidArgument(path + ": the journal holds no complete record (empty, blank or cut off); " +
                                     "merging it would record no cell; " + kPassJournals);
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
    log << "wrote " << options.journal_out << " (" << Counted(std::count(text.begin(), text.end(), '\n'), "cell") << ")\n";
  }
  return Status::OK();
}

}  // namespace tmx::matrix
