#include "actors/metrics/task_metrics.hpp"

#include <chrono>
#include <fstream>
#include <unistd.h>

namespace troupe::metrics {

gauge& readiness(const std::string& task, registry& r) {
  return r.get_gauge("troupe_ready", "1 while the task can do its work (what /readyz answers)",
                     {{"task", task}});
}

gauge& chief_metrics::evaluation(const std::string& metric) {
  return where.get_gauge("troupe_evaluation", "the last evaluation's value of each metric",
                         {{"metric", metric}});
}

chief_metrics chief_metrics::make(registry& r) {
  return {
    r.get_gauge("troupe_global_step", "the run's global step"),
    r.get_gauge("troupe_global_step_timestamp_seconds",
                "unix time at which the global step last moved (a stuck run stops it)"),
    r.get_gauge("troupe_last_step", "train.last-step: the step the run ends at"),
    r.get_counter("troupe_examples_total", "examples behind the applied updates"),
    r.get_gauge("troupe_examples_per_second", "examples per second over the last progress line"),
    r.get_gauge("troupe_loss", "mean training loss over the last progress line"),
    r.get_gauge("troupe_workers", "workers taking part in the run now"),
    r.get_counter("troupe_lost_workers_total", "workers lost during the run"),
    r.get_counter("troupe_expired_leases_total",
                  "async steps taken back from a worker that reported nothing for "
                  "cluster.step-lease-timeout"),
    r.get_counter("troupe_shard_recoveries_total",
                  "times every shard was restored from a checkpoint after losing one"),
    r.get_counter("troupe_checkpoints_total", "checkpoints written"),
    r.get_gauge("troupe_checkpoint_step", "the global step of the last checkpoint written"),
    r.get_gauge("troupe_evaluation_step", "the global step of the last evaluation"),
    r,
  };
}

shard_metrics shard_metrics::make(int32_t shard, registry& r) {
  label_set l{{"shard", std::to_string(shard)}};
  return {
    r.get_counter("troupe_shard_pulls_total", "pull requests answered", l),
    r.get_counter("troupe_shard_pushes_total", "push requests received", l),
    r.get_counter("troupe_shard_row_pulls_total", "pulls that asked for embedding rows", l),
    r.get_counter("troupe_shard_row_pushes_total", "pushes that carried embedding rows", l),
    r.get_counter("troupe_shard_sent_bytes_total", "tensor bytes sent in answers to pulls", l),
    r.get_counter("troupe_shard_received_bytes_total", "tensor bytes received in pushes", l),
    r.get_counter("troupe_shard_pulled_keys_total", "embedding keys looked up", l),
    r.get_counter("troupe_shard_pushed_keys_total", "embedding keys pushed", l),
    r.get_counter("troupe_shard_repeated_pushes_total",
                  "pushes of a step applied already (not applied again)", l),
    r.get_counter("troupe_shard_refused_pushes_total",
                  "pushes refused: no grant for the step, or a wrong grant proof", l),
  };
}

table_metrics table_metrics::make(const std::string& table, int32_t shard, registry& r) {
  label_set l{{"table", table}, {"shard", std::to_string(shard)}};
  return {
    r.get_gauge("troupe_table_rows", "rows of the table held by the shard", l),
    r.get_gauge("troupe_table_bytes", "bytes of the table's rows held by the shard", l),
    r.get_counter("troupe_table_admitted_rows_total", "rows created (admitted)", l),
    r.get_counter("troupe_table_evicted_rows_total",
                  "rows removed by eviction rules or the memory cap", l),
  };
}

worker_metrics worker_metrics::make(int32_t worker, registry& r) {
  label_set l{{"worker", std::to_string(worker)}};
  return {
    r.get_counter("troupe_worker_steps_total", "steps the worker computed and had applied", l),
    r.get_counter("troupe_worker_examples_total", "examples of the worker's applied steps", l),
    r.get_counter("troupe_worker_refused_steps_total",
                  "steps not applied: gradients not finite, or a push refused", l),
    r.get_counter("troupe_worker_recoveries_total",
                  "times the worker waited for a lost peer or a new plan", l),
    r.get_histogram("troupe_worker_step_duration_seconds",
                    "one step: pull, compute, push and its answers", latency_buckets(), l),
    r.get_histogram("troupe_worker_pull_duration_seconds",
                    "a step's pull: from the request to every shard's answer", latency_buckets(),
                    l),
    r.get_histogram("troupe_worker_push_duration_seconds",
                    "a step's push: from the request to every shard's answer", latency_buckets(),
                    l),
  };
}

connection_metrics connection_metrics::make(const std::string& port, registry& r) {
  label_set l{{"port", port}};
  return {
    r.get_gauge("troupe_connections", "connections open on the task's cluster port", l),
    r.get_counter("troupe_refused_connections_total",
                  "connections closed by the task: silent too long, or beyond "
                  "cluster.max-connections (strangers first)",
                  l),
  };
}

counter& tls_handshake_failures() {
  return process_registry().get_counter(
    "troupe_tls_handshake_failures_total",
    "TLS handshakes this process refused (no certificate of the cluster CA, or not TLS)");
}

namespace {

double resident_bytes() {
  std::ifstream statm{"/proc/self/statm"};
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

} // namespace

void add_process_metrics(registry& r) {
  using namespace std::chrono;
  double start = duration<double>(system_clock::now().time_since_epoch()).count();
  r.set_callback_gauge("process_start_time_seconds",
                       "start time of the process since unix epoch in seconds",
                       [start] { return start; });
  r.set_callback_gauge("process_resident_memory_bytes", "resident memory size in bytes",
                       resident_bytes);
}

} // namespace troupe::metrics
