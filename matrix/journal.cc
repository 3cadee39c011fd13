#include "matrix/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/file_util.h"
#include "base/json_io.h"
#include "matrix/record_rules.h"

namespace tmx::matrix {
namespace {

using nlohmann::json;

bool IsBlank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// Whether `text` is one complete JSON value; an append cut short by a kill never is.
bool IsCompleteJson(const std::string& text) { return json::accept(text); }

// Makes sure the journal ends with a line break before anything is appended: an unfinished fragment left by
// a killed writer is cut off, a complete record that only lacks its line break is finished.
Status RepairUnfinishedTail(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path);
  if (text.status().code() == Status::Code::kNotFound) return Status::OK();
  if (!text.ok()) return text.status();
  if (text->empty() || text->back() == '\n') return Status::OK();
  size_t last_break = text->rfind('\n');
  size_t keep = last_break == std::string::npos ? 0 : last_break + 1;
  if (IsCompleteJson(text->substr(keep))) return AppendLineDurably(path, "");
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(path + ": cannot open to drop an unfinished last line (" + std::strerror(errno) + ")");
  Status s;
  if (::ftruncate(fd, static_cast<off_t>(keep)) != 0 || ::fsync(fd) != 0) {
    s = Status::IoError(path + ": cannot drop an unfinished last line (" + std::strerror(errno) + ")");
  }
  ::close(fd);
  return s;
}

// Cheap check of the last byte, so the common case does not read the whole journal on every append.
StatusOr<bool> EndsWithLineBreakOrIsEmpty(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO must not block the run
  if (fd < 0) {
    if (errno == ENOENT) return true;
    return Status::IoError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": the journal is " + DescribeFileKind(st.st_mode) +
                                   ", not a regular file; fix: pass a journal file with --journal");
  }
  off_t size = ::lseek(fd, 0, SEEK_END);
  char last = '\n';
  bool ok = size >= 0 && (size == 0 || ::pread(fd, &last, 1, size - 1) == 1);
  int saved_errno = errno;
  ::close(fd);
  if (!ok) return Status::IoError(path + ": cannot read (" + std::strerror(saved_errno) + ")");
  return last == '\n';
}

}  // namespace

std::string JournalLockPath(const std::string& journal_path) {
  const size_t slash = journal_path.find_last_of('/');
  const std::string name = slash == std::string::npos ? journal_path : journal_path.substr(slash + 1);
  return ParentDir(journal_path) + "/." + name + ".lock";
}

std::string JournalLine(const CellResult& cell) {
  // Invalid UTF-8 in the child's output must not make the record unwritable; it becomes U+FFFD.
  return DumpJson(ToJson(cell));
}

Status AppendToJournal(const std::string& path, const CellResult& cell) {
  std::string line = JournalLine(cell);
  StatusOr<bool> clean = EndsWithLineBreakOrIsEmpty(path);
  if (!clean.ok()) return clean.status();
  if (!*clean) TM_RETURN_IF_ERROR(RepairUnfinishedTail(path));
  return AppendLineDurably(path, line);
}

StatusOr<std::vector<CellResult>> ReadJournal(const std::string& path, std::vector<std::string>* warnings,
                                              std::vector<std::string>* origins, int64_t now) {
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseJournalText(*text, path, warnings, origins, now);
}

StatusOr<std::vector<CellResult>> ParseJournalText(const std::string& text, const std::string& path,
                                                   std::vector<std::string>* warnings,
                                                   std::vector<std::string>* origins, int64_t now) {
  std::vector<CellResult> cells;
  size_t pos = 0;
  for (int line_no = 1; pos < text.size(); ++line_no) {
    size_t end = text.find('\n', pos);
    bool finished = end != std::string::npos;
    std::string line = text.substr(pos, finished ? end - pos : std::string::npos);
    pos = finished ? end + 1 : text.size();
    if (IsBlank(line)) continue;
    std::string where = path + ":" + std::to_string(line_no);
    TM_RETURN_IF_ERROR(CheckJournalLineSize(line.size(), where));  // before anything parses it
    if (!finished && !IsCompleteJson(line)) {
      if (warnings) {
        warnings->push_back(where + ": skipped an unfinished last line (" + std::to_string(line.size()) +
                            " bytes without a line break; the run writing it was probably killed)");
      }
      break;
    }
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      return Status::InvalidArgument(where + ": not a JSON record (syntax error at column " +
                                     std::to_string(e.byte) + "); fix: repair or delete that line");
    } catch (const json::exception& e) {
      // A number JSON can write but a double cannot hold (1e999) is out_of_range, not a parse_error.
      return Status::InvalidArgument(where + ": not a JSON record (" + e.what() + "); fix: repair or delete that line");
    }
    StatusOr<CellResult> cell = CellResultFromJson(j, where, now);
    if (!cell.ok()) return cell.status();
    TM_RETURN_IF_ERROR(CheckRecordRules(*cell, where));  // what one field says against another
    cells.push_back(std::move(cell).value());
    if (origins) origins->push_back(where);
  }
  return cells;
}

LoadedJournal LoadJournal(const std::string& path) {
  LoadedJournal journal;
  journal.path = path;
  journal.exists = ::access(path.c_str(), F_OK) == 0;
  if (!journal.exists) return journal;
  StatusOr<std::vector<CellResult>> records = ReadJournal(path, &journal.warnings);
  if (records.ok()) {
    journal.records = std::move(records).value();
  } else {
    journal.status = records.status();
  }
  return journal;
}

StatusOr<std::vector<CellResult>> AsJournaled(const std::vector<CellResult>& appended, const std::string& path) {
  std::string text;
  for (const CellResult& r : appended) text += JournalLine(r) + "\n";
  return ParseJournalText(text, path, nullptr, nullptr, UnixNow());
}

bool Supersedes(const CellResult& a, const CellResult& b) {
  if (a.provenance.verified_at != b.provenance.verified_at) return a.provenance.verified_at > b.provenance.verified_at;
  return a.key.device >= b.key.device;
}

namespace {

// The index of the record that supersedes the others, per key.
template <typename Key, typename KeyOf>
std::map<Key, size_t> NewestIndex(const std::vector<CellResult>& cells, KeyOf key_of) {
  std::map<Key, size_t> latest;
  for (size_t i = 0; i < cells.size(); ++i) {
    auto [it, inserted] = latest.emplace(key_of(cells[i]), i);
    if (!inserted && Supersedes(cells[i], cells[it->second])) it->second = i;
  }
  return latest;
}

template <typename Key>
std::map<Key, CellResult> Records(const std::vector<CellResult>& cells, const std::map<Key, size_t>& index) {
  std::map<Key, CellResult> records;
  for (const auto& [key, i] : index) records.emplace(key, cells[i]);
  return records;
}

ConfigColumn ColumnKeyOf(const CellResult& c) { return {c.key.config, ColumnOf(c)}; }

}  // namespace

std::map<CellColumn, CellResult> LatestByCell(const std::vector<CellResult>& cells) {
  return Records(cells, NewestIndex<CellColumn>(cells, [](const CellResult& c) {
                   return CellColumn{c.key, ColumnOf(c)};
                 }));
}

std::map<ConfigColumn, size_t> LatestIndexByColumn(const std::vector<CellResult>& cells) {
  return NewestIndex<ConfigColumn>(cells, ColumnKeyOf);
}

std::map<ConfigColumn, CellResult> LatestByColumn(const std::vector<CellResult>& cells) {
  return Records(cells, LatestIndexByColumn(cells));
}

}  // namespace tmx::matrix
