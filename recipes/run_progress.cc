#include "recipes/run_progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/text.h"

namespace tmx::recipes {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "1 step", "2 steps"; "1 batch", "2 batches".
std::string Count(int64_t n, const std::string& noun, const std::string& plural = "") {
  return std::to_string(n) + " " + (n == 1 ? noun : plural.empty() ? noun + "s" : plural);
}

}  // namespace

RunProgress::RunProgress(std::ostream* out, Clock now) : out_(out), now_(now ? std::move(now) : SteadySeconds) {
  last_line_ = phase_start_ = steps_start_ = now_();
}

RunProgress::~RunProgress() { StopWatching(); }

void RunProgress::WriteLocked(const std::string& text) {
  if (out_ != nullptr) *out_ << text << std::endl;
  last_line_ = now_();
}

double RunProgress::LastLine() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_line_;
}

void RunProgress::Line(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  WriteLocked(text);
}

void RunProgress::Begin(const std::string& what) {
  Line(what + " ...");
  phase_start_ = LastLine();
  bytes_shown_ = false;
}

void RunProgress::StartWatching(double every_s) {
  if (out_ == nullptr || watcher_.joinable()) return;
  stop_ = false;
  watcher_ = std::thread([this, every_s] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::duration<double>(every_s));
      if (stop_) break;
      const double now = now_();
      if (doing_.empty() || now - last_line_ < every_s) continue;
      WriteLocked(doing_ + " still running (" + FormatSeconds(now - doing_since_) + ")");
    }
  });
}

void RunProgress::Doing(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  doing_ = what;
  doing_since_ = now_();
}

void RunProgress::StopWatching() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  watcher_.join();
}

double RunProgress::End(const std::string& done) {
  const double seconds = now_() - phase_start_;
  Line(done + " in " + FormatSeconds(seconds));
  return seconds;
}

void RunProgress::Bytes(const std::string& label, int64_t done, int64_t total) {
  const bool last = done >= total;
  if (last ? !bytes_shown_ : now_() - LastLine() < kBytesEvery) return;
  const double share = total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
  Line(label + " " + FormatBytes(done) + " of " + FormatBytes(total) + " (" + FormatNumber(share, 0) + "%)");
  bytes_shown_ = true;
}

void RunProgress::StartSteps(int64_t total) {
  steps_start_ = now_();
  steps_total_ = total;
}

std::string RunProgress::StepTiming(int64_t done) const {
  const double elapsed = now_() - steps_start_;
  const double left = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(steps_total_ - done) : 0;
  return std::to_string(done) + "/" + std::to_string(steps_total_) + " steps, elapsed " + FormatSeconds(elapsed) +
         ", eta " + FormatSeconds(left);
}

bool RunProgress::StepLineDue() const { return now_() - LastLine() >= kStepEvery; }

std::string FormatCount(int64_t n) {
  const struct {
    double scale;
    const char* unit;
  } units[] = {{1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& u : units) {
    if (static_cast<double>(n) >= u.scale) return FormatNumber(static_cast<double>(n) / u.scale, 2) + " " + u.unit;
  }
  return std::to_string(n);
}

std::string FormatSeconds(double seconds) {
  if (seconds >= 10) return FormatDuration(seconds);
  return FormatNumber(std::max(0.0, seconds), 2) + "s";
}

int64_t StepCounts::data_steps_per_epoch() const {
  return batches / std::max<int64_t>(1, gradient_accumulation_steps);
}

int64_t StepCounts::steps_per_epoch() const {
  const int64_t data = data_steps_per_epoch();
  return max_steps_per_epoch ? std::min(data, *max_steps_per_epoch) : data;
}

int64_t StepCounts::total_steps() const { return std::max<int64_t>(0, epochs - start_epoch) * steps_per_epoch(); }

std::string DescribeSteps(const StepCounts& c) {
  const int64_t per_epoch = c.steps_per_epoch(), data = c.data_steps_per_epoch();
  const int64_t epochs = std::max<int64_t>(0, c.epochs - c.start_epoch);
  std::string text = "Running " + Count(c.total_steps(), "step") + " (" + Count(epochs, "epoch") + " x " +
                     Count(per_epoch, "step") + " per epoch";
  if (c.start_epoch > 0) text += ", resuming at epoch " + std::to_string(c.start_epoch + 1) + " of " +
                                 std::to_string(c.epochs);
  text += "): ";
  // Where the data's steps come from: rows, ranks, batch, accumulation.
  std::string data_why = c.packed ? Count(c.samples, "packed row") : Count(c.samples, "sample");
  if (c.ranks > 1) {
    data_why += ", " + std::to_string((c.samples + c.ranks - 1) / c.ranks) + " for each of " +
                std::to_string(c.ranks) + " ranks";
  }
  data_why += ", batch_size " + std::to_string(c.batch_size) + " -> " + Count(c.batches, "batch", "batches") +
              ", gradient_accumulation_steps " + std::to_string(c.gradient_accumulation_steps);
  if (c.max_steps_per_epoch && *c.max_steps_per_epoch < data) {
    text += "max_steps_per_epoch=" + std::to_string(*c.max_steps_per_epoch) + " (the data gives " +
            Count(data, "step") + " per epoch: " + data_why + ")";
  } else {
    text += Count(per_epoch, "step") + " per epoch from the data";
    if (c.max_steps_per_epoch && *c.max_steps_per_epoch > data) {
      text += ", fewer than max_steps_per_epoch=" + std::to_string(*c.max_steps_per_epoch);
    }
    text += ": " + data_why;
  }
  const int64_t unused = c.batches % std::max<int64_t>(1, c.gradient_accumulation_steps);
  if (unused > 0 && (!c.max_steps_per_epoch || *c.max_steps_per_epoch >= data)) {
    text += "; the last " + Count(unused, "batch", "batches") +
            " of each epoch " + (unused == 1 ? "is" : "are") + " left out (fewer than gradient_accumulation_steps)";
  }
  return text;
}

}  // namespace tmx::recipes
