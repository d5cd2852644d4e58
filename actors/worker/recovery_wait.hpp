#pragma once
// A worker's wait for its run to recover, without CAF: since when it waits
// (a lost shard or chief, a failed request of the run), which shards it must
// reach again before it asks for the new plan, and the generation that voids
// whatever was in flight before (grants and bulk-path answers of the plan
// before carry the generation they were asked in).
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace troupe {

class recovery_wait {
public:
  using clock = std::chrono::steady_clock;

  explicit recovery_wait(std::chrono::milliseconds limit = {}) : limit_(limit) {}

  /// Something of the run failed: what is in flight is void. True when
  /// this begins the wait, false when the worker was waiting already.
  bool begin(clock::time_point now = clock::now()) {
    ++generation_;
    if (since_)
      return false;
    since_ = now;
    return true;
  }
  /// A new plan: the wait is over (what was in flight stays void).
  void over() { since_.reset(); }
  /// The plan changes under the steps in flight (a restored run).
  void void_in_flight() noexcept { ++generation_; }

  void lost_shard(int32_t shard) { lost_shards_.push_back(shard); }
  /// The shards to reach again, in the order they were lost (forgotten here).
  std::vector<int32_t> take_lost_shards() {
    auto lost = std::move(lost_shards_);
    lost_shards_.clear();
    return lost;
  }

  bool waiting() const noexcept { return since_.has_value(); }
  /// Waiting for at least the limit (cluster.recovery-timeout).
  bool expired(clock::time_point now = clock::now()) const {
    return since_ && now - *since_ >= limit_;
  }
  /// Tags a request: its answer counts only while current(tag).
  uint64_t generation() const noexcept { return generation_; }
  bool current(uint64_t tag) const noexcept { return tag == generation_; }
  std::chrono::milliseconds limit() const noexcept { return limit_; }

private:
  std::chrono::milliseconds limit_;
  uint64_t generation_ = 0;
  std::optional<clock::time_point> since_;
  std::vector<int32_t> lost_shards_;
};

} // namespace troupe
