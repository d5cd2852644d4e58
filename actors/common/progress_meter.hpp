#pragma once
// The progress line of the chief and of each worker: steps, loss, batch
// accuracy and examples/s averaged over the steps since the last line, one
// line every `interval` steps. Sync runs add the token queue's figures.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "tensor/nn/metric.hpp"

namespace troupe {

/// Averages over the steps since the previous line.
struct progress_line {
  int64_t steps = 0;
  double loss = 0;           ///< mean of the steps' mean losses
  double batch_accuracy = 0; ///< correct / examples
  double examples_per_sec = 0;
  double steps_per_sec = 0;
  double straggler_ms = 0; ///< sync: mean per update
  uint64_t dropped = 0;    ///< sync: gradients not applied
  uint64_t tokens = 0;     ///< sync: tokens handed out
};

/// The line's quality figure: "batch_accuracy=0.9123" for classes,
/// "rmse=0.4321" (the root of the mean squared error) for regression.
inline std::string metric_text(const progress_line& line, bool regression) {
  char text[64];
  if (regression)
    std::snprintf(text, sizeof text, "rmse=%.4f", rmse_of(line.loss));
  else
    std::snprintf(text, sizeof text, "batch_accuracy=%.4f", line.batch_accuracy);
  return text;
}

class progress_meter {
public:
  using clock = std::chrono::steady_clock;

  /// interval: a line every `interval` steps; 0 turns lines off.
  explicit progress_meter(int64_t interval, clock::time_point start = clock::now())
    : interval_(interval), since_(start) {}

  /// One step's batch.
  void add_step(double loss, uint64_t correct, uint64_t examples) {
    ++acc_.steps;
    acc_.loss += loss;
    correct_ += correct;
    examples_ += examples;
  }

  /// Sync: the token queue's figures of one update.
  void add_sync(double straggler_ms, uint64_t dropped, uint64_t tokens) {
    acc_.straggler_ms += straggler_ms;
    acc_.dropped += dropped;
    acc_.tokens += tokens;
  }

  /// Starts the interval over, e.g. when training really starts.
  void restart(clock::time_point now = clock::now()) {
    acc_ = {};
    correct_ = examples_ = 0;
    since_ = now;
  }

  /// When `step` ends an interval (and a step was added since the last
  /// line): the averages since then, and the meter starts a new interval.
  std::optional<progress_line> take_line(int64_t step, clock::time_point now = clock::now()) {
    if (interval_ <= 0 || step % interval_ != 0 || acc_.steps == 0)
      return std::nullopt;
    auto line = acc_;
    auto steps = static_cast<double>(acc_.steps);
    line.loss /= steps;
    line.straggler_ms /= steps;
    line.batch_accuracy = examples_ ? static_cast<double>(correct_) / examples_ : 0.0;
    double secs = std::chrono::duration<double>(now - since_).count();
    line.examples_per_sec = secs > 0 ? static_cast<double>(examples_) / secs : 0.0;
    line.steps_per_sec = secs > 0 ? steps / secs : 0.0;
    restart(now);
    return line;
  }

private:
  int64_t interval_;
  clock::time_point since_;
  progress_line acc_; // sums until take_line
  uint64_t correct_ = 0;
  uint64_t examples_ = 0;
};

} // namespace troupe
