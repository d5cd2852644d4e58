#pragma once
// The steps a worker holds: async leases it up to two (the next one waits
// here while the last one's report is on the way), sync one at a time. One
// step is under way at most; each end of a step is numbered, so that of
// the worker's run messages only the latest starts the next step.
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "actors/protocol/protocol.hpp"

namespace troupe {

class step_lease {
public:
  /// A new plan: nothing held, nothing under way, `size` steps asked at once.
  void reset(int32_t size) {
    size_ = size < 1 ? 1 : size;
    granted_.clear();
    busy_ = false;
  }
  int32_t size() const noexcept { return size_; }
  void grant(const step_grant& grant) { granted_.push_back(grant); }
  bool busy() const noexcept { return busy_; }
  bool holds_none() const noexcept { return granted_.empty(); }
  /// Granted steps not yet started.
  size_t queued() const noexcept { return granted_.size(); }

  /// The next step held, now under way; none while one is under way or
  /// none is held.
  std::optional<step_grant> begin() {
    if (busy_ || granted_.empty())
      return std::nullopt;
    busy_ = true;
    auto next = granted_.front();
    granted_.pop_front();
    return next;
  }
  /// The steps held and not started, taken away (given back to the chief).
  std::deque<step_grant> take_all() { return std::exchange(granted_, {}); }
  /// Under way without a step (the last pull-ahead job is being collected).
  void hold() noexcept { busy_ = true; }
  /// What was under way is over: the number of this end.
  uint64_t end() noexcept {
    busy_ = false;
    return ++ends_;
  }
  bool latest(uint64_t end) const noexcept { return end == ends_; }

private:
  int32_t size_ = 1;
  std::deque<step_grant> granted_;
  bool busy_ = false;
  uint64_t ends_ = 0;
};

} // namespace troupe
