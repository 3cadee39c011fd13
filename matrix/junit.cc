#include "matrix/junit.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "base/file_util.h"
#include "base/text.h"
#include "matrix/escape.h"

namespace tmx::matrix {
namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// What a cell that runs measured: "812.400 tokens/s, peak memory 1024 bytes"; a generation cell's speed is its
// decode speed, followed by its time to first token and prefill speed.
std::string Measured(const CellResult& c) {
  std::vector<std::string> parts;
  if (c.tokens_per_second) {
    parts.push_back(Seconds(*c.tokens_per_second) + (c.time_to_first_token_s ? " decode tokens/s" : " tokens/s"));
  }
  if (c.time_to_first_token_s) parts.push_back("time to first token " + Seconds(*c.time_to_first_token_s) + " s");
  if (c.prefill_tokens_per_second) parts.push_back("prefill " + Seconds(*c.prefill_tokens_per_second) + " tokens/s");
  if (c.peak_memory_bytes) parts.push_back("peak memory " + std::to_string(*c.peak_memory_bytes) + " bytes");
  return JoinStrings(parts, ", ");
}

}  // namespace

void WriteJUnit(const std::vector<CellResult>& cells, std::ostream& out) {
  std::map<std::string, std::vector<const CellResult*>> by_device;
  for (const CellResult& c : cells) by_device[c.key.device].push_back(&c);
  size_t tests = 0, failures = 0, skipped = 0;
  double total_time = 0;
  std::ostringstream suites;
  for (auto& [device, list] : by_device) {
    std::sort(list.begin(), list.end(),
              [](const CellResult* a, const CellResult* b) { return a->key.config < b->key.config; });
    size_t f = 0, s = 0;
    double time = 0;
    std::ostringstream cases;
    for (const CellResult* c : list) {
      time += c->wall_time_s;
      std::string suite = "tune-matrix." + device;
      cases << "    <testcase classname=\"" << XmlEscape(suite) << "\" name=\"" << XmlEscape(c->key.config)
            << "\" time=\"" << Seconds(c->wall_time_s) << "\"";
      std::string status = CellStatusName(c->status);
      if (c->status == CellStatus::kRuns) {
        cases << ">\n      <system-out>" << Measured(*c) << "</system-out>\n    </testcase>\n";
      } else if (!CellStarted(c->status)) {
        ++s;
        cases << ">\n      <skipped message=\"" << XmlEscape(status + ": " + c->reason) << "\"/>\n    </testcase>\n";
      } else {
        ++f;
        cases << ">\n      <failure type=\"" << status << "\" message=\"" << XmlEscape(c->reason) << "\">"
              << XmlEscape(c->output_tail) << "</failure>\n    </testcase>\n";
      }
    }
    suites << "  <testsuite name=\"" << XmlEscape("tune-matrix." + device) << "\" tests=\"" << list.size()
           << "\" failures=\"" << f << "\" errors=\"0\" skipped=\"" << s << "\" time=\"" << Seconds(time) << "\">\n"
           << cases.str() << "  </testsuite>\n";
    tests += list.size();
    failures += f;
    skipped += s;
    total_time += time;
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"tune-matrix\" tests=\"" << tests << "\" failures=\"" << failures
      << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << Seconds(total_time) << "\">\n"
      << suites.str() << "</testsuites>\n";
}

Status WriteJUnitFile(const std::vector<CellResult>& cells, const std::string& path) {
  std::ostringstream out;
  WriteJUnit(cells, out);
  return WriteFileAtomically(path, out.str());
}

}  // namespace tmx::matrix
