#pragma once
// A worker: asks for a step (the chief in async mode, the token queue in
// sync mode), pulls from every shard in parallel, computes gradients on its
// share of the data, checks and clips them, pushes them in parallel,
// reports, and repeats until told to stop. The actor holds the run's side
// (plan, grants, reports, recovery, sender checks) and computes the model;
// its parts do the rest: worker_step (the step: its batch and keys, pull,
// push and settling, through one shard_exchange), step_lease (the steps
// held), report_batch, recovery_wait (a lost peer).
// Spawn it detached: compute and the bulk path block.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "actors/common/progress_meter.hpp"
#include "actors/metrics/task_metrics.hpp"
#include "actors/net/bulk_client.hpp"
#include "actors/net/report_channel.hpp"
#include "actors/protocol/peer_reconnect.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/worker/recovery_wait.hpp"
#include "actors/worker/report_batch.hpp"
#include "actors/worker/step_lease.hpp"
#include "actors/worker/worker_step.hpp"
#include "tensor/data/stream.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/plan/training_plan.hpp"

namespace troupe {

/// The worker as implemented: its published interface plus the message
/// that starts its next step, the one that makes it look for a new chief and
/// its helper's answer (the chief found, or why not), its recovery deadline
/// and SIGTERM, and its report channel's grants or loss.
using worker_impl = worker_actor::extend<
  caf::reacts_to<run_atom, uint64_t>, caf::reacts_to<rejoin_atom>,
  caf::reacts_to<rejoin_atom, chief_actor>, caf::reacts_to<rejoin_atom, std::string>,
  caf::reacts_to<tick_atom>, caf::reacts_to<leave_atom>,
  // its report channel (key, request): the grants answering a batch
  caf::reacts_to<granted_atom, uint64_t, uint64_t, std::vector<step_grant>>,
  // its report channel (key): lost, and why
  caf::reacts_to<granted_atom, uint64_t, std::string>>;

struct worker_config {
  int32_t index = 0;
  int32_t num_workers = 1; ///< the listed workers (its index may lie beyond: elastic membership)
  int64_t batch_size = 100;
  uint64_t seed = 42;
  int64_t log_interval = 200;
  std::chrono::milliseconds request_timeout{30000};
  /// How long to wait for the chief to finish initialising the variables.
  std::chrono::milliseconds ready_timeout{60000};
  /// How long to wait for the next step: in sync mode a token can take as
  /// long as the slowest worker (or a lost worker's restart).
  std::chrono::milliseconds step_timeout{150000};
  bool shuffle = true;
  size_t shuffle_buffer = 0; ///< examples (data.shuffle-buffer; 0: automatic)
  size_t prefetch = 4;       ///< batches read ahead (data.prefetch)
  double clip_norm = 0;      ///< > 0: clip gradients to this global norm before pushing
  bool pull_ahead = false;   ///< train.pull-ahead: push s, then pull s+2, while s+1 computes
  /// train.wire-precision: how its pushes and pulls of dense variables travel
  troupe::wire_precision wire_precision = troupe::wire_precision::fp32;
  double push_topk = 0; ///< train.push-topk: > 0, the fraction of each gradient a push sends
  double max_norm = 0;  ///< embedding.max-norm: looked-up rows clipped to it (0: off)
  /// How long to wait for a lost shard or chief to come back (used only when
  /// the links can reconnect).
  std::chrono::milliseconds recovery_timeout{120000};
};

/// What a worker talks to and computes on.
struct worker_links {
  chief_actor chief;
  std::vector<ps_shard_actor> shards;
  std::shared_ptr<model> net;
  std::shared_ptr<const data_split> train;
  /// Reaching a peer again after it was lost (troupe-node sets both; empty:
  /// a lost peer ends the worker). They block: the worker is detached.
  peer_reconnect reconnect;
  /// Each shard's host (and the TLS to use), for the bulk path to shards in
  /// other processes (troupe-node); empty: pulls and pushes go over BASP.
  bulk_peers bulk;
};

struct worker_state {
  static inline const char* name = "troupe.worker";
  std::string label; // "worker:0"
  worker_config config;
  worker_links links;
  stream_options data_options;          // its share as the first plan says
  std::unique_ptr<example_stream> data; // this worker's share, read ahead (from the first plan)
  bool leaving = false;                 // SIGTERM: leave after the step under way
  bool gave_back = false;               // data.follow: steps given back, to ask for again
  std::optional<slice_router> router;   // the chief's plan, checked against the model
  step_coordinator_actor coordinator;   // chief (async) or token queue (sync)
  step_lease lease;
  report_batch reports; // train.report-every: finished steps not yet reported
  int64_t local_step = 0;
  std::optional<metrics::worker_metrics> metrics; // its figures in /metrics
  progress_meter progress{0};
  recovery_wait recovery; // for a new plan; voids what was in flight before
  // Declared last: the step goes first, then the exchange (its thread
  // stops), then the message path it used.
  std::unique_ptr<message_path> basp;
  std::unique_ptr<shard_exchange> exchange;
  std::unique_ptr<worker_step> step; // the step under way: its data, pull, push and report
  // Async, a chief in another process: the report channel, the key its
  // messages to this worker carry, and its requests not yet answered with
  // the recovery generation each was asked in (worker_reports.cpp).
  std::unique_ptr<report_link> report_line;
  uint64_t report_key = 0;
  std::map<uint64_t, uint64_t> asked_on_line;
};

worker_impl::behavior_type worker(worker_impl::stateful_pointer<worker_state> self,
                                  worker_config config, worker_links links);

} // namespace troupe
