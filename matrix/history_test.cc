#include "matrix/history.h"

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

// The columns of Record's records: a CPU of no known class, and cuda, on torch 2.11.0.
constexpr const char* kCpu = "cpu (class unknown, torch 2.11.0)";
constexpr const char* kCuda = "cuda (torch 2.11.0)";

CellResult Record(const std::string& config, const std::string& device, const std::string& verified_at,
                  CellStatus status = CellStatus::kRuns, double tps = 100) {
  CellResult r;
  r.key = {config, device};
  r.recipe = "lora_finetune_single_device";
  r.device_type = device.substr(0, device.find(':'));
  r.status = status;
  if (status == CellStatus::kRuns) {
    r.tokens_per_second = tps;
    r.step_times_s = {0.5};  // the speed's timed step (matrix/record_rules.h)
  }
  r.output_tail = "line 1\nline 2\n";
  r.provenance = {"host-a", "job", "0123456789abcdef0123456789abcdef01234567", "2.11.0", "CPU", verified_at};
  return r;
}

class HistoryTest : public ::testing::Test {
 protected:
  std::string dir() const { return scratch_.path() + "/history"; }
  std::string File(const std::string& config, const std::string& type) const {
    return HistoryFile(dir(), config, type).value();
  }
  std::string Text(const std::string& config, const std::string& type) const {
    StatusOr<std::string> text = ReadFile(File(config, type));
    return text.ok() ? *text : "(missing)";
  }
  int Add(const std::vector<CellResult>& records) {
    HistoryUpdate update;
    Status s = AddToHistory(dir(), records, &update);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return update.added;
  }

  test::ScratchDir scratch_{"history"};
};

