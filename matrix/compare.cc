#include "matrix/compare.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "base/file_util.h"
#include "base/text.h"
#include "matrix/escape.h"
#include "matrix/git_show.h"
#include "matrix/journal.h"

namespace tmx::matrix {
namespace {

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); !from.empty() && at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// Reads journal `text` as ReadJournal reads a file, with messages naming `name`.
StatusOr<std::vector<CellResult>> ReadJournalText(const std::string& text, const std::string& name) {
  const char* tmp = getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/tune-matrix-compare-XXXXXX";
  int fd = ::mkstemp(path.data());
  if (fd < 0) return Status::IoError(path + ": cannot make a temporary file for " + name);
  ::close(fd);
  Status written = WriteFileAtomically(path, text);
  StatusOr<std::vector<CellResult>> records =
      written.ok() ? ReadJournal(path, nullptr) : StatusOr<std::vector<CellResult>>(written);
  ::unlink(path.c_str());
  if (!records.ok()) {
    const Status& s = records.status();
    std::string message = Replace(s.message(), path, name);
    return s.code() == Status::Code::kIoError ? Status::IoError(message) : Status::InvalidArgument(message);
  }
  return records;
}

std::string Short(const std::string& commit) { return commit.substr(0, 12); }

std::string Percent(double fraction) { return (fraction >= 0 ? "+" : "") + FormatNumber(100 * fraction, 1) + "%"; }

std::string Tps(const CellResult& r) {
  return r.tokens_per_second ? FormatNumber(*r.tokens_per_second, 1) : std::string("?");
}

// "(0123456789ab, 2026-11-29T10:00:00Z)": where the record was made.
std::string Where(const CellResult& r) {
  std::string s = r.provenance.commit.empty() ? "" : Short(r.provenance.commit) + ", ";
  return "(" + s + r.provenance.verified_at + ")";
}

std::string Reason(const CellResult& r) {
  std::string reason = CollapseLineBreaks(r.reason);
  if (reason.size() > 200) reason = reason.substr(0, 200) + "...";
  return reason.empty() ? "" : ": " + reason;
}

std::string Line(const CellChange& c, const SpeedNoise& noise) {
  std::string head = c.config + "  " + c.column + "  ";
  switch (c.kind) {
    case ChangeKind::kNewlyBroken:
    case ChangeKind::kNewlyFixed:
    case ChangeKind::kStatusChanged:
      return head + CellStatusName(c.before->status) + " -> " + CellStatusName(c.after->status) +
             (c.after->status == CellStatus::kRuns ? ", " + Tps(*c.after) + " tok/s" : Reason(*c.after)) + "  " +
             Where(*c.after);
    case ChangeKind::kSlower:
    case ChangeKind::kFaster:
      return head + Tps(*c.before) + " -> " + Tps(*c.after) + " tok/s (" + Percent(c.speed.change) + "; " +
             DescribeAllowance(c.speed, noise) + ")  " + Where(*c.after);
    case ChangeKind::kAppeared:
      return head + CellStatusName(c.after->status) + Reason(*c.after) + "  " + Where(*c.after);
    case ChangeKind::kDisappeared:
      return head + "was " + CellStatusName(c.before->status) + "  " + Where(*c.before);
  }
  return head;
}

constexpr ChangeKind kKinds[] = {ChangeKind::kNewlyBroken, ChangeKind::kNewlyFixed, ChangeKind::kStatusChanged,
                                 ChangeKind::kSlower,      ChangeKind::kFaster,     ChangeKind::kAppeared,
                                 ChangeKind::kDisappeared};

}  // namespace

StatusOr<CompareSide> LoadCompareSide(const std::string& spec, const std::string& repo_dir,
                                      const std::string& journal_path) {
  if (IsRegularFile(spec)) {
    StatusOr<std::vector<CellResult>> records = ReadJournal(spec, nullptr);
    if (!records.ok()) return records.status();
    return CompareSide{spec, std::move(records).value()};
  }
  StatusOr<std::string> commit = ResolveCommit(repo_dir, spec);
  if (!commit.ok()) {
    if (commit.status().code() != Status::Code::kInvalidArgument) return commit.status();
    return Status::InvalidArgument("no journal file '" + spec + "', and " + commit.status().message());
  }
  std::string label =
      spec + (spec == Short(*commit) || spec == *commit ? "" : " (" + Short(*commit) + ")") + ":" + journal_path;
  StatusOr<std::string> text = FileAtCommit(repo_dir, *commit, journal_path);
  if (!text.ok()) return text.status();
  StatusOr<std::vector<CellResult>> records = ReadJournalText(*text, label);
  if (!records.ok()) return records.status();
  return CompareSide{label, std::move(records).value()};
}

