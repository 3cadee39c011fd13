#include "matrix/html_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "base/json_io.h"
#include "base/text.h"
#include "matrix/escape.h"
#include "matrix/speed.h"

namespace tmx::matrix {

// matrix/html_report.{css,js}, compiled in by html_report_assets.cc (generated).
extern const char kHtmlReportCss[];
extern const char kHtmlReportJs[];

namespace {

using nlohmann::ordered_json;

// The statuses in the order the page's legend and status filter list them.
std::vector<const CellStatusInfo*> ListedStatuses() {
  std::vector<const CellStatusInfo*> listed;
  for (const CellStatusInfo& info : CellStatuses()) listed.push_back(&info);
  std::sort(listed.begin(), listed.end(),
            [](const CellStatusInfo* a, const CellStatusInfo* b) { return a->listed < b->listed; });
  return listed;
}

std::string Attr(const std::string& s) { return HtmlEscape(s); }

// An attribute's value as Attr wrote it, its entities read back.
std::string AttrUnescape(std::string s) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&apos;", "'"}, {"&amp;", "&"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  }
  return s;
}

// "1 config", "8 configs".
std::string Counted(size_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

// A number rounded to `decimals` places, a string for a value JSON cannot hold, null when absent.
ordered_json Number(std::optional<double> v, int decimals) {
  if (!v) return nullptr;
  if (std::isnan(*v)) return "nan";
  if (std::isinf(*v)) return *v > 0 ? "inf" : "-inf";
  double scale = std::pow(10.0, decimals);
  double rounded = std::round(*v * scale) / scale;
  return rounded == 0 ? 0.0 : rounded;  // no "-0.0"
}

std::optional<double> Gib(std::optional<int64_t> bytes) {
  if (!bytes) return std::nullopt;
  return static_cast<double>(*bytes) / (int64_t{1} << 30);
}

// One measurement of a cell's history, as the trend charts and the measurements table use it.
ordered_json HistoryPoint(const CellResult& r) {
  const std::string& reason = r.reason;
  ordered_json point = {
      {"verified_at", r.provenance.verified_at},
      {"device", r.key.device},
      {"status", CellStatusName(r.status)},
      {"reason", reason.size() > 300 ? Shortened(reason, 300) : reason},
      {"tokens_per_second", Number(r.tokens_per_second, 1)},
      {"step_time_s", Number(r.step_time_median_s, 4)},
      {"step_time_spread_s", Number(r.step_time_spread_s, 4)},
      {"peak_memory_gib", Number(Gib(r.peak_memory_bytes), 3)},
      {"predicted_memory_gib", Number(r.predicted_memory_bytes > 0 ? Gib(r.predicted_memory_bytes) : std::nullopt, 3)},
      {"device_name", r.provenance.device_name},
      {"commit", r.provenance.commit},
      {"host", r.provenance.host},
      {"job", r.provenance.job}};
  // A generation's prefill, only where measured: the points of training cells keep their bytes.
  if (r.time_to_first_token_s) point["time_to_first_token_s"] = Number(r.time_to_first_token_s, 4);
  if (r.prefill_tokens_per_second) point["prefill_tokens_per_second"] = Number(r.prefill_tokens_per_second, 1);
  return point;
}

// The measurement in `history` the entry was made from, null when history does not hold it.
const CellResult* EntryMeasurement(const SupportEntry& e, const std::vector<CellResult>* history) {
  if (history == nullptr) return nullptr;
  for (auto it = history->rbegin(); it != history->rend(); ++it) {
    if (it->provenance.verified_at == e.verified_at && it->provenance.host == e.host) return &*it;
  }
  return nullptr;
}

// The proxies that ran for a cell (CellResult's proxy fields), one object each: depth, vocabulary where cut,
// median step time, tokens/s and peak memory.
ordered_json ProxiesRan(const CellResult& r) {
  ordered_json proxies = ordered_json::array();
  auto at = [](const std::vector<double>& v, size_t i) { return i < v.size() ? std::optional<double>(v[i]) : std::nullopt; };
  for (size_t i = 0; i < r.proxy_layers.size(); ++i) {
    std::optional<double> peak = at(r.proxy_peak_memory_bytes, i);
    proxies.push_back({{"layers", Number(r.proxy_layers[i], 0)},
                       {"vocab", Number(at(r.proxy_vocab, i), 0)},
                       {"step_time_s", Number(at(r.proxy_step_times_s, i), 4)},
                       {"tokens_per_second", Number(at(r.proxy_tokens_per_second, i), 1)},
                       {"peak_memory_gib", Number(peak && *peak > 0 ? std::optional<double>(*peak / (int64_t{1} << 30))
                                                                    : std::nullopt, 3)}});
  }
  return proxies;
}

// What ran for a cell besides (or instead of) the config as written: its proxies, its repair, its float32
// reference run. Only what is recorded; {} for a cell that ran alone.
ordered_json WhatRan(const CellResult& r) {
  ordered_json ran = ordered_json::object();
  if (!r.proxy_layers.empty() || !r.proxy_note.empty()) {
    ran["proxies"] = {{"ran", ProxiesRan(r)},
                      {"real_layers", r.real_layers},
                      {"real_vocab", r.real_vocab},
                      {"cut", r.proxy_cut},
                      {"note", r.proxy_note},
                      {"ops_verified", r.ops_verified ? ordered_json(*r.ops_verified) : ordered_json(nullptr)}};
  }
  if (!r.repair.empty()) {
    ran["repair"] = {{"overrides", r.repair},
                     {"status", r.repaired_status ? CellStatusName(*r.repaired_status) : ""}};
  }
  if (!r.numeric_note.empty() || r.reference_time_s) {
    ran["reference"] = {{"dtype", r.numeric_dtype},
                        {"note", r.numeric_note},
                        {"loss", Number(r.numeric_loss, 4)},
                        {"reference_loss", Number(r.reference_loss, 4)},
                        {"loss_delta", Number(r.loss_delta, 5)},
                        {"grad_norm", Number(r.numeric_grad_norm, 4)},
                        {"reference_grad_norm", Number(r.reference_grad_norm, 4)},
                        {"grad_norm_delta", Number(r.grad_norm_delta, 5)},
                        {"time_s", Number(r.reference_time_s, 1)}};
  }
  return ran;
}

// What the entry's own measurement recorded beyond the entry (null when history does not hold it).
ordered_json EntryRecord(const SupportEntry& e, const std::vector<CellResult>* history) {
  if (const CellResult* found = EntryMeasurement(e, history)) {
    const CellResult& r = *found;
    auto optional_int = [](std::optional<int> v) { return v ? ordered_json(*v) : ordered_json(nullptr); };
    return {{"device", r.key.device},
            {"predicted_memory_bytes", r.predicted_memory_bytes},
            {"device_memory_bytes", r.device_memory_bytes},
            {"first_loss", Number(r.first_loss, 4)},
            {"last_loss", Number(r.last_loss, 4)},
            {"exit_code", optional_int(r.exit_code)},
            {"term_signal", optional_int(r.term_signal)},
            {"disturbed", r.disturbed},
            {"others_cpu_share", Number(r.others_cpu_share, 3)},
            {"steal_share", Number(r.steal_share, 3)},
            {"output_tail", r.output_tail},
            {"ran", WhatRan(r)}};
  }
  return nullptr;
}

ordered_json PageData(const std::vector<const ConfigSupport*>& configs, const std::vector<std::string>& columns,
                      const History& history, const std::string& repository_url) {
  ordered_json list = ordered_json::array();
  for (const ConfigSupport* c : configs) {
    ordered_json cells = ordered_json::object();
    for (const std::string& type : columns) {
      auto e = c->entries.find(type);
      if (e == c->entries.end()) continue;
      auto h = history.find({c->config, type});
      const std::vector<CellResult>* measurements = h == history.end() ? nullptr : &h->second;
      ordered_json points = ordered_json::array();
      if (measurements) {
        for (const CellResult& r : *measurements) points.push_back(HistoryPoint(r));
      }
      cells[type] = {{"entry", SupportEntryToJson(e->second)},
                     {"record", EntryRecord(e->second, measurements)},
                     {"history", std::move(points)}};
    }
    list.push_back({{"config", c->config},
                    {"family", ConfigFamily(c->config)},
                    {"recipe", c->recipe},
                    {"cells", std::move(cells)}});
  }
  // What peak memory is on each column's device type (PeakMemoryMeaning), for the details panel.
  ordered_json peak_memory = ordered_json::object();
  for (const std::string& type : columns) peak_memory[type] = PeakMemoryMeaning(type);
  ordered_json page = {{"devices", columns}, {"peak_memory", std::move(peak_memory)}};
  if (!repository_url.empty()) page["repository"] = repository_url;  // where commits link to
  page["configs"] = std::move(list);
  return page;
}

void Options(const std::set<std::string>& values, std::ostream& out) {
  for (const std::string& v : values) {
    out << "<option value=\"" << Attr(v) << "\">" << HtmlEscape(v.empty() ? "(top level)" : v) << "</option>";
  }
}

// The fragment that opens a cell: the script reads "open=<config>@<column>".
std::string CellLink(const std::string& config, const std::string& type) {
  return "#open=" + PercentEncode(config + "@" + type);
}

// How many bytes of a reason a cell of the matrix shows; the title and the details show all of it.
constexpr size_t kCellReasonBytes = 64;

void Cell(const ConfigSupport& c, const std::string& type, const History& history, std::ostream& out) {
  auto it = c.entries.find(type);
  if (it == c.entries.end()) {
    out << "<td class=\"cell st-none\" data-device=\"" << Attr(type)
        << "\" data-status=\"none\"><span class=\"status\">—</span></td>";
    return;
  }
  const SupportEntry& e = it->second;
  auto h = history.find({c.config, type});
  const CellResult* record = EntryMeasurement(e, h == history.end() ? nullptr : &h->second);
  const bool disturbed = record != nullptr && !record->disturbed.empty();
  std::string title = "open " + c.config + " on " + type;
  if (!e.reason.empty()) title += ": " + e.status + ": " + CollapseLineBreaks(e.reason);
  if (disturbed) title += " (measured beside other work: " + record->disturbed + ")";
  out << "<td class=\"cell st-" << Attr(e.status) << (disturbed ? " disturbed" : "") << "\" data-device=\""
      << Attr(type) << "\" data-status=\"" << Attr(e.status) << "\"";
  if (IsRunsStatus(e.status) && e.tokens_per_second && std::isfinite(*e.tokens_per_second)) {
    out << " data-tps=\"" << FormatNumber(*e.tokens_per_second, 1) << "\"";
  }
  out << " tabindex=\"0\" role=\"button\" title=\"" << Attr(title) << "\"><span class=\"status\">"
      << HtmlEscape(e.status) << "</span>";
  std::string measured = Measurements(e);
  if (!measured.empty()) out << "<span class=\"measured\">" << HtmlEscape(measured) << "</span>";
  if (!IsRunsStatus(e.status) && !e.reason.empty()) {
    out << "<span class=\"reason\">" << HtmlEscape(Shortened(e.reason, kCellReasonBytes)) << "</span>";
  }
  if (disturbed) out << "<span class=\"disturbed-mark\">⚠ disturbed</span>";
  if (!e.stand_in.empty()) out << "<span class=\"stand-in\">sample data</span>";
  if (!e.proxy.empty()) {
    out << "<span class=\"proxy-mark\" title=\"" << Attr("proxies of " + e.proxy) << "\">proxy</span>";
  }
  if (!e.repair.empty()) {
    out << "<span class=\"repair-mark\" title=\"" << Attr("repaired with " + e.repair) << "\">repaired</span>";
  }
  out << "</td>";
}

// The day (YYYY-MM-DD) of a record.
std::string Day(const CellResult& r) { return r.provenance.verified_at.substr(0, 10); }

// One line of the change summary: a link that opens the cell, then what changed.
std::string ChangeLine(const std::string& kind, const std::string& config, const std::string& type,
                       const std::string& what) {
  std::string cls = kind;
  std::replace(cls.begin(), cls.end(), ' ', '-');
  std::ostringstream out;
  out << "<li class=\"ch-" << cls << "\" data-kind=\"" << Attr(kind) << "\" data-config=\"" << Attr(config)
      << "\" data-device=\"" << Attr(type) << "\"><a href=\"" << Attr(CellLink(config, type)) << "\"><b>"
      << HtmlEscape(kind) << "</b> " << HtmlEscape(config) << " on " << HtmlEscape(type) << "</a> "
      << HtmlEscape(what) << "</li>\n";
  return out.str();
}

// How many lines of the change summary show before the rest fold away (a <details> to open).
constexpr size_t kLeadingChanges = 8;

// A line of the change summary and the time of the measurement it is about (its newest).
struct SummaryLine {
  std::string when;  // verified_at
  std::string html;
};

// What changed beyond the noise (status or speed), newest measurement first; at the same time in the order
// CompareRecords lists kinds (newly broken first).
std::vector<SummaryLine> ChangeLines(const Comparison& c) {
  std::vector<SummaryLine> lines;
  for (const CellChange& change : c.changes) {
    if (!change.before || !change.after) continue;  // both sides hold every compared cell
    const CellResult& b = *change.before;
    const CellResult& a = *change.after;
    std::string what;
    if (change.kind == ChangeKind::kSlower || change.kind == ChangeKind::kFaster) {
      what = FormatNumber(b.tokens_per_second.value_or(0), 0) + " → " +
             FormatNumber(a.tokens_per_second.value_or(0), 0) + " tok/s, " + (change.speed.change > 0 ? "+" : "") +
             FormatNumber(100 * change.speed.change, 1) + "% (allowed ±" +
             FormatNumber(100 * change.speed.allowed, 1) + "%)";
    } else {
      what = std::string(CellStatusName(b.status)) + " → " + CellStatusName(a.status);
      if (!a.reason.empty()) what += ": " + Shortened(a.reason, 120);
    }
    what += " · " + Day(b) + " → " + Day(a);
    lines.push_back({a.provenance.verified_at, ChangeLine(ChangeKindTitle(change.kind), change.config, change.column, what)});
  }
  std::stable_sort(lines.begin(), lines.end(), [](const SummaryLine& x, const SummaryLine& y) { return x.when > y.when; });
  return lines;
}

// The cells whose newest measurement was made beside other work, folded into one count that opens to their
// lines (newest first): on a busy machine they are every cell of a run, and no change of theirs is compared.
void DisturbedFold(const std::vector<CellResult>& disturbed, std::ostream& out) {
  if (disturbed.empty()) return;
  std::vector<SummaryLine> lines;
  for (const CellResult& r : disturbed) {
    lines.push_back({r.provenance.verified_at,
                     ChangeLine("disturbed", r.key.config, ColumnOf(r),
                                "measured beside other work on " + Day(r) +
                                    ", speed not published: " + Shortened(r.disturbed, 160))});
  }
  std::stable_sort(lines.begin(), lines.end(), [](const SummaryLine& x, const SummaryLine& y) { return x.when > y.when; });
  out << "<details class=\"disturbed\"><summary>" << Counted(lines.size(), "cell")
      << " measured beside other work (status recorded, speed not published)</summary>\n<ul>\n";
  for (const SummaryLine& line : lines) out << line.html;
  out << "</ul>\n</details>\n";
}

void ChangeSummary(const PageChanges& changes, std::ostream& out) {
  out << "<section id=\"changes\" aria-labelledby=\"changes-title\">\n<h2 id=\"changes-title\">Since the "
         "previous measurement</h2>\n";
  const Comparison& c = changes.comparison;
  if (changes.since.empty()) {
    out << "<p class=\"nothing\">No cell has been measured twice yet.</p>\n";
  } else if (c.changes.empty()) {
    out << "<p class=\"nothing\">Nothing changed since " << changes.since
        << " (each cell's newest measurement against the one before it).</p>\n";
  } else {
    out << "<p class=\"note\">Each cell's newest measurement against the one before it (the earliest from "
        << changes.since << "), newest first; speed changes beyond the noise model of <code>tune-matrix "
        << "compare</code>.</p>\n";
  }
  const std::vector<SummaryLine> lines = ChangeLines(c);
  if (!lines.empty()) {
    out << "<ul>\n";
    for (size_t i = 0; i < lines.size() && i < kLeadingChanges; ++i) out << lines[i].html;
    out << "</ul>\n";
  }
  if (lines.size() > kLeadingChanges) {
    out << "<details><summary>" << (lines.size() - kLeadingChanges) << " more</summary>\n<ul>\n";
    for (size_t i = kLeadingChanges; i < lines.size(); ++i) out << lines[i].html;
    out << "</ul>\n</details>\n";
  }
  DisturbedFold(changes.disturbed, out);
  out << "</section>\n";
}

// From the doctype to <body>: the title, the repository the page names (PageRepositoryUrl), the stylesheet.
void PageHead(const HtmlReportOptions& options, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<title>tune-matrix support matrix</title>\n";
  if (!options.repository_url.empty()) {
    out << "<meta name=\"tm-repository\" content=\"" << Attr(options.repository_url) << "\">\n";
  }
  out << "<style>\n" << kHtmlReportCss << "</style>\n</head>\n<body>\n";
}

}  // namespace

std::string Shortened(const std::string& text, size_t max_bytes) {
  std::string line = CollapseLineBreaks(text);
  if (line.size() <= max_bytes) return line;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  size_t space = line.rfind(' ', cut);
  if (line[cut] != ' ' && space != std::string::npos && space >= max_bytes / 2) cut = space;  // nor a word
  while (cut > 0 && line[cut - 1] == ' ') --cut;
  return line.substr(0, cut) + "…";
}

PageChanges ChangesSincePrevious(const History& history, const std::vector<const ConfigSupport*>& configs,
                                 const std::vector<std::string>& columns) {
  PageChanges page;
  std::vector<CellResult> before, after;
  for (const ConfigSupport* c : configs) {
    for (const std::string& type : columns) {
      if (!c->entries.count(type)) continue;
      auto h = history.find({c->config, type});
      if (h == history.end() || h->second.empty()) continue;
      const std::vector<CellResult>& records = h->second;  // oldest first
      if (!records.back().disturbed.empty()) page.disturbed.push_back(records.back());
      if (records.size() < 2) continue;
      before.push_back(records[records.size() - 2]);
      after.push_back(records.back());
      std::string day = Day(before.back());
      if (page.since.empty() || day < page.since) page.since = day;
    }
  }
  page.comparison = CompareRecords(before, after, SpeedNoise{});
  return page;
}

std::string ConfigFamily(const std::string& config) {
  size_t slash = config.rfind('/');
  return slash == std::string::npos ? std::string(kTopLevelFamily) : config.substr(0, slash);
}

std::string PageRepositoryUrl(const std::string& page) {
  const std::string tag = "<meta name=\"tm-repository\" content=\"";
  const size_t head_end = page.find("</head>");
  const size_t at = page.find(tag);
  if (at == std::string::npos || at > head_end) return "";
  const size_t end = page.find('"', at + tag.size());
  if (end == std::string::npos) return "";
  return AttrUnescape(page.substr(at + tag.size(), end - at - tag.size()));
}

std::string InlineJson(const ordered_json& j) { return ScriptJson(DumpJson(j)); }

namespace {

// The page's header: what it is, its size and dates, and the legend of statuses with their counts.
void PageHeader(const std::vector<const ConfigSupport*>& sorted, const std::vector<std::string>& columns,
                const History& history, std::ostream& out) {
  std::set<std::string> days = VerificationDays(sorted, columns);
  std::map<std::string, int> counts;
  size_t measurements = 0;
  for (const ConfigSupport* c : sorted) {
    for (const std::string& type : columns) {
      auto it = c->entries.find(type);
      if (it != c->entries.end()) ++counts[it->second.status];
      auto h = history.find({c->config, type});
      if (h != history.end()) measurements += h->second.size();
    }
  }
  out << "<header>\n<h1>Support matrix</h1>\n<p class=\"lede\">Which built-in config trains on which device, how "
         "fast and in how much memory. Generated by <code>tune-matrix</code> from each config's "
      << "<code>metadata.support</code> block and <code>reports/history</code>; do not edit by hand.</p>\n"
      << "<p class=\"summary\">" << Counted(sorted.size(), "config") << " × "
      << Counted(columns.size(), "device column") << " · ";
  if (days.empty()) {
    out << "no cell verified yet";
  } else if (days.size() == 1) {
    out << "verified on " << HtmlEscape(*days.begin()) << " (UTC)";
  } else {
    out << "verified between " << HtmlEscape(*days.begin()) << " and " << HtmlEscape(*days.rbegin()) << " (UTC)";
  }
  out << " · " << Counted(measurements, "measurement") << " in history</p>\n<ul class=\"legend\">";
  for (const CellStatusInfo* status : ListedStatuses()) {
    auto n = counts.find(status->name);
    // The script reads each status's rank and whether it started from here (data-rank, data-started).
    out << "<li class=\"st-" << status->name << "\" data-status=\"" << status->name << "\" data-rank=\""
        << status->rank << "\" data-started=\"" << (status->started ? "true" : "false") << "\" title=\""
        << status->description << "\"><span class=\"status\">" << status->name << "</span> <b>"
        << (n == counts.end() ? 0 : n->second) << "</b></li>";
  }
  out << "<li class=\"st-none\" title=\"no entry in this column\">— not measured</li></ul>\n</header>\n";
}

// The filters: search, family, recipe, status and device, and the link to the view.
void Filters(const std::vector<const ConfigSupport*>& sorted, const std::vector<std::string>& columns,
             std::ostream& out) {
  std::set<std::string> families, recipes;
  for (const ConfigSupport* c : sorted) {
    families.insert(ConfigFamily(c->config));
    recipes.insert(c->recipe);
  }
  out << "<form id=\"filters\" role=\"search\" autocomplete=\"off\">\n"
         "<label>Search <input type=\"search\" id=\"f-search\" placeholder=\"name, status, note…\"></label>\n"
         "<label>Family <select id=\"f-family\"><option value=\"\">all</option>";
  Options(families, out);
  out << "</select></label>\n<label>Recipe <select id=\"f-recipe\"><option value=\"\">all</option>";
  Options(recipes, out);
  out << "</select></label>\n<label>Status <select id=\"f-status\"><option value=\"\">any</option>";
  for (const CellStatusInfo* status : ListedStatuses()) {
    out << "<option value=\"" << status->name << "\">" << status->name << "</option>";
  }
  out << "<option value=\"none\">not measured</option></select></label>\n"
         "<label>Device <select id=\"f-device\"><option value=\"\">all</option>";
  Options(std::set<std::string>(columns.begin(), columns.end()), out);
  out << "</select></label>\n<output id=\"shown\">" << sorted.size() << " of " << sorted.size()
      << " configs</output>\n<span class=\"link\"><a id=\"permalink\" href=\"#\">link to this view</a> "
         "<button type=\"button\" id=\"copy-link\">copy link</button></span>\n</form>\n";
}

// The footer: how to read the page, and the sentences of what its cells hold.
void Footer(const std::vector<const ConfigSupport*>& sorted, const std::vector<std::string>& columns,
            std::ostream& out) {
  out << "<aside id=\"details\" hidden tabindex=\"-1\" aria-label=\"cell details\"></aside>\n"
         "<footer>Open a cell (click, or Enter) for its details and trends. Columns sort when their heading is "
         "clicked. Tokens/s and step times come from each cell's short budget (by default 3 optimizer steps, "
         "the first left out of the timings). "
      << HtmlEscape(PeakMemorySentence(columns));
  for (const std::string& sentence : {GenerationSentence(sorted, columns), ProxySentence(sorted, columns),
                                      RepairSentence(sorted, columns), PeakShareSentence(sorted, columns)}) {
    if (!sentence.empty()) out << " " << HtmlEscape(sentence);
  }
  out << "</footer>\n";
}

}  // namespace

void HtmlReporter::Report(const std::vector<ConfigSupport>& configs, const std::vector<std::string>& device_types,
                          std::ostream& out) {
  std::vector<const ConfigSupport*> sorted = SortedByConfig(configs);
  std::vector<std::string> columns = ReportColumns(configs, device_types);
  PageHead(options_, out);
  PageHeader(sorted, columns, history_, out);
  ChangeSummary(ChangesSincePrevious(history_, sorted, columns), out);
  Filters(sorted, columns, out);
  out << "<main>\n<table id=\"matrix\">\n<thead><tr><th data-sort=\"config\" aria-sort=\"ascending\"><button "
         "type=\"button\">config</button></th><th data-sort=\"recipe\"><button type=\"button\">recipe</button></th>";
  for (const std::string& type : columns) {
    out << "<th data-sort=\"device\" data-device=\"" << Attr(type) << "\"><button type=\"button\">" << HtmlEscape(type)
        << "</button></th>";
  }
  out << "</tr></thead>\n<tbody>\n";
  for (const ConfigSupport* c : sorted) {
    out << "<tr data-config=\"" << Attr(c->config) << "\" data-family=\"" << Attr(ConfigFamily(c->config))
        << "\" data-recipe=\"" << Attr(c->recipe) << "\"><th scope=\"row\">" << HtmlEscape(c->config)
        << "</th><td class=\"recipe\">" << HtmlEscape(c->recipe) << "</td>";
    for (const std::string& type : columns) Cell(*c, type, history_, out);
    out << "</tr>\n";
  }
  out << "</tbody>\n</table>\n<p id=\"empty\" hidden>No config matches the filters.</p>\n</main>\n";
  Footer(sorted, columns, out);
  out << "<script type=\"application/json\" id=\"tm-data\">" << InlineJson(PageData(sorted, columns, history_, options_.repository_url))
      << "</script>\n<script>\n"
      << kHtmlReportJs << "</script>\n</body>\n</html>\n";
}

}  // namespace tmx::matrix
