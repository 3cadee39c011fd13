#include "matrix/check.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "base/clock.h"
#include "base/file_util.h"
#include "base/text.h"
#include "harness/column.h"
#include "matrix/escape.h"
#include "matrix/history.h"
#include "matrix/html_report.h"
#include "matrix/journal.h"
#include "matrix/publish.h"
#include "matrix/record_rules.h"

namespace tmx::matrix {
namespace {

std::string Percent(double fraction) { return FormatNumber(100 * fraction, 1) + "%"; }

std::string Short(const std::string& commit) { return commit.substr(0, 12); }

// "ci-out/journal-cuda.jsonl:3, job cuda, host gpu1, commit 0123456789ab, 2026-12-02T10:00:00Z"
std::string DescribeObservation(const CellResult& cell, const std::string& origin) {
  std::string s = origin;
  if (!cell.provenance.job.empty()) s += ", job " + cell.provenance.job;
  if (!cell.provenance.host.empty()) s += ", host " + cell.provenance.host;
  if (!cell.provenance.commit.empty()) s += ", commit " + Short(cell.provenance.commit);
  return s + ", " + cell.provenance.verified_at;
}

// "verified 2026-12-01T12:00:00Z at commit 0123456789ab", or "" when neither is recorded.
std::string EntryProvenance(const SupportEntry& e) {
  std::string s;
  if (!e.verified_at.empty()) s += "verified " + e.verified_at;
  if (!e.commit.empty()) s += (s.empty() ? "" : " ") + std::string("at commit ") + Short(e.commit);
  return s;
}

// "runs (verified 2026-12-01T12:00:00Z at commit 0123456789ab)"
std::string DescribeEntry(const SupportEntry& e) {
  std::string p = EntryProvenance(e);
  return e.status + (p.empty() ? "" : " (" + p + ")");
}

// Where to look for the cause of a slowdown.
std::string CauseHint(const SupportEntry& entry, const CellResult& obs) {
  const std::string& before = entry.commit;
  const std::string& after = obs.provenance.commit;
  if (before.empty() || after.empty()) return "rerun the cell to confirm it";
  if (before == after) {
    return "both ran commit " + Short(after) + ", so the machine or its load changed: rerun the cell to confirm it";
  }
  return "look for the cause between commits " + Short(before) + " and " + Short(after);
}

class ConfigChecker {
 public:
  ConfigChecker(const ConfigSupport& config,
                const std::map<std::string, std::pair<const CellResult*, std::string>>& observed,
                const CheckOptions& options, std::vector<CheckProblem>* problems, CheckCounts* counts)
      : c_(config), observed_(observed), options_(options), problems_(problems), counts_(counts) {}

  void Check() {
    std::vector<std::string> types = c_.supported_devices;
    for (const auto& [type, entry] : c_.entries) types.push_back(type);
    for (const auto& [type, obs] : observed_) types.push_back(type);
    types = OrderColumns(types);
    std::vector<Evidence> evidence;
    for (const std::string& t : types) evidence.push_back(Resolve(t));
    for (size_t i = 0; i < types.size(); ++i) Compare(types[i], evidence[i]);
    CheckSupportedList(types);
  }

 private:
  std::string At(const std::string& type) const {
    auto it = c_.entry_lines.find(type);
    int line = it != c_.entry_lines.end()  ? it->second
               : c_.supported_devices_line ? c_.supported_devices_line
                                                  : c_.block_end_line;
    return line > 0 ? c_.path + ":" + std::to_string(line) : c_.path;
  }

  void Add(ProblemKind kind, const std::string& location, const std::string& message, const std::string& fix) {
    problems_->push_back({kind, location, message, fix});
  }

  // On a machine of the column's CPU class (or a higher one, capped to it) and torch version.
  std::string RerunFix(const std::string& column) const {
    std::optional<Column> c = ParseColumnKey(column);
    std::string devices = c ? c->device_type : column;
    if (c && !c->cpu_class.empty()) devices += " --cpu-class " + c->cpu_class;
    return "rerun and record it" +
           std::string(c && !c->torch_version.empty() ? " with torch " + c->torch_version : "") +
           ": tune-matrix run --configs '" + c_.config + "' --devices " + devices +
           " --journal rerun.jsonl --no-write-back && tune-matrix merge reports/journal.jsonl rerun.jsonl";
  }

