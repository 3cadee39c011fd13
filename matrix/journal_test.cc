#include "matrix/journal.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

CellResult Cell(const std::string& config, const std::string& device, const std::string& verified_at,
                CellStatus status = CellStatus::kRuns, const std::string& reason = "") {
  CellResult r;
  r.key = {config, device};
  r.recipe = "full_finetune_single_device";
  r.device_type = device.substr(0, device.find(':'));
  r.status = status;
  r.reason = reason;
  r.provenance.verified_at = verified_at;
  return r;
}

std::string Line(const CellResult& r) { return ToJson(r).dump(); }

constexpr char kT[] = "2026-12-01T10:00:00Z";

class JournalTest : public ::testing::Test {
 protected:
  void WriteRaw(const std::string& bytes) { ASSERT_TRUE(WriteFileAtomically(path_, bytes).ok()); }
  std::string Contents() { return ReadFile(path_).value(); }

  test::ScratchDir dir_{"journal_test"};
  std::string path_ = dir_.path() + "/runs.jsonl";
};

TEST_F(JournalTest, AppendsOneLinePerCellAndReadsThemBack) {
  CellResult a = Cell("a", "cpu", "2026-12-01T10:00:00Z");
  CellResult b = Cell("b", "cuda:0", "2026-12-01T10:05:00Z", CellStatus::kFails, "line1\nline2 \"q\"");
  b.output_tail = "bad utf-8 \xff here";
  ASSERT_TRUE(AppendToJournal(path_, a).ok());
  ASSERT_TRUE(AppendToJournal(path_, b).ok());
  CellResult b_stored = b;
  b_stored.output_tail = "bad utf-8 \xef\xbf\xbd here";  // replaced by U+FFFD, not refused
  EXPECT_EQ(Contents(), Line(a) + "\n" + Line(b_stored) + "\n");

  std::vector<std::string> warnings;
  StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, &warnings);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_TRUE(warnings.empty());
  ASSERT_EQ(cells->size(), 2u);
  EXPECT_EQ(Line((*cells)[0]), Line(a));
  EXPECT_EQ(Line((*cells)[1]), Line(b_stored));
  EXPECT_EQ((*cells)[1].reason, "line1\nline2 \"q\"");
}

// A generation cell beside a training one: its prefill is written and read back, its missing losses stay
// missing, and the training cell's line has neither prefill field.
TEST_F(JournalTest, AGenerationCellKeepsItsPrefillAndHasNoLosses) {
  CellResult train = Cell("tiny/lora_single_device", "cpu", "2026-12-01T10:00:00Z");
  train.tokens_per_second = 38000;
  train.step_times_s = {0.05};
  train.first_loss = 10.5;
  train.last_loss = 10.25;
  CellResult generate = Cell("tiny/generation", "cpu", "2026-12-01T10:05:00Z");
  generate.recipe = "generate";
  generate.step_times_s = {0.02, 0.01, 0.01};
  generate.warmup_steps = 1;
  generate.tokens_per_second = 200;
  generate.time_to_first_token_s = 0.0375;
  generate.prefill_tokens_per_second = 6826.5;
  ASSERT_TRUE(AppendToJournal(path_, train).ok());
  ASSERT_TRUE(AppendToJournal(path_, generate).ok());
  std::string text = Contents();
  std::string first_line = text.substr(0, text.find('\n'));
  EXPECT_EQ(first_line.find("first_token"), std::string::npos) << first_line;
  EXPECT_EQ(first_line.find("prefill"), std::string::npos) << first_line;
  EXPECT_NE(text.find("\"time_to_first_token_s\":0.0375"), std::string::npos) << text;
  EXPECT_NE(text.find("\"prefill_tokens_per_second\":6826.5"), std::string::npos) << text;

  StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, nullptr);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  ASSERT_EQ(cells->size(), 2u);
  const CellResult& train_back = (*cells)[0];
  const CellResult& back = (*cells)[1];
  EXPECT_FALSE(train_back.time_to_first_token_s.has_value());
  EXPECT_FALSE(train_back.prefill_tokens_per_second.has_value());
  EXPECT_EQ(train_back.first_loss, std::optional<double>(10.5));
  EXPECT_EQ(back.time_to_first_token_s, std::optional<double>(0.0375));
  EXPECT_EQ(back.prefill_tokens_per_second, std::optional<double>(6826.5));
  EXPECT_EQ(back.tokens_per_second, std::optional<double>(200));
  EXPECT_FALSE(back.first_loss.has_value());
  EXPECT_FALSE(back.last_loss.has_value());
  EXPECT_EQ(Line(back), Line(generate));
}

