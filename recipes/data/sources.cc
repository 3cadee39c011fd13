#include "recipes/data/sources.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "base/file_util.h"
#include "base/folder.h"
#include "base/text.h"
#include "harness/config_store.h"

namespace tmx::data {
namespace {

bool IsLocalFormat(const std::string& source) {
  return source == "json" || source == "jsonl" || source == "csv" || source == "text";
}

std::string Extension(const std::string& path) {
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return path.substr(dot + 1);
}

std::string FormatOf(const std::string& path) {
  std::string ext = Extension(path);
  if (ext == "json" || ext == "jsonl" || ext == "csv") return ext;
  if (ext == "txt") return "text";
  return "";
}

// A file under a dataset folder: its path relative to the folder and the file it finally names.
struct ListedFile {
  std::string relative;
  dev_t dev = 0;
  ino_t ino = 0;
};

// Data files under `dir` (recursive, sorted), relative to it. Hidden entries are skipped; linked folders are
// entered, each folder once (a link loop is an error naming the link, not the same records read again).
StatusOr<std::vector<ListedFile>> ListFiles(const std::string& dir) {
  WalkOptions options;
  options.skip_hidden = true;
  options.follow_folder_links = true;
  std::vector<ListedFile> files;
  Status s = WalkFolder(dir, options, [&](const FolderEntry& e) {
    files.push_back({e.relative, e.st.st_dev, e.st.st_ino});
    return Status::OK();
  });
  if (!s.ok()) return s.WithContext("dataset folder " + dir);
  return files;
}

// InvalidArgument when two of a split's files are one file reached by two paths (a link beside its target, two
// links to one file): its records would be read twice.
Status CheckEachFileOnce(const std::string& dir, const std::vector<ListedFile>& files) {
  std::map<std::pair<dev_t, ino_t>, const ListedFile*> seen;
  for (const ListedFile& f : files) {
    auto [it, added] = seen.emplace(std::make_pair(f.dev, f.ino), &f);
    if (added) continue;
    return Status::InvalidArgument("dataset folder " + dir + ": " + dir + "/" + f.relative + " is the same file as " +
                                   dir + "/" + it->second->relative +
                                   " (a link), so its records would be read twice; fix: remove one of the two");
  }
  return Status::OK();
}

// Whether relative path `file` belongs to `split`: a path component starting with the split's name.
bool InSplit(const std::string& file, const std::string& split) {
  for (const std::string& part : SplitList(file, '/')) {
    if (part.rfind(split, 0) == 0) return true;
  }
  return false;
}

struct Slice {
  std::string name;
  std::string begin, end;  // as written, "" when open
};

StatusOr<Slice> ParseSplit(const std::string& split) {
  Slice s;
  size_t bracket = split.find('[');
  s.name = split.substr(0, bracket);
  if (bracket == std::string::npos) return s;
  size_t colon = split.find(':', bracket);
  if (split.back() != ']' || colon == std::string::npos || s.name.empty()) {
    return Status::InvalidArgument("split \"" + split +
                                   "\" is not a split name or a slice; fix: write e.g. train, "
                                   "train[:100] or train[:10%]");
  }
  s.begin = split.substr(bracket + 1, colon - bracket - 1);
  s.end = split.substr(colon + 1, split.size() - colon - 2);
  return s;
}

// A bound of a slice over n records: "" (open), a count, or a percentage; negative counts from the end.
StatusOr<int64_t> Bound(const std::string& text, int64_t n, int64_t open, const std::string& split) {
  if (text.empty()) return open;
  bool percent = text.back() == '%';
  std::string number = percent ? text.substr(0, text.size() - 1) : text;
  char* end = nullptr;
  long long v = std::strtoll(number.c_str(), &end, 10);
  if (number.empty() || *end != '\0') {
    return Status::InvalidArgument("split \"" + split + "\": \"" + text +
                                   "\" is not a whole number or percentage; "
                                   "fix: write e.g. train[:100] or train[:10%]");
  }
  int64_t at = percent ? (n * v + 50) / 100 : v;  // Hugging Face rounds percentages to the nearest record
  if (at < 0) at += n;
  return std::clamp<int64_t>(at, 0, n);
}

std::string MissingHubMessage(const std::string& id, const std::string& dir) {
  return "dataset " + id + " is not on this machine: " + dir +
         "/ does not exist (runs never download); fix: `tune download " + id +
         " --repo-type dataset` fetches it there, or put the dataset's files there (.json, .jsonl, .csv or .txt), "
         "set $TUNE_MATRIX_DATA to the folder that holds " + id +
         "/, or use source: json with data_files: <your file>";
}

}  // namespace

std::string ShippedDatasetsDir() { return CheckoutConfigDir() + "/../recipes/data/datasets"; }

std::string DescribeSource(const SourceOptions& options) {
  if (IsLocalFormat(options.source)) return options.source + " files " + JoinStrings(options.data_files, ", ");
  if (IsDirectory(options.source)) return "folder " + options.source;
  return "hub id " + options.source + " in " + DatasetRoot();
}

StatusOr<std::vector<SourceFile>> ResolveSource(const SourceOptions& options) {
  StatusOr<Slice> slice = ParseSplit(options.split);
  if (!slice.ok()) return slice.status();
  std::vector<SourceFile> files;
  if (options.source.empty()) {
    return Status::InvalidArgument(
        "source is not set; fix: set source to a hub id (e.g. yahma/alpaca-cleaned) or "
        "to json, jsonl, csv or text with data_files");
  }
  if (IsLocalFormat(options.source)) {
    if (options.data_files.empty()) {
      return Status::InvalidArgument("source " + options.source +
                                     " needs data_files; fix: set data_files to the "
                                     "local file(s) to read");
    }
    for (const std::string& path : options.data_files) {
      if (!PathExists(path)) {  // anything else there (a FIFO, a folder) is refused by name when read
        return Status::NotFound("data_files " + path + " does not exist; fix: put the " + options.source +
                                " file there, or set data_files to where it is");
      }
      files.push_back({path, options.source});
    }
  } else {
    bool is_folder = IsDirectory(options.source);
    std::string base = is_folder ? options.source : DatasetRoot() + "/" + options.source;
    if (!is_folder && !IsDirectory(base) && IsDirectory(ShippedDatasetsDir() + "/" + options.source)) {
      base = ShippedDatasetsDir() + "/" + options.source;
    }
    std::string dir = options.data_dir.empty() ? base : base + "/" + options.data_dir;
    if (!IsDirectory(dir)) {
      if (is_folder || IsDirectory(base)) {
        return Status::NotFound("dataset folder " + dir + "/ does not exist; fix: put the dataset's " +
                                options.data_dir + " files there, or set data_dir to where they are");
      }
      return Status::NotFound(MissingHubMessage(options.source, base));
    }
    StatusOr<std::vector<ListedFile>> all = ListFiles(dir);
    if (!all.ok()) return all.status();
    std::vector<ListedFile> usable, in_split;
    std::vector<std::string> unsupported;
    for (const ListedFile& f : *all) {
      std::string ext = Extension(f.relative);
      if (!FormatOf(f.relative).empty()) {
        usable.push_back(f);
      } else if (ext == "parquet" || ext == "arrow") {
        unsupported.push_back(f.relative);
      }
    }
    for (const ListedFile& f : usable) {
      if (InSplit(f.relative, slice->name)) in_split.push_back(f);
    }
    bool any_named = std::any_of(usable.begin(), usable.end(), [](const ListedFile& f) {
      return InSplit(f.relative, "train") || InSplit(f.relative, "validation") || InSplit(f.relative, "test");
    });
    if (in_split.empty() && !any_named && slice->name == "train") in_split = usable;
    if (in_split.empty()) {
      std::string found = unsupported.empty()
                              ? "no .json, .jsonl, .csv or .txt file"
                              : "only " + JoinStrings(unsupported, ", ") + " (Parquet/Arrow are not read)";
      std::string convert = unsupported.empty()
                                ? ""
                                : " (e.g. python3 -c \"import pandas; pandas.read_parquet('" + unsupported[0] +
                                      "').to_json('" + slice->name + ".jsonl', orient='records', lines=True)\")";
      return Status::NotFound("dataset folder " + dir + "/ has " + found + " for split " + slice->name +
                              "; fix: put the split's records there as " + slice->name +
                              ".jsonl (one JSON object per line), .json, .csv or .txt" + convert);
    }
    TM_RETURN_IF_ERROR(CheckEachFileOnce(dir, in_split));
    for (const ListedFile& f : in_split) files.push_back({dir + "/" + f.relative, FormatOf(f.relative)});
  }
  return files;
}

StatusOr<std::vector<Record>> LoadSource(const SourceOptions& options) {
  StatusOr<std::vector<SourceFile>> files = ResolveSource(options);
  if (!files.ok()) return files.status();
  StatusOr<Slice> slice = ParseSplit(options.split);
  if (!slice.ok()) return slice.status();
  std::vector<Record> records;
  for (const auto& [path, format] : *files) {
    StatusOr<std::vector<Record>> part = ReadRecords(path, format);
    if (!part.ok()) return part.status();
    records.insert(records.end(), std::make_move_iterator(part->begin()), std::make_move_iterator(part->end()));
  }
  int64_t n = static_cast<int64_t>(records.size());
  StatusOr<int64_t> begin = Bound(slice->begin, n, 0, options.split);
  if (!begin.ok()) return begin.status();
  StatusOr<int64_t> end = Bound(slice->end, n, n, options.split);
  if (!end.ok()) return end.status();
  if (*end < *begin) *end = *begin;
  return std::vector<Record>(std::make_move_iterator(records.begin() + *begin),
                             std::make_move_iterator(records.begin() + *end));
}

}  // namespace tmx::data
