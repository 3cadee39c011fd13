#include "matrix/history.h"

#include <algorithm>
#include <iterator>
#include <tuple>

#include "base/file_util.h"
#include "harness/column.h"

namespace tmx::matrix {
namespace {

bool IsPlainName(const std::string& part) {
  if (part.empty() || part == "." || part == "..") return false;
  return part.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
         std::string::npos;
}

bool IsSafeConfigName(const std::string& config) {
  size_t start = 0;
  while (true) {
    size_t slash = config.find('/', start);
    if (!IsPlainName(config.substr(start, slash == std::string::npos ? std::string::npos : slash - start))) {
      return false;
    }
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

// The identity of a measurement, in file order.
std::tuple<std::string, std::string, std::string, std::string, std::string> Identity(const CellResult& r) {
  return {r.provenance.verified_at, r.key.device, r.provenance.host, r.key.config, ColumnOf(r)};
}

std::string TextOf(const std::vector<CellResult>& records) {
  std::string text;
  for (const CellResult& r : records) text += JournalLine(r) + "\n";
  return text;
}

// Reads the file of `config` on `device_type`; NotFound is an empty history.
StatusOr<std::vector<CellResult>> ReadCellFile(const std::string& path, const std::string& config,
                                               const std::string& device_type) {
  std::vector<std::string> origins;
  StatusOr<std::vector<CellResult>> records = ReadJournal(path, nullptr, &origins);
  if (!records.ok()) {
    if (records.status().code() == Status::Code::kNotFound) return std::vector<CellResult>();
    return records.status().WithContext("history");
  }
  for (size_t i = 0; i < records->size(); ++i) {
    const CellResult& r = (*records)[i];
    if (r.key.config != config || r.device_type != device_type) {
      return Status::InvalidArgument(origins[i] + ": history holds a record of " + r.key.config + " on " +
                                     r.key.device + " in the file of " + config + " on " + device_type +
                                     "; fix: move that line to its own cell's file");
    }
  }
  return records;
}

}  // namespace

std::string HistoryDir(const std::string& reports_dir) { return reports_dir + "/history"; }

StatusOr<std::string> HistoryFile(const std::string& history_dir, const std::string& config,
                                  const std::string& device_type) {
  if (!IsSafeConfigName(config)) {
    return Status::InvalidArgument("history: config name \"" + config +
                                   "\" is not a relative path of plain names, so it names no history file");
  }
  if (device_type.empty() ||
      device_type.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    return Status::InvalidArgument("history: device type \"" + device_type + "\" is not a plain lowercase word");
  }
  return history_dir + "/" + config + "/" + device_type + ".jsonl";
}

CellResult ForHistory(CellResult record) {
  std::string& tail = record.output_tail;
  size_t cut = tail.size();
  // A final line break ends the last line rather than starting another.
  if (cut > 0 && tail[cut - 1] == '\n') --cut;
  for (int lines = 0; lines < kHistoryTailLines && cut != std::string::npos; ++lines) {
    cut = cut == 0 ? std::string::npos : tail.rfind('\n', cut - 1);
  }
  if (cut != std::string::npos) tail.erase(0, cut + 1);
  if (tail.size() > kHistoryTailBytes) {
    size_t start = tail.size() - kHistoryTailBytes;
    while (start < tail.size() && (static_cast<unsigned char>(tail[start]) & 0xC0) == 0x80) ++start;
    tail.erase(0, start);
  }
  return record;
}

std::vector<CellResult> NormalizeHistory(std::vector<CellResult> records) {
  std::vector<std::pair<std::string, size_t>> order;  // (journal line, index) for a total, input-free order
  order.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) order.emplace_back(JournalLine(records[i]), i);
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const CellResult& x = records[a.second];
    const CellResult& y = records[b.second];
    if (Identity(x) != Identity(y)) return Identity(x) < Identity(y);
    return a.first < b.first;
  });
  std::vector<CellResult> out;
  for (const auto& [line, i] : order) {
    if (!out.empty() && Identity(out.back()) == Identity(records[i])) continue;
    out.push_back(std::move(records[i]));
  }
  return out;
}

Status AddToHistory(const std::string& history_dir, const std::vector<CellResult>& records, HistoryUpdate* update) {
  // By file: (config, device type) and the records to add.
  std::map<std::string, std::pair<std::pair<std::string, std::string>, std::vector<CellResult>>> added;
  for (const CellResult& r : records) {
    StatusOr<std::string> path = HistoryFile(history_dir, r.key.config, r.device_type);
    if (!path.ok()) return path.status();
    auto& slot = added[*path];
    slot.first = {r.key.config, r.device_type};
    slot.second.push_back(ForHistory(r));
  }
  // Every file is rendered before any is written, so an unreadable one stops the update with none changed.
  std::vector<std::pair<std::string, std::string>> writes;
  int count = 0;
  for (auto& [path, cell_records] : added) {
    StatusOr<std::vector<CellResult>> existing =
        ReadCellFile(path, cell_records.first.first, cell_records.first.second);
    if (!existing.ok()) return existing.status();
    std::string before = TextOf(*existing);
    size_t had = NormalizeHistory(*existing).size();
    std::vector<CellResult> all = std::move(existing).value();
    all.insert(all.end(), cell_records.second.begin(), cell_records.second.end());
    all = NormalizeHistory(std::move(all));
    count += static_cast<int>(all.size() - had);
    std::string after = TextOf(all);
    if (after != before) writes.emplace_back(path, std::move(after));
  }
  for (const auto& [path, text] : writes) {
    TM_RETURN_IF_ERROR(MakeDirs(ParentDir(path)));
    TM_RETURN_IF_ERROR(WriteFileAtomically(path, text));
  }
  if (update) *update = {count, static_cast<int>(writes.size())};
  return Status::OK();
}

StatusOr<History> ReadHistory(const std::string& history_dir, const std::vector<ConfigColumn>& cells) {
  History history;
  std::map<std::string, std::vector<CellResult>> files;  // each file read once, for all its columns
  for (const ConfigColumn& cell : cells) {
    const std::string type = ColumnDeviceType(cell.second);
    StatusOr<std::string> path = HistoryFile(history_dir, cell.first, type);
    if (!path.ok()) return path.status();
    auto file = files.find(*path);
    if (file == files.end()) {
      StatusOr<std::vector<CellResult>> records = ReadCellFile(*path, cell.first, type);
      if (!records.ok()) return records.status();
      file = files.emplace(*path, NormalizeHistory(std::move(records).value())).first;
    }
    std::vector<CellResult> column;
    std::copy_if(file->second.begin(), file->second.end(), std::back_inserter(column),
                 [&](const CellResult& r) { return ColumnOf(r) == cell.second; });
    if (!column.empty()) history[cell] = std::move(column);
  }
  return history;
}

StatusOr<History> ReadHistoryOf(const std::string& history_dir, const std::vector<ConfigSupport>& configs) {
  std::vector<ConfigColumn> cells;
  for (const ConfigSupport& c : configs) {
    for (const auto& [column, entry] : c.entries) cells.emplace_back(c.config, column);
  }
  return ReadHistory(history_dir, cells);
}

bool InHistory(const History& history, const CellResult& record) {
  auto it = history.find({record.key.config, ColumnOf(record)});
  if (it == history.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const CellResult& h) { return Identity(h) == Identity(record); });
}

}  // namespace tmx::matrix
