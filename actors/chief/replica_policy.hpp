#pragma once
// Sync mode: what the chief does when workers are lost, leave, come back
// or join (train.on-worker-loss, replicas-to-aggregate = "all"), without
// CAF. The listed N workers count as available from the start; only those
// that joined and went away count as gone, so workers still starting up
// never shrink R. Workers beyond the list (elastic membership) add to the
// available ones while they take part.
//   shrink: R in force is max(1, min(R, available)); each change is sent
//           to every shard.
//   wait:   R stays; while fewer than R workers are available the run is
//           short, and the chief aborts once it has been short too long.
//   follow ("all"): R in force is max(1, available), whatever the policy.
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

  replica_policy(worker_loss_policy policy, int32_t replicas, int32_t workers,
                 bool follow_membership = false)
    : policy_(policy), follow_(follow_membership), configured_(replicas), in_force_(replicas) {
    for (int32_t w = 0; w < workers; ++w)
      members_.insert(w);
  }

  /// A worker that had joined went down (lost, or left the run).
  change lost(int32_t worker, clock::time_point now = clock::now()) {
    if (members_.count(worker) == 0 || !gone_.insert(worker).second)
      return {};
    return apply(now);
  }

  /// A worker joined: it counts again if it was gone, and from now on if
  /// it is beyond the listed ones.
  change joined(int32_t worker, clock::time_point now = clock::now()) {
    bool back = gone_.erase(worker) > 0;
    bool added = members_.insert(worker).second;
    if (!back && !added)
      return {};
    return apply(now);
  }

  bool was_lost(int32_t worker) const { return gone_.count(worker) > 0; }
  int32_t replicas() const noexcept { return in_force_; }
  int32_t configured() const noexcept { return configured_; }
  int32_t available() const noexcept {
    return static_cast<int32_t>(members_.size() - gone_.size());
  }
  size_t lost_count() const noexcept { return gone_.size(); }
  bool follows_membership() const noexcept { return follow_; }

  /// wait: true once the run has been short of workers for longer than `limit`.
  bool short_for_longer_than(std::chrono::milliseconds limit,
                             clock::time_point now = clock::now()) const {
    return short_since_ && now - *short_since_ > limit;
  }

private:
  change apply(clock::time_point now) {
    change out;
    bool short_of_workers = available() < configured_;
    if (policy_ == worker_loss_policy::wait && !follow_) {
      if (short_of_workers && !short_since_) {
        short_since_ = now;
        out.became_short = true;
      } else if (!short_of_workers && short_since_) {
        short_since_.reset();
        out.enough_again = true;
      }
      return out;
    }
    auto wanted = follow_ ? std::max(1, available())
                          : std::max(1, std::min(configured_, available()));
    if (wanted != in_force_) {
      out.previous = in_force_;
      out.replicas = in_force_ = wanted;
    }
    return out;
  }

  worker_loss_policy policy_;
  bool follow_;
  int32_t configured_;
  int32_t in_force_;
  std::set<int32_t> members_; // the listed workers, and those beyond them that joined
  std::set<int32_t> gone_;    // members lost or left, until they join again
  std::optional<clock::time_point> short_since_;
};

} // namespace troupe
