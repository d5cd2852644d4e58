#pragma once
// Sync mode's bookkeeping behind the token queue, without CAF: the global
// step (the number of updates every shard holding variables has applied),
// which shards have reached which step, and the figures of the update in
// progress. The token queue actor only keeps the replies of waiting workers.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "actors/protocol/protocol.hpp"

namespace troupe {

class token_ledger {
public:
  /// shards: the shards holding variables (each reports every update).
  /// first_step: the global step training starts at (a restored checkpoint's).
  token_ledger(int32_t shards, int64_t last_step, int64_t first_step = 0)
    : shards_(shards), last_step_(last_step), global_step_(first_step) {}

  /// A worker's report. Its figures count towards the update in progress
  /// (applied) or as a dropped gradient. Returns the grant to answer at once
  /// (stopped, joining or late), or nullopt: the worker waits for the update.
  std::optional<step_grant> report(const step_report& r);

  /// A shard applied an update and reached `step`. Returns the summary of
  /// each update that is now complete on every shard, in order; the first
  /// one releases the `waiting` workers (counted in its tokens), which the
  /// caller answers with grant().
  std::vector<step_summary> applied(int64_t step, double straggler_ms, size_t waiting);

  /// The grant for workers released now: the global step, stop at the end.
  step_grant grant() const noexcept { return {global_step_, stopped_}; }

  /// From now on every report is answered stop.
  void stop() noexcept { stopped_ = true; }

  int64_t global_step() const noexcept { return global_step_; }
  bool stopped() const noexcept { return stopped_; }

private:
  int32_t shards_;
  int64_t last_step_;
  int64_t global_step_ = 0;
  bool stopped_ = false;
  std::map<int64_t, std::vector<double>> reached_; // step reached -> straggler ms per shard
  // the figures of the update in progress
  double loss_sum_ = 0;
  uint64_t applied_reports_ = 0;
  uint64_t correct_ = 0;
  uint64_t examples_ = 0;
  uint64_t dropped_ = 0;
  uint64_t tokens_ = 0; // handed out since the last update, at once or on it
};

} // namespace troupe
