#pragma once
// The chief (TF's Supervisor): initialises every variable exactly once,
// answers ready requests once that is done (a response promise, no polling),
// advances global steps up to last_step (step_coordination: async grants or
// sync's token queue), logs progress, then has the final model evaluated,
// reports through on_finish and stops every shard and worker. The decisions
// are plain classes beside it: grant_desk (async steps), replica_policy
// (sync losses), checkpoint_save, progress_meter, run_report.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <caf/actor_addr.hpp>

#include "actors/chief/checkpoint_save.hpp"
#include "actors/chief/checkpoint_schedule.hpp"
#include "actors/chief/evaluator.hpp"
#include "actors/chief/run_metrics.hpp"
#include "actors/chief/run_report.hpp"
#include "actors/chief/worker_membership.hpp"
#include "actors/chief/worker_roster.hpp"
#include "actors/common/progress_meter.hpp"
#include "actors/net/bulk_client.hpp"
#include "actors/net/report_channel.hpp"
#include "actors/protocol/grant_proof.hpp"
#include "actors/protocol/peer_reconnect.hpp"
#include "actors/protocol/protocol.hpp"
#include "config/settings/settings.hpp"
#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/data/evaluation_set.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/plan/training_plan.hpp"
#include "tensor/summary/event_file.hpp"

namespace troupe {

/// The chief as implemented: its published interface plus its watchdog,
/// its checkpoint writer's report (step, ok, the checkpoint's path or the
/// error, bytes, seconds), its shard reconnector's answer, and `stop` from
/// its own process (SIGTERM: save a checkpoint, then stop the cluster).
using chief_impl = chief_actor::extend<
  caf::reacts_to<tick_atom>,
  caf::reacts_to<saved_atom, int64_t, bool, std::string, uint64_t, double>,
  caf::reacts_to<shard_back_atom, int32_t, ps_shard_actor>,
  caf::reacts_to<shard_back_atom, int32_t, std::string>, caf::reacts_to<stop_atom>,
  // a report channel's connection (key, request): a worker's batch
  caf::reacts_to<relayed_atom, uint64_t, uint64_t, std::vector<step_report>>>;

namespace chief_run {
class step_coordination;
}

struct chief_config {
  training_settings train;
  runtime_settings runtime;
  int32_t num_workers = 1;         ///< N
  int32_t replicas = 1;            ///< sync: R as configured
  bool detached_evaluation = true; ///< evaluate and write checkpoints on threads of their own
                                   ///< (false in deterministic tests)
};

struct chief_links {
  std::vector<ps_shard_actor> shards;
  std::shared_ptr<model> net;                 ///< the placement's and evaluation's model
  std::shared_ptr<const evaluation_set> test; ///< evaluated during and at the end
  std::function<void(const training_result&)> on_finish;
  /// The checkpoint to start from (null: initialise from the seed).
  std::shared_ptr<const checkpoint_reader> restore_from;
  /// Reaching a lost shard again (troupe-node; empty: a lost shard ends the run).
  peer_reconnect reconnect;
  /// Each shard's host (and the TLS to use), for reading values on the bulk
  /// path from shards in other processes (troupe-node); empty: over BASP.
  bulk_peers bulk;
  /// Where evaluators read the checkpoints (troupe-node; null: nowhere).
  checkpoint_source_actor checkpoints;
};

struct chief_state {
  static inline const char* name = "troupe.chief";
  using clock = std::chrono::steady_clock;
  enum class phase { initializing, training, finishing, done };

  chief_config config;
  chief_links links;
  phase now = phase::initializing;
  std::optional<slice_router> router; // the plan, once placed
  std::vector<table_setup> tables;    // the model's embedding tables, as every shard holds them
  step_coordinator_actor coordinator; // whom workers report to
  std::vector<std::pair<int32_t, caf::typed_response_promise<training_plan>>> waiting_ready;
  run_id run = 0;         // this run's identity, drawn at start
  grant_key signing_key;  // signs its grants; the shards check them
  step_receipts receipts; // what an applied step's report must show: every shard's receipt
  std::optional<worker_roster<caf::actor_addr>> roster; // who holds each worker index
  std::optional<worker_membership> membership;          // who reads the data: the shares
  uint64_t left_workers = 0;                            // ended normally while training
  std::vector<std::string> dropped_workers;             // each one dropped, and why
  std::shared_ptr<chief_run::step_coordination> steps;  // async or sync, by train.mode
  // accounting
  progress_meter progress{0};
  uint64_t examples = 0;
  run_metrics metrics;                      // what /metrics shows of the run
  clock::time_point created;                // wall_seconds counts from here
  std::optional<clock::time_point> started; // examples/s counts from the first step
  clock::time_point last_worker_seen;
  // checkpoints
  int64_t first_step = 0;                          // restored from a checkpoint, else 0
  std::optional<checkpoint_schedule> schedule;     // when checkpoint.log-dir is set
  checkpoint_save save;                            // the save under way, and the last one saved
  clock::time_point save_began;                    // of the save under way
  std::vector<snapshot_index> save_copies;         // per shard, of the save under way
  std::function<void()> after_final_save;          // the end of the run, once the last save is done
  std::map<int32_t, data_position> data_positions; // each worker's, from its reports
  // evaluation while training (train.eval-interval)
  int64_t next_evaluation = 0;            // the global step of the next one (0: off)
  bool evaluating = false;                // one at a time
  std::shared_ptr<model> eval_net;        // its own scratch buffers: the final one may overlap
  std::shared_ptr<model> progressive_net; // data.follow: scores the stream's next file
  std::vector<evaluation_point> evaluations;
  std::map<std::string, double> reported; // the workers' programs' metrics (w.report)
  std::unique_ptr<event_file> events;     // TensorBoard scalars (checkpoint.summaries)
  // recovery from a lost shard
  struct shard_recovery {
    int32_t shard = 0;
    int64_t lost_at = 0; // global step
    clock::time_point since;
  };
  std::optional<shard_recovery> recovering;
  bool replan_workers = false; // after the restore: send every live worker the new plan
  // Restored at or past last_step: nothing to train, but every worker is
  // told to stop as it connects (its task then exits 0, not after a timeout).
  bool nothing_to_train = false;
  // shutdown: quit once every shard has gone down after the stop (or at the next tick)
  size_t shards_down = 0;
  caf::error exit_reason;
  // Async, workers in other processes: their reports and grants on
  // connections of their own (report_relay.cpp).
  std::unique_ptr<report_server> report_desk;
  uint64_t admissions = 0;                  // admissions so far: each one's number
  std::map<int32_t, uint64_t> admission_of; // of each held worker index
  struct relay_target {
    uint64_t key = 0; // the connection
    uint64_t request = 0;
    int32_t worker = -1;
  };
  std::optional<relay_target> relaying; // while a relayed batch is settled
};

chief_impl::behavior_type chief(chief_impl::stateful_pointer<chief_state> self, chief_config config,
                                chief_links links);

} // namespace troupe