  // The supported_devices line the block should have, given every status as it should now be.
  std::string CorrectList() const {
    std::vector<std::string> runs;
    for (const auto& [type, status] : effective_) {
      if (IsRunsStatus(status)) runs.push_back(type);
    }
    std::vector<std::string> quoted;
    for (const std::string& column : OrderColumns(runs)) quoted.push_back(YamlQuote(column));
    return "supported_devices: [" + JoinStrings(quoted, ", ") + "]";
  }

  std::string AcceptFix(const std::string& type, const std::string& status) const {
    return "if expected, record it: " + options_.accept_command + "  (it writes " + CorrectList() +
           (status.empty() ? "" : " and support." + YamlQuote(type) + ".status: " + status) + " into " + c_.path + ")";
  }

  // What is recorded and what was (freshly) observed for one column.
  struct Evidence {
    const SupportEntry* entry = nullptr;
    const CellResult* obs = nullptr;  // null when superseded by the entry or made with an older config
    std::string origin;
  };

  // First pass: reports stale entries and observations, and settles the status each column should
  // have, so that every fix can quote the whole corrected supported_devices list.
  Evidence Resolve(const std::string& type) {
    Evidence ev;
    auto e = c_.entries.find(type);
    ev.entry = e != c_.entries.end() ? &e->second : nullptr;
    auto o = observed_.find(type);
    if (o != observed_.end()) {
      ev.obs = o->second.first;
      ev.origin = o->second.second;
    }
    // A newer entry stands against an older observation, unless its date is ahead of the clock (it would
    // stand for ever): then the observation is what the entry should say.
    if (ev.obs && ev.entry && ev.obs->provenance.verified_at < ev.entry->verified_at &&
        !DatedAhead(ev.entry->verified_at, UnixNow())) {
      ev.obs = nullptr;
    }
    bool stale_obs = ev.obs && ev.obs->config_hash != c_.current_hash;
    bool stale_entry = ev.entry && ev.entry->config_hash != c_.current_hash;
    if (stale_obs || stale_entry) {
      std::string what;
      if (stale_entry) {
        what = "support entry " + DescribeEntry(*ev.entry) + " was made with config hash " +
               (ev.entry->config_hash.empty() ? "(none recorded)" : ev.entry->config_hash);
      }
      if (stale_obs) {
        what += std::string(stale_entry ? ", and " : "") + "the latest observation (" +
                DescribeObservation(*ev.obs, ev.origin) + ") ran config hash " + ev.obs->config_hash;
      }
      Add(ProblemKind::kStale, At(type),
          type + ": " + what + ", but the config has changed since (now " + c_.current_hash +
              "), so it says nothing about the config as it is",
          !stale_obs && ev.obs ? "record the fresh observation: " + options_.accept_command : RerunFix(type));
      if (stale_obs) ev.obs = nullptr;
    }
    if (ev.obs) {
      effective_[type] = CellStatusName(ev.obs->status);
    } else if (ev.entry) {
      effective_[type] = ev.entry->status;
    }
    return ev;
  }

