// What a run tells the person watching it while it works: the start-up's phases with the time each took,
// the bytes of a checkpoint as it loads, how many steps will run and why, and with each step the time
// elapsed and left. Lines go to one stream; the clock is injectable, so the throttling is tested without
// waiting.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>

namespace tmx::recipes {

// Discards what is written to it: the lines of ranks other than 0, whose progress only rank 0 prints.
class NullStream : public std::ostream {
 public:
  NullStream() : std::ostream(nullptr) {}
};


class RunProgress {
 public:
  using Clock = std::function<double()>;  // seconds on a monotonic clock
  // A line about bytes loading at most this often (and the last one).
  static constexpr double kBytesEvery = 2.0;
  // A step that is not logged still gets a line when the last line is this old: long steps are never silent.
  static constexpr double kStepEvery = 10.0;

  // `out` may be null (nothing is printed); `now` defaults to std::chrono::steady_clock.
  explicit RunProgress(std::ostream* out, Clock now = {});
  ~RunProgress();  // stops the watcher
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;

  // Prints one line and notes when, for the throttling.
  void Line(const std::string& text);

  // Starts timing a phase and prints "<what> ...".
  void Begin(const std::string& what);
  // Ends the phase begun last: prints "<done> in 0.42s" and returns its seconds.
  double End(const std::string& done);

  // "<label> 1.20 of 2.47 GiB (48%)", when kBytesEvery seconds have passed since the last line; the last
  // (done == total) too when an earlier one of the phase was printed.
  void Bytes(const std::string& label, int64_t done, int64_t total);

  // The training steps begin: `total` of them in this run.
  void StartSteps(int64_t total);
  // "3/10 steps, elapsed 1m02s, eta 3m10s" once `done` of them are done (the time left at the mean so far).
  std::string StepTiming(int64_t done) const;
  // Whether a step that is not logged gets a line: kStepEvery seconds since the last line.
  bool StepLineDue() const;

  // Until StopWatching (or the destructor), a thread prints "<what> still running (1m10s)" whenever `every_s`
  // seconds pass without a line, <what> being the latest Doing's: a step of minutes is never silent (a 0.5B step
  // was silent for 71 s). Nothing when `out` is null. Every line is then written under one lock.
  void StartWatching(double every_s = kStepEvery);
  // What runs now (e.g. "epoch 1 step 3"), timed from now; "" for nothing.
  void Doing(const std::string& what);
  void StopWatching();

 private:
  std::ostream* out_;
  Clock now_;
  double last_line_ = 0;
  double phase_start_ = 0;
  bool bytes_shown_ = false;  // a Bytes line was printed in the current phase
  double steps_start_ = 0;
  int64_t steps_total_ = 0;
  // The watcher (StartWatching): last_line_ and the stream are shared with it under mu_.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::thread watcher_;
  bool stop_ = false;
  std::string doing_;
  double doing_since_ = 0;

  void WriteLocked(const std::string& text);  // REQUIRES: mu_ held
  double LastLine() const;
};

// "1.24 B", "494.03 M", "312.58 K", "812": a parameter count at a glance.
std::string FormatCount(int64_t n);

// Seconds for progress lines: "0.42s" under 10 s, else FormatDuration's "4m05s".
std::string FormatSeconds(double seconds);

// The numbers that decide how many optimizer steps a run takes, for the line before the first step.
struct StepCounts {
  int64_t samples = 0;    // training rows after tokenizing (and packing), all ranks together
  bool packed = false;    // the rows are packs of samples (dataset.packed)
  int64_t ranks = 1;
  int64_t batch_size = 1;
  int64_t batches = 0;    // per epoch (of one rank)
  int64_t gradient_accumulation_steps = 1;
  std::optional<int64_t> max_steps_per_epoch;
  int64_t epochs = 1;
  int64_t start_epoch = 0;  // resuming: the first epoch this run trains
  // What the data gives (batches / gradient_accumulation_steps), capped by max_steps_per_epoch.
  int64_t data_steps_per_epoch() const;
  int64_t steps_per_epoch() const;
  int64_t total_steps() const;  // this run's
};

// "Running 2 steps (1 epoch x 2 steps per epoch): max_steps_per_epoch=2 (the data gives 26001: ...)", saying
// which of the data, the batch, gradient accumulation and max_steps_per_epoch set the number.
std::string DescribeSteps(const StepCounts& c);

}  // namespace tmx::recipes
