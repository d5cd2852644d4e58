#pragma once
// What a finished (or failed) run reports: the result the chief assembles,
// the final JSON line the node prints, and the per-shard traffic table.
// Plain values; no CAF.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "actors/protocol/protocol.hpp"
#include "config/settings/settings.hpp"

namespace troupe {

/// One evaluation while training (train.eval-interval).
struct evaluation_point {
  int64_t step = 0;
  double accuracy = 0;
  double loss = 0;
  double auc = -1; ///< binary classification with an embedding table; else -1
  double logloss = -1;
};

struct training_result {
  bool ok = false;
  std::string error; ///< why training failed, if it did
  /// What kind of failure it was (when neither ok nor preempted).
  run_end failure = run_end::failed;
  update_mode mode = update_mode::async;
  /// regression: test_loss is the mean squared error, test_accuracy has no
  /// meaning (null in the JSON) and test_rmse is reported.
  objective task = objective::classification;
  int64_t global_step = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  double test_auc = -1; ///< binary classification with an embedding table; else -1
  double test_logloss = -1;
  double examples_per_sec = 0;
  double wall_seconds = 0;
  uint64_t examples = 0;
  int64_t refused_steps = 0;      ///< async: updates not applied (refused, non-finite)
  uint64_t dropped_gradients = 0; ///< sync: gradients not applied (stale, refused)
  uint64_t lost_workers = 0;      ///< workers killed or cut off while training (survived)
  uint64_t left_workers = 0;      ///< workers that left while training (SIGTERM, a scale-down)
  /// Leases taken back from workers that held steps too long (async).
  uint64_t expired_leases = 0;
  /// Workers the chief dropped (a step reported applied without its
  /// receipts), each named with why: the run went on without them.
  std::vector<std::string> dropped_workers;
  /// Stopped by SIGTERM after saving a checkpoint: not done, but not failed
  /// either (ok is false; the node exits 0 and a restart continues).
  bool preempted = false;
  /// How the run ended: every task's exit code says it.
  run_end ended() const { return ok ? run_end::done : preempted ? run_end::preempted : failure; }
  /// Per-shard traffic, in shard order, and max / mean of bytes in + out
  /// (0 if unknown).
  std::vector<shard_traffic> traffic;
  double ps_imbalance = 0;
  /// The trained model: every variable, in model order (empty on failure).
  std::vector<std::string> variables;
  std::vector<tensor> values;
  /// The evaluations while training, in step order.
  std::vector<evaluation_point> evaluations;
  /// False for a declared model, which its program evaluates: no test_*
  /// figures (null in the JSON), and `reported` holds what it reported.
  bool evaluated = true;
  std::map<std::string, double> reported;
  /// What the data became (data_summary_json), added by the node: "" for none.
  std::string data_json;

  /// The final line the node prints: {"event":"final","ok":...}.
  std::string to_json() const;
  /// {"event":"traffic",...}: per shard and variable, one line.
  std::string traffic_json() const;
};

/// Sorts the shards' traffic by shard and sets ps_imbalance.
void summarize_traffic(training_result& result);

/// The traffic table for the chief's log: a header, one line per shard and
/// the imbalance.
std::vector<std::string> traffic_table(const training_result& result);

} // namespace troupe
