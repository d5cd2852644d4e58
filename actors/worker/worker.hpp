#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "actors/protocol/protocol.hpp"
#include "tensor/data/dataset.hpp"
#include "tensor/nn/model.hpp"

namespace troupe {

struct worker_config {
  int32_t index = 0;
  int32_t num_workers = 1;
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
  double clip_norm = 0;  ///< > 0: clip gradients to this global norm before pushing
};

/// What a worker talks to and computes on.
struct worker_links {
  chief_actor chief;
  std::vector<ps_shard_actor> shards;
  std::shared_ptr<model> net;
  std::shared_ptr<const dataset> train;
};

/// What one shard holds for this worker: slice names, and indices into the
/// plan's slices.
struct shard_slice {
  std::vector<std::string> names;
  std::vector<size_t> indices;
};

struct worker_state {
  static inline const char* name = "troupe.worker";
  std::string label;  // "worker:0"
  worker_config config;
  worker_links links;
  std::optional<shard_sampler> sampler;
  std::vector<shard_slice> slices;  // one per shard
  training_plan plan;
  std::vector<variable_slice> plan_slices;  // plan.variables as slices of the model
  step_coordinator_actor coordinator; // chief (async) or token queue (sync)
  bool report_to_chief = false;       // the next report is a non-finite gradient
  // Parameters and gradients: the model's own pinned buffers when it offers
  // them (a GPU model), so pulled slices land there and pushed ones are cut
  // from there without another host copy; these tensors otherwise.
  host_staging* staging = nullptr;
  std::vector<tensor> params;
  std::vector<tensor> grads;
  batch current;
  step_report report;               // of the step in flight / last finished
  size_t pending = 0;               // replies still expected in this phase
  int64_t local_step = 0;
  // progress line bookkeeping
  std::chrono::steady_clock::time_point interval_start;
  uint64_t interval_examples = 0;
  double interval_loss = 0;
  uint64_t interval_correct = 0;
};

/// A worker: asks for a step (the chief in async mode, the token queue in
/// sync mode), pulls from every shard in parallel, computes gradients on its
/// data shard, pushes them in parallel, reports, and repeats until told to
/// stop. Spawn it detached: compute blocks.
worker_actor::behavior_type worker(worker_actor::stateful_pointer<worker_state> self,
                                   worker_config config, worker_links links);

} // namespace troupe