// A run reads its journal once (LoadJournal) and appends its records in memory (AsJournaled): the two must
// hold what reading the file again would, an unfinished line that the first append cut off included.
TEST_F(JournalTest, ARunsRecordsInMemoryEqualReadingTheAppendedFileAgain) {
  CellResult a = Cell("a", "cpu", "2026-12-01T10:00:00Z");
  CellResult b = Cell("b", "cpu", "2026-12-01T10:01:00Z", CellStatus::kFails, "tail \xff byte");
  b.wall_time_s = 1.0 / 3;  // written with the journal's rounding, read back as a reader gets it
  CellResult c = Cell("c", "cuda:0", "2026-12-01T10:02:00Z");
  WriteRaw(Line(a) + "\n" + JournalLine(b).substr(0, 20));
  LoadedJournal loaded = LoadJournal(path_);
  ASSERT_TRUE(loaded.exists);
  ASSERT_TRUE(loaded.status.ok()) << loaded.status.ToString();
  ASSERT_EQ(loaded.records.size(), 1u);
  EXPECT_EQ(loaded.warnings.size(), 1u);
  ASSERT_TRUE(AppendToJournal(path_, b).ok());
  ASSERT_TRUE(AppendToJournal(path_, c).ok());
  StatusOr<std::vector<CellResult>> appended = AsJournaled({b, c}, path_);
  ASSERT_TRUE(appended.ok()) << appended.status().ToString();
  std::vector<CellResult> in_memory = loaded.records;
  in_memory.insert(in_memory.end(), appended->begin(), appended->end());
  StatusOr<std::vector<CellResult>> reread = ReadJournal(path_, nullptr);
  ASSERT_TRUE(reread.ok()) << reread.status().ToString();
  ASSERT_EQ(in_memory.size(), reread->size());
  for (size_t i = 0; i < in_memory.size(); ++i) EXPECT_EQ(Line(in_memory[i]), Line((*reread)[i])) << i;
}

TEST_F(JournalTest, LoadJournalOfNoFileHoldsNothingAndOfADamagedOneSaysWhy) {
  LoadedJournal none = LoadJournal(path_);
  EXPECT_FALSE(none.exists);
  EXPECT_TRUE(none.status.ok());
  EXPECT_TRUE(none.records.empty());
  WriteRaw("{not json\n");
  LoadedJournal damaged = LoadJournal(path_);
  EXPECT_TRUE(damaged.exists);
  EXPECT_FALSE(damaged.status.ok());
  EXPECT_NE(damaged.status.message().find(path_ + ":1: not a JSON record"), std::string::npos)
      << damaged.status.message();
}

TEST_F(JournalTest, MissingFileIsNotFound) {
  StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, nullptr);
  EXPECT_EQ(cells.status().code(), Status::Code::kNotFound);
}

TEST_F(JournalTest, EmptyFileAndBlankLinesHoldNoRecords) {
  WriteRaw("");
  ASSERT_TRUE(ReadJournal(path_, nullptr).ok());
  EXPECT_TRUE(ReadJournal(path_, nullptr)->empty());
  WriteRaw("\n" + Line(Cell("a", "cpu", kT)) + "\n  \n");
  StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, nullptr);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_EQ(cells->size(), 1u);
}

