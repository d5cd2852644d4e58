#pragma once
// What the chief publishes of its run, once a second and at each progress
// line: the process's metrics (actors/metrics) fed from the run's own
// counts. Counters move by what grew since the last publication, so a
// restart of the counts (a recovery) never moves them back. No CAF.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "actors/metrics/task_metrics.hpp"

namespace troupe {

/// The run's counts at one moment.
struct run_counts {
  int64_t global_step = 0;
  int64_t last_step = 0;
  uint64_t examples = 0;
  size_t workers = 0;
  uint64_t lost_workers = 0;
  uint64_t expired_leases = 0;
  bool ready = false; ///< the shards are initialised
};

class run_metrics {
public:
  explicit run_metrics(metrics::registry& r = metrics::process_registry())
    : m_(metrics::chief_metrics::make(r)), ready_(metrics::readiness("chief:0", r)) {}

  /// `now_unix`: seconds since the epoch (the clock the global step's
  /// timestamp is written in).
  void publish(const run_counts& c, double now_unix) {
    if (!step_ || *step_ != c.global_step) {
      m_.global_step.set(static_cast<double>(c.global_step));
      m_.global_step_time.set(now_unix);
      step_ = c.global_step;
    }
    m_.last_step.set(static_cast<double>(c.last_step));
    m_.workers.set(static_cast<double>(c.workers));
    grow(m_.examples, examples_, c.examples);
    grow(m_.lost_workers, lost_, c.lost_workers);
    grow(m_.expired_leases, expired_, c.expired_leases);
    ready_.set(c.ready ? 1 : 0);
  }

  /// A progress line's averages.
  void progress(double loss, double examples_per_second) {
    m_.loss.set(loss);
    m_.examples_per_second.set(examples_per_second);
  }

  /// An evaluation's figures; auc and logloss below 0: none (not a binary task).
  void evaluated(int64_t step, double accuracy, double loss, double auc, double logloss) {
    m_.evaluation_step.set(static_cast<double>(step));
    m_.evaluation("accuracy").set(accuracy);
    m_.evaluation("loss").set(loss);
    if (auc >= 0)
      m_.evaluation("auc").set(auc);
    if (logloss >= 0)
      m_.evaluation("logloss").set(logloss);
  }

  void checkpoint_written(int64_t step) {
    m_.checkpoints.add();
    m_.checkpoint_step.set(static_cast<double>(step));
  }

  void shards_recovered() { m_.shard_recoveries.add(); }

  static double unix_now() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
  }

private:
  static void grow(metrics::counter& c, uint64_t& seen, uint64_t now) {
    if (now > seen)
      c.add(now - seen);
    seen = now;
  }

  metrics::chief_metrics m_;
  metrics::gauge& ready_;
  std::optional<int64_t> step_;
  uint64_t examples_ = 0, lost_ = 0, expired_ = 0;
};

} // namespace troupe