TEST_F(HistoryTest, OneFilePerConfigAndDeviceType) {
  EXPECT_EQ(HistoryFile("r/history", "llama3_2/1B_lora", "cuda").value(), "r/history/llama3_2/1B_lora/cuda.jsonl");
  for (const char* bad : {"../x", "a/../../x", "/abs", "a//b", "a/", "", "a b", "a/./b"}) {
    StatusOr<std::string> path = HistoryFile("h", bad, "cpu");
    EXPECT_FALSE(path.ok()) << bad;
    EXPECT_EQ(path.status().code(), Status::Code::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(HistoryFile("h", "a", "../cpu").ok());
  EXPECT_FALSE(HistoryFile("h", "a", "CPU").ok());
}

TEST_F(HistoryTest, KeepsTheLastLinesOfOutput) {
  CellResult r = Record("a", "cpu", "2026-11-21T00:00:00Z");
  r.output_tail.clear();
  for (int i = 1; i <= 100; ++i) r.output_tail += "line " + std::to_string(i) + "\n";
  std::string tail = ForHistory(r).output_tail;
  EXPECT_EQ(tail.substr(0, 8), "line 61\n");
  EXPECT_EQ(tail.substr(tail.size() - 9), "line 100\n");
  r.output_tail = "short\nno final break";
  EXPECT_EQ(ForHistory(r).output_tail, "short\nno final break");
  // One long line is cut to the last kHistoryTailBytes bytes, starting at a whole character.
  r.output_tail = "é" + std::string(kHistoryTailBytes - 1, 'x');
  EXPECT_EQ(ForHistory(r).output_tail, std::string(kHistoryTailBytes - 1, 'x'));
}

TEST_F(HistoryTest, AddsEachMeasurementOnceInTimeOrder) {
  CellResult older = Record("tiny/lora", "cpu", "2026-11-21T00:00:00Z", CellStatus::kFails);
  CellResult newer = Record("tiny/lora", "cpu", "2026-11-22T00:00:00Z");
  CellResult other_cell = Record("tiny/lora", "cuda:0", "2026-11-22T00:00:00Z");
  EXPECT_EQ(Add({newer, other_cell}), 2);
  EXPECT_EQ(Add({older, newer}), 1);  // newer is there already
  EXPECT_EQ(Text("tiny/lora", "cpu"), JournalLine(older) + "\n" + JournalLine(newer) + "\n");
  EXPECT_EQ(Text("tiny/lora", "cuda"), JournalLine(other_cell) + "\n");
  // Adding everything again changes no byte.
  std::string before = Text("tiny/lora", "cpu");
  HistoryUpdate update;
  ASSERT_TRUE(AddToHistory(dir(), {newer, older, other_cell}, &update).ok());
  EXPECT_EQ(update.added, 0);
  EXPECT_EQ(update.files_written, 0);
  EXPECT_EQ(Text("tiny/lora", "cpu"), before);
  // Another host at the same second is another measurement.
  CellResult elsewhere = newer;
  elsewhere.provenance.host = "host-b";
  EXPECT_EQ(Add({elsewhere}), 1);
  StatusOr<History> h = ReadHistory(dir(), {{"tiny/lora", kCpu}, {"tiny/lora", kCuda}, {"tiny/full", kCpu}});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->at({"tiny/lora", kCpu}).size(), 3u);
  EXPECT_EQ(h->count({"tiny/full", kCpu}), 0u);
  EXPECT_TRUE(InHistory(*h, older));
  EXPECT_FALSE(InHistory(*h, Record("tiny/lora", "cpu", "2026-11-23T00:00:00Z")));
}

// A generation measurement keeps its prefill in history and reads back without a loss.
// One file holds every column of its device type; each column reads as its own history, and a record of one class
// and another of the same second and host are two measurements.
TEST_F(HistoryTest, EachColumnOfAFileIsItsOwnHistory) {
  CellResult amx = Record("tiny/lora", "cpu", "2026-11-22T00:00:00Z");
  amx.provenance.cpu_class = "amx";
  CellResult avx2 = amx;
  avx2.provenance.cpu_class = "avx2";
  CellResult newer_torch = Record("tiny/lora", "cpu", "2026-11-23T00:00:00Z");
  newer_torch.provenance.cpu_class = "amx";
  newer_torch.provenance.torch_version = "2.15.0";
  EXPECT_EQ(Add({amx, avx2, newer_torch}), 3);
  StatusOr<History> h = ReadHistory(dir(), {{"tiny/lora", "cpu (amx, torch 2.11.0)"},
                                            {"tiny/lora", "cpu (avx2, torch 2.11.0)"},
                                            {"tiny/lora", "cpu (amx, torch 2.15.0)"},
                                            {"tiny/lora", "cpu (avx512, torch 2.11.0)"}});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ(h->at({"tiny/lora", "cpu (avx2, torch 2.11.0)"}).at(0).provenance.cpu_class, "avx2");
  EXPECT_EQ(h->at({"tiny/lora", "cpu (amx, torch 2.15.0)"}).size(), 1u);
  EXPECT_TRUE(InHistory(*h, avx2));
}

TEST_F(HistoryTest, AGenerationMeasurementKeepsItsPrefill) {
  CellResult generated = Record("tiny/generation", "cpu", "2026-11-22T00:00:00Z", CellStatus::kRuns, 812.5);
  generated.time_to_first_token_s = 0.0625;
  generated.prefill_tokens_per_second = 4096.5;
  EXPECT_EQ(Add({generated}), 1);
  EXPECT_EQ(Text("tiny/generation", "cpu"), JournalLine(generated) + "\n");
  StatusOr<History> h = ReadHistory(dir(), {{"tiny/generation", kCpu}});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const CellResult& back = h->at({"tiny/generation", kCpu}).at(0);
  EXPECT_EQ(back.tokens_per_second, std::optional<double>(812.5));
  EXPECT_EQ(back.time_to_first_token_s, std::optional<double>(0.0625));
  EXPECT_EQ(back.prefill_tokens_per_second, std::optional<double>(4096.5));
  EXPECT_FALSE(back.first_loss.has_value());
  EXPECT_FALSE(back.last_loss.has_value());
}

TEST_F(HistoryTest, AUnionMergedFileReadsInOrderWithoutDuplicates) {
  // What git's merge=union leaves when two branches each appended: both sides' lines, out of order, and the
  // line both had twice.
  CellResult a = Record("tiny/lora", "cpu", "2026-11-21T00:00:00Z");
  CellResult b = Record("tiny/lora", "cpu", "2026-11-22T00:00:00Z");
  CellResult c = Record("tiny/lora", "cpu", "2026-11-23T00:00:00Z");
  ASSERT_TRUE(MakeDirs(ParentDir(File("tiny/lora", "cpu"))).ok());
  ASSERT_TRUE(WriteFileAtomically(File("tiny/lora", "cpu"), JournalLine(a) + "\n" + JournalLine(c) + "\n" +
                                                                JournalLine(b) + "\n" + JournalLine(a) + "\n")
                  .ok());
  StatusOr<History> h = ReadHistory(dir(), {{"tiny/lora", kCpu}});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const std::vector<CellResult>& cell = h->at({"tiny/lora", kCpu});
  ASSERT_EQ(cell.size(), 3u);
  EXPECT_EQ(cell[0].provenance.verified_at, "2026-11-21T00:00:00Z");
  EXPECT_EQ(cell[2].provenance.verified_at, "2026-11-23T00:00:00Z");
  // The next write puts the file back in order.
  EXPECT_EQ(Add({b}), 0);
  EXPECT_EQ(Text("tiny/lora", "cpu"), JournalLine(a) + "\n" + JournalLine(b) + "\n" + JournalLine(c) + "\n");
}

TEST_F(HistoryTest, OfTwoVersionsOfOneMeasurementTheChoiceDoesNotDependOnOrder) {
  CellResult x = Record("tiny/lora", "cpu", "2026-11-21T00:00:00Z");
  CellResult y = x;
  y.output_tail = "edited\n";
  std::vector<CellResult> xy = NormalizeHistory({x, y});
  std::vector<CellResult> yx = NormalizeHistory({y, x});
  ASSERT_EQ(xy.size(), 1u);
  ASSERT_EQ(yx.size(), 1u);
  EXPECT_EQ(JournalLine(xy[0]), JournalLine(yx[0]));
}

TEST_F(HistoryTest, ADamagedFileStopsTheUpdateWithNothingWritten) {
  EXPECT_EQ(Add({Record("tiny/full", "cpu", "2026-11-21T00:00:00Z")}), 1);
  ASSERT_TRUE(MakeDirs(ParentDir(File("tiny/lora", "cpu"))).ok());
  ASSERT_TRUE(WriteFileAtomically(File("tiny/lora", "cpu"), "not json\n").ok());
  std::string full_before = Text("tiny/full", "cpu");
  Status s = AddToHistory(
      dir(), {Record("tiny/full", "cpu", "2026-11-22T00:00:00Z"), Record("tiny/lora", "cpu", "2026-11-22T00:00:00Z")},
      nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(File("tiny/lora", "cpu") + ":1:"), std::string::npos) << s.message();
  EXPECT_EQ(Text("tiny/full", "cpu"), full_before);
  EXPECT_EQ(Text("tiny/lora", "cpu"), "not json\n");
  // A record naming no safe file is refused the same way.
  s = AddToHistory(dir(), {Record("tiny/full", "cpu", "2026-11-23T00:00:00Z"), Record("../x", "cpu", "t")}, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Text("tiny/full", "cpu"), full_before);
}

TEST_F(HistoryTest, ARecordInAnotherCellsFileIsAnError) {
  ASSERT_TRUE(MakeDirs(ParentDir(File("tiny/lora", "cpu"))).ok());
  ASSERT_TRUE(WriteFileAtomically(File("tiny/lora", "cpu"),
                                  JournalLine(Record("tiny/full", "cpu", "2026-11-21T00:00:00Z")) + "\n")
                  .ok());
  StatusOr<History> h = ReadHistory(dir(), {{"tiny/lora", kCpu}});
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("cpu.jsonl:1: history holds a record of tiny/full on cpu"), std::string::npos)
      << h.status().message();
}

}  // namespace
}  // namespace tmx::matrix