  // Second pass: compares the recorded status with the fresh observation.
  void Compare(const std::string& type, const Evidence& ev) {
    if (!ev.obs) return;
    ++counts_->observations;
    const SupportEntry* entry = ev.entry;
    std::string observed_status = CellStatusName(ev.obs->status);
    std::string recorded = entry ? entry->status : "";
    std::string observed_text = observed_status + " (" + DescribeObservation(*ev.obs, ev.origin) + ")" +
                                (ev.obs->reason.empty() ? "" : ": " + ev.obs->reason.substr(0, 200));
    if (IsRunsStatus(recorded) && !IsRunsStatus(observed_status)) {
      Add(ProblemKind::kNewlyBroken, At(type), type + ": recorded " + DescribeEntry(*entry) + ", now " + observed_text,
          AcceptFix(type, observed_status));
    } else if (!IsRunsStatus(recorded) && IsRunsStatus(observed_status)) {
      Add(ProblemKind::kNewlyFixed, At(type),
          type + ": " + (entry ? "recorded " + DescribeEntry(*entry) : std::string("not recorded")) + ", now " +
              observed_text + "; it ran but is not listed in supported_devices",
          AcceptFix(type, entry ? observed_status : ""));
    } else if (recorded != observed_status) {
      Add(ProblemKind::kDisagrees, At(type),
          type + ": " + (entry ? "recorded " + DescribeEntry(*entry) : std::string("no support entry")) +
              ", observed " + observed_text,
          AcceptFix(type, entry ? observed_status : ""));
    } else {
      if (IsRunsStatus(recorded)) CheckSpeed(type, *entry, *ev.obs, ev.origin);
      return;
    }
    reported_.insert(type);
  }

  void CheckSpeed(const std::string& type, const SupportEntry& entry, const CellResult& obs,
                  const std::string& origin) {
    // The machine's load, not the device's speed: either side measured beside other work (CellResult::disturbed,
    // SupportEntry::speeds_disturbed).
    if (!obs.disturbed.empty() || !entry.speeds_disturbed.empty()) {
      ++counts_->speed_disturbed;
      return;
    }
    SpeedChange speed = CompareSpeed(SpeedOf(entry), SpeedOf(obs), options_.noise);
    if (speed.verdict == SpeedVerdict::kNotCompared) return;
    if (speed.verdict == SpeedVerdict::kTooShort) {
      ++counts_->speed_too_short;
      return;
    }
    ++counts_->speed_compared;
    if (speed.verdict != SpeedVerdict::kSlower) return;
    Add(ProblemKind::kSlower, At(type),
        type + ": tokens/s fell " + Percent(-speed.change) + ", from " + FormatNumber(*entry.tokens_per_second, 1) +
            " (" + EntryProvenance(entry) + ") to " + FormatNumber(*obs.tokens_per_second, 1) + " (" +
            DescribeObservation(obs, origin) + "); " + DescribeAllowance(speed, options_.noise),
        "if expected, record it: " + options_.accept_command + "; otherwise " + CauseHint(entry, obs));
  }

  // The list must name exactly the columns whose status runs. Types already reported above carry the
  // corrected list in their fix; the rest disagree within the block itself (an edit by hand).
  void CheckSupportedList(const std::vector<std::string>& types) {
    std::set<std::string> listed(c_.supported_devices.begin(), c_.supported_devices.end());
    std::string at = c_.supported_devices_line > 0
                         ? c_.path + ":" + std::to_string(c_.supported_devices_line)
                         : c_.path;
    if (listed.size() != c_.supported_devices.size()) {
      Add(ProblemKind::kDisagrees, at,
          "metadata.supported_devices names a device more than once: [" +
              JoinStrings(c_.supported_devices, ", ") + "]",
          "write " + CorrectList());
    }
    for (const std::string& t : types) {
      if (reported_.count(t)) continue;
      auto it = effective_.find(t);
      std::string status = it != effective_.end() ? it->second : "";
      bool runs = IsRunsStatus(status);
      if (listed.count(t) && !runs) {
        Add(ProblemKind::kDisagrees, at,
            t + ": metadata.supported_devices lists " + t + ", but " +
                (status.empty() ? "nothing was recorded or observed for it" : "its status is " + status),
            "write " + CorrectList());
      } else if (!listed.count(t) && runs) {
        Add(ProblemKind::kDisagrees, at, t + ": its status is runs, but metadata.supported_devices does not list it",
            "write " + CorrectList());
      }
    }
  }

