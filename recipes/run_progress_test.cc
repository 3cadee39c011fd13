// Progress lines: phases with their times, throttled byte counts, step timing, and why a run has its steps.
#include "recipes/run_progress.h"

#include <chrono>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace tmx::recipes {
namespace {

// A clock the test moves by hand.
struct FakeClock {
  double now = 100;
  RunProgress::Clock clock() {
    return [this] { return now; };
  }
};

TEST(RunProgressTest, APhaseSaysWhatItDoesAndHowLongItTook) {
  FakeClock t;
  std::ostringstream out;
  RunProgress progress(&out, t.clock());
  progress.Begin("Building model m (1.24 B parameters, bf16)");
  t.now += 12.25;
  EXPECT_DOUBLE_EQ(progress.End("Built the model"), 12.25);
  progress.Begin("Loading the data");
  t.now += 0.25;
  progress.End("Loaded 4 samples");
  EXPECT_EQ(out.str(),
            "Building model m (1.24 B parameters, bf16) ...\nBuilt the model in 12s\n"
            "Loading the data ...\nLoaded 4 samples in 0.25s\n");
}

// At most one line every 2 s, and the last only when an earlier one was shown: a quick load says nothing more
// than its phase's lines.
TEST(RunProgressTest, BytesAreShownAtMostEveryTwoSecondsAndTheLastAfterThem) {
  FakeClock t;
  std::ostringstream out;
  RunProgress progress(&out, t.clock());
  progress.Begin("Loading weights from /w (2.00 GiB)");
  const int64_t gib = int64_t{1} << 30;
  progress.Bytes("  loaded", gib / 4, 2 * gib);
  t.now += 1.9;
  progress.Bytes("  loaded", gib / 2, 2 * gib);
  t.now += 0.2;
  progress.Bytes("  loaded", gib, 2 * gib);  // 2.1 s after the phase's line
  t.now += 0.5;
  progress.Bytes("  loaded", 3 * gib / 2, 2 * gib);
  progress.Bytes("  loaded", 2 * gib, 2 * gib);
  EXPECT_EQ(out.str(),
            "Loading weights from /w (2.00 GiB) ...\n"
            "  loaded 1.00 GiB of 2.00 GiB (50%)\n"
            "  loaded 2.00 GiB of 2.00 GiB (100%)\n");

  std::ostringstream quick;
  RunProgress fast(&quick, t.clock());
  fast.Begin("Loading weights from /w (1.00 KiB)");
  fast.Bytes("  loaded", 1024, 1024);
  EXPECT_EQ(quick.str(), "Loading weights from /w (1.00 KiB) ...\n");
}

TEST(RunProgressTest, StepsTellTheTimeElapsedAndLeft) {
  FakeClock t;
  std::ostringstream out;
  RunProgress progress(&out, t.clock());
  progress.StartSteps(10);
  t.now += 30;
  EXPECT_EQ(progress.StepTiming(2), "2/10 steps, elapsed 30s, eta 2m00s");
  EXPECT_TRUE(progress.StepLineDue());  // no line for 30 s
  progress.Line("epoch 1 step 2 | ...");
  EXPECT_FALSE(progress.StepLineDue());
  t.now += RunProgress::kStepEvery;
  EXPECT_TRUE(progress.StepLineDue());
  EXPECT_EQ(progress.StepTiming(10), "10/10 steps, elapsed 40s, eta 0.00s");
  RunProgress silent(nullptr, t.clock());
  silent.Line("nothing is printed");
}

// A step longer than the watcher's interval gets "still running" lines from the watcher; a quick one, or a time
// with nothing running, gets none. (Real time: the watcher is a thread.)
TEST(RunProgressTest, ALongStepSaysItStillRunsAndNothingElseDoes) {
  std::ostringstream out;
  RunProgress progress(&out);
  progress.StartWatching(0.05);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(out.str(), "");  // nothing runs: no line (the watcher writes only while something runs)
  progress.Doing("epoch 1 step 3");
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  progress.Doing("");
  const std::string text = out.str();  // the watcher writes nothing more from here
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(out.str(), text);  // nothing while nothing runs
  progress.StopWatching();
  size_t lines = 0;
  for (size_t at = text.find("epoch 1 step 3 still running ("); at != std::string::npos;
       at = text.find("epoch 1 step 3 still running (", at + 1)) {
    ++lines;
  }
  EXPECT_GE(lines, 2u) << text;   // about 8 at 0.05 s, fewer on a loaded machine
  EXPECT_LE(lines, 9u) << text;   // never more often than asked
  // Stopped: a later line is the caller's alone.
  progress.Line("done");
  EXPECT_EQ(out.str(), text + "done\n");
}

TEST(RunProgressTest, NumbersAtAGlance) {
  EXPECT_EQ(FormatCount(1'235'814'400), "1.24 B");
  EXPECT_EQ(FormatCount(494'032'768), "494.03 M");
  EXPECT_EQ(FormatCount(312'576), "312.58 K");
  EXPECT_EQ(FormatCount(812), "812");
  EXPECT_EQ(FormatSeconds(0.4213), "0.42s");
  EXPECT_EQ(FormatSeconds(245), "4m05s");
}

// Each case prints its input on failure.
TEST(RunProgressTest, StepsAreExplainedByWhatSetThem) {
  struct Case {
    StepCounts counts;
    std::string expected;
  };
  auto counts = [](int64_t samples, int64_t batch, int64_t batches, int64_t accumulation,
                   std::optional<int64_t> max_steps, int64_t epochs) {
    StepCounts c;
    c.samples = samples;
    c.batch_size = batch;
    c.batches = batches;
    c.gradient_accumulation_steps = accumulation;
    c.max_steps_per_epoch = max_steps;
    c.epochs = epochs;
    return c;
  };
  StepCounts ranks = counts(52002, 2, 13001, 1, 2, 3);
  ranks.ranks = 2;
  ranks.start_epoch = 1;
  StepCounts packed = counts(7, 4, 2, 1, std::nullopt, 1);
  packed.packed = true;
  const Case cases[] = {
      {counts(2, 2, 1, 1, 2, 1),
       "Running 1 step (1 epoch x 1 step per epoch): 1 step per epoch from the data, fewer than "
       "max_steps_per_epoch=2: 2 samples, batch_size 2 -> 1 batch, gradient_accumulation_steps 1"},
      {counts(52002, 2, 26001, 1, 2, 2),
       "Running 4 steps (2 epochs x 2 steps per epoch): max_steps_per_epoch=2 (the data gives 26001 steps per "
       "epoch: 52002 samples, batch_size 2 -> 26001 batches, gradient_accumulation_steps 1)"},
      {counts(6, 2, 3, 2, std::nullopt, 1),
       "Running 1 step (1 epoch x 1 step per epoch): 1 step per epoch from the data: 6 samples, batch_size 2 -> "
       "3 batches, gradient_accumulation_steps 2; the last 1 batch of each epoch is left out (fewer than "
       "gradient_accumulation_steps)"},
      {ranks,
       "Running 4 steps (2 epochs x 2 steps per epoch, resuming at epoch 2 of 3): max_steps_per_epoch=2 (the "
       "data gives 13001 steps per epoch: 52002 samples, 26001 for each of 2 ranks, batch_size 2 -> 13001 "
       "batches, gradient_accumulation_steps 1)"},
      {packed,
       "Running 2 steps (1 epoch x 2 steps per epoch): 2 steps per epoch from the data: 7 packed rows, "
       "batch_size 4 -> 2 batches, gradient_accumulation_steps 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    EXPECT_EQ(DescribeSteps(c.counts), c.expected);
  }
}

}  // namespace
}  // namespace tmx::recipes