const char* ChangeKindTitle(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kNewlyBroken:
      return "newly broken";
    case ChangeKind::kNewlyFixed:
      return "newly fixed";
    case ChangeKind::kStatusChanged:
      return "status changed";
    case ChangeKind::kSlower:
      return "slower";
    case ChangeKind::kFaster:
      return "faster";
    case ChangeKind::kAppeared:
      return "appeared";
    case ChangeKind::kDisappeared:
      return "disappeared";
  }
  return "?";
}

int Comparison::Count(ChangeKind kind) const {
  return static_cast<int>(
      std::count_if(changes.begin(), changes.end(), [&](const CellChange& c) { return c.kind == kind; }));
}

int Comparison::Regressions() const { return Count(ChangeKind::kNewlyBroken) + Count(ChangeKind::kSlower); }

Comparison CompareRecords(const std::vector<CellResult>& before, const std::vector<CellResult>& after,
                          const SpeedNoise& noise) {
  Comparison c;
  std::map<ConfigColumn, CellResult> old = LatestByColumn(before);
  std::map<ConfigColumn, CellResult> now = LatestByColumn(after);
  c.before_cells = static_cast<int>(old.size());
  c.after_cells = static_cast<int>(now.size());
  for (const auto& [key, b] : old) {
    if (!now.count(key)) c.changes.push_back({ChangeKind::kDisappeared, key.first, key.second, b, std::nullopt, {}});
  }
  for (const auto& [key, a] : now) {
    auto it = old.find(key);
    if (it == old.end()) {
      c.changes.push_back({ChangeKind::kAppeared, key.first, key.second, std::nullopt, a, {}});
      continue;
    }
    const CellResult& b = it->second;
    bool ran = b.status == CellStatus::kRuns;
    bool runs = a.status == CellStatus::kRuns;
    if (ran != runs || b.status != a.status) {
      ChangeKind kind = ran ? ChangeKind::kNewlyBroken : runs ? ChangeKind::kNewlyFixed : ChangeKind::kStatusChanged;
      c.changes.push_back({kind, key.first, key.second, b, a, {}});
      continue;
    }
    if (runs && (!a.disturbed.empty() || !b.disturbed.empty())) {
      ++c.speed_disturbed;  // a speed measured beside other work is the machine's load (CellResult::disturbed)
    } else if (runs) {
      SpeedChange speed = CompareSpeed(SpeedOf(b), SpeedOf(a), noise);
      c.speed_compared += speed.verdict == SpeedVerdict::kWithinNoise || speed.verdict == SpeedVerdict::kSlower ||
                          speed.verdict == SpeedVerdict::kFaster;
      c.speed_too_short += speed.verdict == SpeedVerdict::kTooShort;
      if (speed.verdict == SpeedVerdict::kSlower || speed.verdict == SpeedVerdict::kFaster) {
        c.changes.push_back({speed.verdict == SpeedVerdict::kSlower ? ChangeKind::kSlower : ChangeKind::kFaster,
                             key.first, key.second, b, a, speed});
        continue;
      }
    }
    ++c.unchanged;
  }
  std::stable_sort(c.changes.begin(), c.changes.end(), [](const CellChange& x, const CellChange& y) {
    return std::tie(x.kind, x.config, x.column) < std::tie(y.kind, y.config, y.column);
  });
  return c;
}

void PrintComparison(const CompareSide& before, const CompareSide& after, const Comparison& comparison,
                     const SpeedNoise& noise, std::ostream& out) {
  out << "tune-matrix compare: " << before.label << " (" << Counted(comparison.before_cells, "cell") << ") -> " << after.label
      << " (" << Counted(comparison.after_cells, "cell") << ")\n";
  for (ChangeKind kind : kKinds) {
    int n = comparison.Count(kind);
    if (n == 0) continue;
    out << ChangeKindTitle(kind) << " (" << n << "):\n";
    for (const CellChange& c : comparison.changes) {
      if (c.kind == kind) out << "  " << TerminalText(Line(c, noise)) << "\n";  // a record's reason and origin
    }
  }
  int regressions = comparison.Regressions();
  out << "tune-matrix compare: ";
  if (regressions == 0) {
    out << (comparison.changes.empty() ? "no changes" : "no regressions");
  } else {
    out << regressions << " regression(s) (" << comparison.Count(ChangeKind::kNewlyBroken) << " newly broken, "
        << comparison.Count(ChangeKind::kSlower) << " slower)";
  }
  out << "; " << Counted(comparison.unchanged, "cell") << " unchanged; tokens/s compared for " << comparison.speed_compared << " ("
      << comparison.speed_too_short << " with steps under --min-step-time";
  if (comparison.speed_disturbed > 0) {
    out << "; " << comparison.speed_disturbed << " not compared, measured beside other work";
  }
  out << ")\n";
}

}  // namespace tmx::matrix
