#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/protocol/protocol.hpp"
#include "actors/chief/step_budget.hpp"
#include "config/settings/settings.hpp"
#include "tensor/data/dataset.hpp"
#include "tensor/nn/model.hpp"

namespace troupe {

/// What a finished (or failed) training run reports.
struct training_result {
  bool ok = false;
  std::string error;        // why training failed, if it did
  int64_t global_step = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  double examples_per_sec = 0;
  double wall_seconds = 0;
  uint64_t examples = 0;
  int64_t refused_steps = 0;
  uint64_t dropped_gradients = 0;  // sync: gradients not applied (stale, refused)
  /// Per-shard traffic and max / mean of bytes in + out (0 if unknown).
  std::vector<shard_traffic> traffic;
  double ps_imbalance = 0;
  std::string traffic_json() const;  // {"event":"traffic",...}, one line
  update_mode mode = update_mode::async;
  /// The trained model: every variable, in model order (empty on failure).
  std::vector<std::string> variables;
  std::vector<tensor> values;
  std::string to_json() const;  // the final line the node prints
};

struct chief_config {
  int64_t last_step = training_settings{}.last_step;
  uint64_t seed = training_settings{}.seed;
  int64_t log_interval = training_settings{}.log_interval;
  update_mode mode = update_mode::async;
  placement_strategy placement = placement_strategy::balanced;
  double placement_epsilon = 0.05;    // balanced: most loaded shard <= (1 + eps) x mean
  std::vector<partition_rule> partitioners;  // per variable-name pattern; first match wins
  int32_t num_workers = 1;            // N
  int32_t replicas_to_aggregate = 1;  // sync: R
  worker_loss_policy on_worker_loss = worker_loss_policy::shrink;
  runtime_settings runtime;
};

struct chief_links {
  std::vector<ps_shard_actor> shards;
  std::shared_ptr<model> net;
  std::shared_ptr<const dataset> test;           // evaluated at the end
  std::function<void(const training_result&)> on_finish;
};

struct chief_state {
  static inline const char* name = "troupe.chief";
  chief_config config;
  chief_links links;
  std::optional<step_budget> budget;   // async
  token_queue_actor token_queue;       // sync
  int64_t sync_step = 0;               // sync: global step reached
  int32_t replicas = 0;                // sync: R in force (shrinks on loss)
  std::set<int32_t> lost;              // sync: workers lost and not back
  std::optional<std::chrono::steady_clock::time_point> short_since; // sync, wait
  training_plan plan;
  bool initialized = false;
  bool finishing = false;
  bool done = false;              // result reported, stop sent
  size_t shards_down = 0;         // after stop: quit once every shard is gone
  caf::error exit_reason;         // what the chief quits with then
  std::vector<caf::typed_response_promise<training_plan>> waiting_ready;
  std::map<int32_t, caf::actor_addr> workers;    // live workers by index
  // Workers that asked for a step while every remaining step was granted to
  // others: answered when a step is revoked (and re-granted) or at the end.
  std::map<int32_t, caf::typed_response_promise<step_grant>> idle;
  std::chrono::steady_clock::time_point created; // spawn: wall_seconds counts from here
  std::chrono::steady_clock::time_point started; // first grant: examples/s counts from here
  bool any_grant = false;
  uint64_t examples = 0;
  int64_t refused = 0;
  uint64_t dropped = 0;
  std::chrono::steady_clock::time_point last_worker_seen;
  // progress line bookkeeping
  std::chrono::steady_clock::time_point interval_start;
  uint64_t interval_examples = 0;
  uint64_t interval_correct = 0;
  double interval_loss = 0;
  int64_t interval_steps = 0;
  double interval_straggler_ms = 0;
  uint64_t interval_dropped = 0;
  uint64_t interval_tokens = 0;
};

/// The chief: initialises every variable exactly once with the seed, answers
/// ready requests once that is done (a response promise, no polling), grants
/// global steps up to last_step (async) or runs the token queue and applies
/// the worker-loss policy (sync), logs progress, then evaluates the final
/// model, reports through on_finish and stops every shard and worker.
chief_actor::behavior_type chief(chief_actor::stateful_pointer<chief_state> self,
                                 chief_config config, chief_links links);

} // namespace troupe
