#pragma once
// Sync mode: what the chief does when workers are lost and come back
// (train.on-worker-loss), without CAF. Only workers that joined and were
// lost count, so workers still starting up never shrink R.
//   shrink: R in force is max(1, min(R, N - lost)); each change is sent to
//           every shard.
//   wait:   R stays; while fewer than R workers are available the run is
//           short, and the chief aborts once it has been short too long.
#include <chrono>
#include <cstdint>
#include <optional>
#include <set>

#include "config/settings/settings.hpp"

namespace troupe {

class replica_policy {
public:
  using clock = std::chrono::steady_clock;

  /// What a loss or a return changed.
  struct change {
    /// shrink: the R to send to every shard, when it changed, and the one before.
    std::optional<int32_t> replicas;
    int32_t previous = 0;
    /// wait: the run just became short of workers, or has enough again.
    bool became_short = false;
    bool enough_again = false;
  };

  replica_policy(worker_loss_policy policy, int32_t replicas, int32_t workers)
    : policy_(policy), configured_(replicas), in_force_(replicas), workers_(workers) {}

  /// A worker that had joined went down.
  change lost(int32_t worker, clock::time_point now = clock::now()) {
    lost_.insert(worker);
    return apply(now);
  }

  /// A worker joined; it counts again if it was lost.
  change joined(int32_t worker, clock::time_point now = clock::now()) {
    if (lost_.erase(worker) == 0)
      return {};
    return apply(now);
  }

  bool was_lost(int32_t worker) const { return lost_.count(worker) > 0; }
  int32_t replicas() const noexcept { return in_force_; }
  int32_t configured() const noexcept { return configured_; }
  int32_t available() const noexcept { return workers_ - static_cast<int32_t>(lost_.size()); }
  size_t lost_count() const noexcept { return lost_.size(); }

  /// wait: true once the run has been short of workers for longer than `limit`.
  bool short_for_longer_than(std::chrono::milliseconds limit,
                             clock::time_point now = clock::now()) const {
    return short_since_ && now - *short_since_ > limit;
  }

private:
  change apply(clock::time_point now) {
    change out;
    bool short_of_workers = available() < configured_;
    if (policy_ == worker_loss_policy::wait) {
      if (short_of_workers && !short_since_) {
        short_since_ = now;
        out.became_short = true;
      } else if (!short_of_workers && short_since_) {
        short_since_.reset();
        out.enough_again = true;
      }
      return out;
    }
    auto wanted = std::max(1, std::min(configured_, available()));
    if (wanted != in_force_) {
      out.previous = in_force_;
      out.replicas = in_force_ = wanted;
    }
    return out;
  }

  worker_loss_policy policy_;
  int32_t configured_;
  int32_t in_force_;
  int32_t workers_;
  std::set<int32_t> lost_;
  std::optional<clock::time_point> short_since_;
};

} // namespace troupe
