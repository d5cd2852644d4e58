#pragma once
// Bounded staleness (train.mode = "ssp", issue 29), without CAF: each
// worker's clock is the number of its updates applied; a worker may start
// another step only while the steps it has started are at most
// `staleness` ahead of the slowest clock (Bosen's and Angel's SSP). With
// staleness 0 every worker waits at each step for the slowest to finish the
// same step (sync's lockstep without backups, each gradient its own
// update); a large staleness is async.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>

namespace troupe {

class staleness_bound {
public:
  /// A bound of `staleness` steps (>= 0); unbounded() never holds a worker.
  explicit staleness_bound(int64_t staleness) : staleness_(staleness) {}
  static staleness_bound unbounded() { return staleness_bound(-1); }
  bool bounded() const noexcept { return staleness_ >= 0; }

  /// A worker joins (or comes back): it starts at the slowest clock of the
  /// others, so that a newcomer does not hold them back for the steps it
  /// never had to take.
  void enroll(int32_t worker) {
    clocks_.erase(worker);
    auto start = clocks_.empty() ? 0 : slowest();
    clocks_[worker] = {start, start};
  }
  /// A worker is gone: it no longer holds the others back.
  void leave(int32_t worker) { clocks_.erase(worker); }

  /// Whether `worker` may start one more step now.
  bool may_start(int32_t worker) const {
    if (!bounded())
      return true;
    auto it = clocks_.find(worker);
    auto started = it == clocks_.end() ? slowest() : it->second.started;
    return started <= slowest() + staleness_;
  }
  void started(int32_t worker) { clock(worker).started += 1; }
  void completed(int32_t worker) { clock(worker).done += 1; }
  /// A started step went back (refused, or its worker lost it).
  void revoked(int32_t worker) {
    auto& c = clock(worker);
    c.started = std::max(c.done, c.started - 1);
  }

  /// The slowest clock (updates applied) of the enrolled workers; 0 without any.
  int64_t slowest() const {
    if (clocks_.empty())
      return 0;
    int64_t low = std::numeric_limits<int64_t>::max();
    for (auto& entry : clocks_)
      low = std::min(low, entry.second.done);
    return low;
  }

private:
  struct worker_clock {
    int64_t done = 0;    ///< updates applied
    int64_t started = 0; ///< steps granted and not given back, done included
  };
  worker_clock& clock(int32_t worker) {
    auto it = clocks_.find(worker);
    if (it == clocks_.end()) {
      enroll(worker);
      it = clocks_.find(worker);
    }
    return it->second;
  }

  int64_t staleness_;
  std::map<int32_t, worker_clock> clocks_;
};

} // namespace troupe