TEST_F(JournalTest, UnfinishedLastLineIsSkippedWithWarningAndCutOffByTheNextAppend) {
  CellResult a = Cell("a", "cpu", "2026-12-01T10:00:00Z");
  CellResult b = Cell("b", "cpu", "2026-12-01T10:01:00Z");
  std::string torn = Line(b).substr(0, 25);
  WriteRaw(Line(a) + "\n" + torn);

  std::vector<std::string> warnings;
  StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, &warnings);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  ASSERT_EQ(cells->size(), 1u);
  EXPECT_EQ((*cells)[0].key.config, "a");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], path_ + ":2: skipped an unfinished last line (25 bytes without a line break; "
                                 "the run writing it was probably killed)");
  EXPECT_TRUE(ReadJournal(path_, nullptr).ok()) << "warnings may be null";

  // The next append must not fuse with the fragment.
  ASSERT_TRUE(AppendToJournal(path_, b).ok());
  EXPECT_EQ(Contents(), Line(a) + "\n" + Line(b) + "\n");
  warnings.clear();
  cells = ReadJournal(path_, &warnings);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_EQ(cells->size(), 2u);
  EXPECT_TRUE(warnings.empty());
}

TEST_F(JournalTest, UnfinishedFirstLineIsCutOffEntirely) {
  WriteRaw("{\"schema_ver");
  CellResult a = Cell("a", "cpu", kT);
  ASSERT_TRUE(AppendToJournal(path_, a).ok());
  EXPECT_EQ(Contents(), Line(a) + "\n");
}

TEST_F(JournalTest, CompleteLastRecordWithoutLineBreakIsKeptAndFinished) {
  CellResult a = Cell("a", "cpu", kT);
  CellResult b = Cell("b", "cpu", "2026-12-01T10:00:01Z");
  WriteRaw(Line(a));
  std::vector<std::string> warnings;
  StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, &warnings);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_EQ(cells->size(), 1u);
  EXPECT_TRUE(warnings.empty());
  ASSERT_TRUE(AppendToJournal(path_, b).ok());
  EXPECT_EQ(Contents(), Line(a) + "\n" + Line(b) + "\n");
}

