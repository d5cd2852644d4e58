#pragma once
// When the chief saves a checkpoint: every checkpoint.save-interval and/or
// every checkpoint.save-steps global steps, counted from the last save (or
// the start), without CAF.
#include <chrono>
#include <cstdint>

namespace troupe {

class checkpoint_schedule {
public:
  using clock = std::chrono::steady_clock;

  /// interval or every_steps 0: that trigger is off.
  checkpoint_schedule(std::chrono::milliseconds interval, int64_t every_steps, int64_t step,
                      clock::time_point now)
    : interval_(interval), every_steps_(every_steps), last_step_(step), last_time_(now) {}

  bool due(int64_t step, clock::time_point now) const {
    return (interval_.count() > 0 && now - last_time_ >= interval_)
           || (every_steps_ > 0 && step - last_step_ >= every_steps_);
  }

  /// A save began at `step`: the next is due from here.
  void began(int64_t step, clock::time_point now) {
    last_step_ = step;
    last_time_ = now;
  }

private:
  std::chrono::milliseconds interval_;
  int64_t every_steps_;
  int64_t last_step_;
  clock::time_point last_time_;
};

} // namespace troupe
