#pragma once
// Troupe's metrics, by the part of a task that updates them: every name,
// label and help text is written here once (and mirrored in
// docs/operations.md#metrics). Each struct holds references into the
// process's registry, taken once when its owner starts; updating one is an
// atomic add or store. Labels name the shard, worker or table, so that one
// process may hold several (the whole cluster in one process).
#include <cstdint>
#include <string>

#include "actors/metrics/registry.hpp"

namespace troupe::metrics {

/// `troupe_ready{task="ps:0"}`: 1 while the task can do its work (a shard
/// initialised or restored, a worker holding a plan, the chief with its
/// shards initialised). /readyz answers 200 when every one is 1.
gauge& readiness(const std::string& task, registry& r = process_registry());

/// The chief's view of the run.
struct chief_metrics {
  gauge& global_step;
  gauge& global_step_time; ///< unix seconds when the global step last moved
  gauge& last_step;        ///< train.last-step
  counter& examples;
  gauge& examples_per_second; ///< the last progress line's
  gauge& loss;                ///< the last progress line's mean training loss
  gauge& workers;             ///< live workers
  counter& lost_workers;
  counter& expired_leases;
  counter& shard_recoveries;
  counter& checkpoints;
  gauge& checkpoint_step;
  gauge& evaluation_step;
  registry& where;

  /// The last evaluation's value of `metric` (accuracy, auc, loss, logloss).
  gauge& evaluation(const std::string& metric);
  static chief_metrics make(registry& r = process_registry());
};

/// One shard's traffic.
struct shard_metrics {
  counter& pulls;
  counter& pushes;
  counter& row_pulls;
  counter& row_pushes;
  counter& sent_bytes;
  counter& received_bytes;
  counter& keys_pulled;
  counter& keys_pushed;
  counter& repeated_pushes;
  counter& refused_pushes;
  static shard_metrics make(int32_t shard, registry& r = process_registry());
};

/// One table's rows on one shard.
struct table_metrics {
  gauge& rows;
  gauge& bytes;
  counter& admitted;
  counter& evicted;
  static table_metrics make(const std::string& table, int32_t shard,
                            registry& r = process_registry());
};

/// One worker's steps and the time its requests take.
struct worker_metrics {
  counter& steps;
  counter& examples;
  counter& refused_steps; ///< gradients not pushed (not finite) or pushes refused
  counter& recoveries;    ///< waits for a lost peer or a new plan
  histogram& step_seconds;
  histogram& pull_seconds;
  histogram& push_seconds;
  static worker_metrics make(int32_t worker, registry& r = process_registry());
};

/// A listening task's connections.
struct connection_metrics {
  gauge& open;
  counter& refused_strangers; ///< closed: silent too long, or beyond the limit
  static connection_metrics make(const std::string& port, registry& r = process_registry());
};

/// TLS handshakes this process refused (counted where OpenSSL accepts).
counter& tls_handshake_failures();

/// process_start_time_seconds and process_resident_memory_bytes (read
/// from /proc/self/statm at each scrape).
void add_process_metrics(registry& r = process_registry());

} // namespace troupe::metrics