TEST_F(JournalTest, BadLinesFailNamingFileAndLine) {
  nlohmann::json foreign = ToJson(Cell("x", "cpu", kT));
  foreign["schema_version"] = 2;
  nlohmann::json no_status = ToJson(Cell("x", "cpu", kT));
  no_status.erase("status");
  const std::string good = Line(Cell("a", "cpu", kT));
  struct Case {
    const char* name;
    std::string contents;
    std::string message;  // after "<path>:"
  } cases[] = {
      {"garbage in the middle", good + "\nnot json\n" + good + "\n",
       "2: not a JSON record (syntax error at column 2); fix: repair or delete that line"},
      {"torn line that was later followed by others", good + "\n" + good.substr(0, 30) + "\n" + good + "\n",
       "2: not a JSON record (syntax error at column 31); fix: repair or delete that line"},
      {"two records fused on one line", good + good + "\n",
       "1: not a JSON record (syntax error at column " + std::to_string(good.size() + 1) +
           "); fix: repair or delete that line"},
      {"not an object", good + "\n\n[1, 2]\n", "3: cell record must be a JSON object, not array"},
      {"foreign schema", good + "\n" + foreign.dump() + "\n",
       "2: cell record has schema_version 2, but this tune-matrix reads only version 1 (fix: read it with "
       "the tune-matrix that wrote it, or rerun the cell)"},
      {"foreign schema as last line without break", good + "\n" + foreign.dump(),
       "2: cell record has schema_version 2, but this tune-matrix reads only version 1 (fix: read it with "
       "the tune-matrix that wrote it, or rerun the cell)"},
      {"missing field", no_status.dump() + "\n", "1: cell record has no field \"status\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WriteRaw(c.contents);
    std::vector<std::string> warnings;
    StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, &warnings);
    ASSERT_FALSE(cells.ok());
    EXPECT_EQ(cells.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(cells.status().message(), path_ + ":" + c.message);
  }
}

// The one read path (ReadJournal) serves `run --resume` as well as merge and check, so what they refuse it
// refuses, and nothing in a line can make it abort.
TEST_F(JournalTest, ANumberBeyondADoubleIsAnErrorNotAnAbort) {
  std::string line = Line(Cell("a", "cpu", kT));
  std::string huge = line;
  huge.replace(huge.find("\"wall_time_s\":0.0"), 17, "\"wall_time_s\":1e999");
  WriteRaw(line + "\n" + huge + "\n");
  StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, nullptr);
  ASSERT_FALSE(cells.ok());
  EXPECT_EQ(cells.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(cells.status().message(), path_ +
                                          ":2: not a JSON record ([json.exception.out_of_range.406] number "
                                          "overflow parsing '1e999'); fix: repair or delete that line");
}

TEST_F(JournalTest, RecordsMergeWouldRefuseAreRefusedOnResumeToo) {
  const int64_t now = *ParseUtc("2026-12-02T12:00:00Z");
  CellResult mismatched = Cell("a", "cuda:0", kT);
  mismatched.device_type = "cpu";
  CellResult future = Cell("a", "cpu", "2027-01-01T00:00:00Z");
  CellResult negative = Cell("a", "cpu", kT);
  negative.peak_memory_bytes = -1;
  struct Case {
    const char* name;
    CellResult record;
    const char* message;  // after "<path>:1: cell record "
  } cases[] = {
      {"device type", mismatched, "device type \"cpu\" does not match device \"cuda:0\""},
      {"future", future, "provenance.verified_at \"2027-01-01T00:00:00Z\" is later than this machine's clock"},
      {"range", negative, "field \"peak_memory_bytes\" is -1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WriteRaw(Line(c.record) + "\n");
    StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, nullptr, nullptr, now);
    ASSERT_FALSE(cells.ok());
    EXPECT_EQ(cells.status().message().rfind(path_ + ":1: cell record " + c.message, 0), 0u)
        << cells.status().message();
  }
}

TEST_F(JournalTest, AJournalThatIsNotARegularFileIsRefusedWithoutWaiting) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0644), 0);
  StatusOr<std::vector<CellResult>> cells = ReadJournal(path_, nullptr);
  EXPECT_EQ(cells.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(cells.status().message(), path_ + ": is a FIFO, not a regular file; fix: pass a regular file");
  Status append = AppendToJournal(path_, Cell("a", "cpu", kT));
  EXPECT_EQ(append.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(append.message(), path_ +
                                  ": the journal is a FIFO, not a regular file; fix: pass a journal file with "
                                  "--journal");
  EXPECT_EQ(ReadJournal(dir_.path(), nullptr).status().message(),
            dir_.path() + ": is a folder, not a regular file; fix: pass a regular file");
}

// The journal committed under reports/ reads, and every record re-serialises to its line byte for byte:
// the writer and the reader agree on every field a real run writes.
TEST(CommittedJournalTest, ReadsAndRewritesByteForByte) {
  std::string path = std::string(TM_SOURCE_DIR) + "/reports/journal.jsonl";
  StatusOr<std::string> text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  std::vector<std::string> warnings;
  StatusOr<std::vector<CellResult>> cells = ParseJournalText(*text, path, &warnings, nullptr, UnixNow());
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_TRUE(warnings.empty());
  ASSERT_FALSE(cells->empty());
  std::string rewritten;
  for (const CellResult& cell : *cells) rewritten += JournalLine(cell) + "\n";
  EXPECT_EQ(rewritten, *text);
}

TEST(LatestByCellTest, PicksNewestPerCellAndLaterOnTies) {
  std::vector<CellResult> cells = {
      Cell("a", "cpu", "2026-12-01T10:00:00Z", CellStatus::kFails, "first"),
      Cell("a", "cuda:0", "2026-12-01T09:00:00Z", CellStatus::kRuns, "only"),
      Cell("a", "cpu", "2026-12-02T08:00:00Z", CellStatus::kRuns, "newest"),
      Cell("a", "cpu", "2026-12-01T23:00:00Z", CellStatus::kTimeout, "older, but later in the file"),
      Cell("b", "cpu", "2026-12-01T10:00:00Z", CellStatus::kFails, "tie, earlier"),
      Cell("b", "cpu", "2026-12-01T10:00:00Z", CellStatus::kRuns, "tie, later"),
  };
  std::map<CellColumn, CellResult> latest = LatestByCell(cells);
  struct Want {
    CellColumn key;
    const char* reason;
  } wants[] = {{{{"a", "cpu"}, "cpu (class unknown)"}, "newest"},
               {{{"a", "cuda:0"}, "cuda"}, "only"},
               {{{"b", "cpu"}, "cpu (class unknown)"}, "tie, later"}};
  ASSERT_EQ(latest.size(), 3u);
  for (const Want& w : wants) {
    SCOPED_TRACE(w.key.first.config + "/" + w.key.first.device);
    ASSERT_EQ(latest.count(w.key), 1u);
    EXPECT_EQ(latest.at(w.key).reason, w.reason);
  }
  EXPECT_TRUE(LatestByCell({}).empty());
}

// A record of another CPU class or torch version is another observation: the newest of each column stands, and
// none replaces another however much newer it is.
TEST(LatestByCellTest, RecordsOfDifferentColumnsNeverSupersedeEachOther) {
  auto in = [](CellResult r, const std::string& cpu_class, const std::string& torch) {
    r.provenance.cpu_class = cpu_class;
    r.provenance.torch_version = torch;
    return r;
  };
  std::vector<CellResult> cells = {
      in(Cell("a", "cpu", "2026-12-01T10:00:00Z", CellStatus::kRuns, "amx"), "amx", "2.11.0"),
      in(Cell("a", "cpu", "2026-12-03T10:00:00Z", CellStatus::kTooSlow, "avx2, newer"), "avx2", "2.11.0"),
      in(Cell("a", "cpu", "2026-12-02T10:00:00Z", CellStatus::kFails, "amx on 2.15"), "amx", "2.15.0"),
      in(Cell("a", "cpu", "2026-12-04T10:00:00Z", CellStatus::kRuns, "amx on 2.15, newest"), "amx", "2.15.0"),
  };
  std::map<CellColumn, CellResult> latest = LatestByCell(cells);
  ASSERT_EQ(latest.size(), 3u);
  EXPECT_EQ(latest.at({{"a", "cpu"}, "cpu (amx, torch 2.11.0)"}).reason, "amx");
  EXPECT_EQ(latest.at({{"a", "cpu"}, "cpu (avx2, torch 2.11.0)"}).reason, "avx2, newer");
  EXPECT_EQ(latest.at({{"a", "cpu"}, "cpu (amx, torch 2.15.0)"}).reason, "amx on 2.15, newest");
  std::map<ConfigColumn, CellResult> by_column = LatestByColumn(cells);
  ASSERT_EQ(by_column.size(), 3u);
  EXPECT_EQ(by_column.at({"a", "cpu (amx, torch 2.11.0)"}).status, CellStatus::kRuns);
  // A record made before records carried a class is of the class its CPU is known by, or of none.
  CellResult xeon = Cell("a", "cpu", kT);
  xeon.provenance.host = "vm";
  xeon.provenance.device_name = "Intel(R) Xeon(R) Processor";
  xeon.provenance.torch_version = "2.11.0";
  EXPECT_EQ(ColumnOf(xeon), "cpu (amx, torch 2.11.0)");
  xeon.provenance.device_name = "AMD EPYC";
  EXPECT_EQ(ColumnOf(xeon), "cpu (class unknown, torch 2.11.0)");
}

}  // namespace
}  // namespace tmx::matrix