  const ConfigSupport& c_;
  const std::map<std::string, std::pair<const CellResult*, std::string>>& observed_;
  const CheckOptions& options_;
  std::vector<CheckProblem>* problems_;
  CheckCounts* counts_;
  std::map<std::string, std::string> effective_;  // column -> status as it should now be recorded
  std::set<std::string> reported_;                // columns with a status problem
};

// "invalid, too_large or too_slow": the statuses of cells recorded without starting.
std::string NotStartedStatuses() {
  std::vector<std::string> names;
  for (const CellStatusInfo& info : CellStatuses()) {
    if (!info.started) names.push_back(info.name);
  }
  std::string last = names.back();
  names.pop_back();
  return JoinStrings(names, ", ") + " or " + last;
}

void CheckCoverage(const JournalSet& observed, const CheckOptions& options, std::vector<CheckProblem>* problems) {
  std::string journals = observed.paths.empty() ? "(no journal)" : JoinStrings(observed.paths, ", ");
  for (const std::string& device : options.expect_devices) {
    size_t recorded = 0, started = 0;
    for (const CellResult& r : observed.records) {
      if (r.device_type != device && r.key.device != device) continue;
      ++recorded;
      started += CellStarted(r.status);
    }
    if (started > 0) continue;
    problems->push_back(
        {ProblemKind::kNoCoverage, journals,
         device + ": the job meant to cover " + device + " ran no cell on it (" +
             (recorded == 0 ? std::string("no cell recorded for it")
                            : Counted(recorded, "cell") + " recorded, none started: all " + NotStartedStatuses()) +
             ")",
         "make sure the runner has the device (tune devices) and runs it: ci/run-device " + device});
  }
}

}  // namespace

const char* ProblemKindTitle(ProblemKind kind) {
  switch (kind) {
    case ProblemKind::kNewlyBroken:
      return "newly broken";
    case ProblemKind::kNewlyFixed:
      return "newly fixed";
    case ProblemKind::kDisagrees:
      return "claims that disagree with observations";
    case ProblemKind::kStale:
      return "stale (config changed since verified)";
    case ProblemKind::kNoCoverage:
      return "no coverage";
    case ProblemKind::kSlower:
      return "slower";
    case ProblemKind::kReports:
      return "reports out of date";
  }
  return "?";
}

std::vector<CheckProblem> CheckSupport(const std::vector<ConfigSupport>& configs, const JournalSet& observed,
                                       const CheckOptions& options, CheckCounts* counts) {
  CheckCounts ignored;
  if (counts == nullptr) counts = &ignored;
  *counts = CheckCounts();
  // config -> column -> (newest record, its origin)
  std::map<std::string, std::map<std::string, std::pair<const CellResult*, std::string>>> latest;
  for (const auto& [key, i] : LatestIndexByColumn(observed.records)) {
    latest[key.first][key.second] = {&observed.records[i], i < observed.origins.size() ? observed.origins[i] : ""};
  }
  std::vector<CheckProblem> problems;
  const std::map<std::string, std::pair<const CellResult*, std::string>> none;
  for (const ConfigSupport& c : configs) {
    auto it = latest.find(c.config);
    ConfigChecker(c, it != latest.end() ? it->second : none, options, &problems, counts).Check();
  }
  CheckCoverage(observed, options, &problems);
  for (const ConfigSupport& c : configs) {  // an entry merge would refuse as a record (matrix/record_rules.h)
    for (const auto& [type, entry] : c.entries) {
      const std::string contradiction = SupportEntryContradiction(entry);
      if (contradiction.empty()) continue;
      auto line = c.entry_lines.find(type);
      problems.push_back({ProblemKind::kDisagrees,
                          c.path + (line != c.entry_lines.end() ? ":" + std::to_string(line->second) : ""),
                          type + ": the support entry contradicts itself: " + contradiction,
                          "rerun the cell and record it: " + options.accept_command});
    }
  }
  std::stable_sort(problems.begin(), problems.end(),
                   [](const CheckProblem& a, const CheckProblem& b) { return a.kind < b.kind; });
  return problems;
}

namespace {

// The records of the journal at `path` with their origins: those `loaded` read already where it holds that
// journal once, else read now (an unreadable journal holds none here: LoadJournals reports it).
std::vector<CellResult> JournalRecords(const std::string& path, const JournalSet* loaded,
                                       std::vector<std::string>* origins) {
  if (loaded != nullptr && std::count(loaded->paths.begin(), loaded->paths.end(), path) == 1) {
    std::vector<CellResult> records;
    for (size_t i = 0; i < loaded->records.size() && i < loaded->origins.size(); ++i) {
      if (loaded->origins[i].rfind(path + ":", 0) != 0) continue;
      records.push_back(loaded->records[i]);
      origins->push_back(loaded->origins[i]);
    }
    return records;
  }
  StatusOr<std::vector<CellResult>> all = ReadJournal(path, nullptr, origins);
  if (!all.ok()) origins->clear();
  return all.ok() ? std::move(all).value() : std::vector<CellResult>();
}

}  // namespace

std::vector<CheckProblem> CheckReports(const std::vector<ConfigSupport>& configs, const std::string& reports_dir,
                                       const JournalSet* loaded) {
  std::vector<CheckProblem> problems;
  const std::string history_dir = HistoryDir(reports_dir);
  StatusOr<History> history = ReadHistoryOf(history_dir, configs);
  if (!history.ok()) {
    return {{ProblemKind::kReports, history_dir, history.status().message(),
             "repair or delete that line, then: tune-matrix report --reports-dir " + reports_dir}};
  }
  // The page is rendered with the repository address it names (the remote of the checkout that wrote it, or
  // --repo-url), so a clone with another remote, or none, checks it all the same.
  StatusOr<std::string> page = ReadFile(reports_dir + "/index.html");
  const ReportOptions rendering{page.ok() ? PageRepositoryUrl(*page) : ""};
  for (const GeneratedReport& r : RenderReports(configs, *history, rendering)) {
    std::string path = reports_dir + "/" + r.name;
    StatusOr<std::string> text = ReadFile(path);
    if (text.ok() && *text == r.text) continue;
    problems.push_back({ProblemKind::kReports, path,
                        text.ok() ? "differs from what the configs' metadata and history render to (edited by "
                                    "hand, or not regenerated after the configs changed)"
                                  : "is missing",
                        "tune-matrix report --reports-dir " + reports_dir});
  }
  // The journal beside the reports holds the measurements they were made from; each of a built-in config
  // must be in history.
  const std::string journal = reports_dir + "/journal.jsonl";
  std::vector<std::string> all_origins, origins;
  const std::vector<CellResult> all = JournalRecords(journal, loaded, &all_origins);
  if (all.empty()) return problems;
  std::set<std::string> builtin;
  for (const ConfigSupport& c : configs) builtin.insert(c.config);
  std::vector<CellResult> records;
  std::vector<ConfigColumn> cells;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!builtin.count(all[i].key.config)) continue;
    records.push_back(all[i]);
    origins.push_back(all_origins[i]);
    cells.emplace_back(records.back().key.config, ColumnOf(records.back()));
  }
  StatusOr<History> journal_history = ReadHistory(history_dir, cells);
  const std::string fix = "add the journal's records to history: tune-matrix merge " + journal;
  if (!journal_history.ok()) {
    problems.push_back({ProblemKind::kReports, history_dir, journal_history.status().message(), fix});
    return problems;
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const CellResult& r = records[i];
    if (InHistory(*journal_history, r)) continue;
    problems.push_back({ProblemKind::kReports, origins[i],
                        "the record of " + r.key.config + " on " + r.key.device + " (" + r.provenance.verified_at +
                            ") is not in " + history_dir,
                        fix});
  }
  return problems;
}

void PrintProblems(const std::vector<CheckProblem>& problems, std::ostream& out) {
  for (size_t i = 0; i < problems.size(); ++i) {
    if (i == 0 || problems[i].kind != problems[i - 1].kind) {
      size_t n = 0;
      for (const CheckProblem& p : problems) n += p.kind == problems[i].kind;
      out << ProblemKindTitle(problems[i].kind) << " (" << n << "):\n";
    }
    // Every part may quote a record's fields (a reason, a host): shown escaped, never acted on by the terminal.
    out << "  " << TerminalText(problems[i].location) << ": " << TerminalText(problems[i].message) << "\n";
    out << "    fix: " << TerminalText(problems[i].fix) << "\n";
  }
}

}  // namespace tmx::matrix
