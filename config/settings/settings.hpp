#pragma once
// The settings of a Troupe run, typed, and their one validation.
// config/node fills them from caf-application.conf and the command line; the
// library API (actors/cluster.hpp) takes them directly. Both call
// check_settings before anything starts, so a value out of range is refused
// the same way whichever door it came through. Messages name the settings by
// their config-file keys (train.batch-size), for users of either door.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "config/settings/embedding_settings.hpp"
#include "gpu/device_spec.hpp"
#include "tensor/core/enum_names.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/wire_precision.hpp"
#include "tensor/data/catalog.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/optim/optimizer.hpp"
#include "tensor/plan/placement.hpp"

namespace troupe {

/// How gradients become updates (train.mode).
enum class update_mode {
  async, ///< every worker's gradient is applied the moment it arrives
  sync,  ///< SyncReplicasOptimizer: each update is the mean of R workers' gradients
  ssp,   ///< async, no worker more than train.staleness steps ahead of the slowest
};

TROUPE_ENUM_NAMES(update_mode, {update_mode::async, "async"}, {update_mode::sync, "sync"},
                  {update_mode::ssp, "ssp"});

/// What the chief does in sync mode when fewer than R workers are alive
/// (train.on-worker-loss).
enum class worker_loss_policy {
  shrink, ///< average over the workers alive
  wait,   ///< hold the step until a worker comes back (cluster.worker-wait-timeout)
};

TROUPE_ENUM_NAMES(worker_loss_policy, {worker_loss_policy::shrink, "shrink"},
                  {worker_loss_policy::wait, "wait"});

/// How many tasks of each job a run has: all that validation needs to know
/// of the cluster.
struct cluster_shape {
  int32_t ps = 1;
  int32_t workers = 1;
};

/// Checkpoints (the [checkpoint] section): TF's Supervisor(logdir,
/// save_model_secs) and Saver(max_to_keep), plus a step interval.
struct checkpoint_settings {
  /// The chief's log directory (relative: to its working directory); empty:
  /// no checkpoints are written or restored.
  std::string log_dir;
  /// Save every this long (0: not by time) ...
  std::chrono::milliseconds save_interval{600000};
  /// ... and/or every this many global steps (0: not by steps); always at the end.
  int64_t save_steps = 0;
  /// Complete checkpoints kept, newest first (TF's max_to_keep).
  int32_t keep = 5;
  /// TensorBoard event files in log_dir (the chief's scalars).
  bool summaries = true;
  /// Serving versions ([export], tensor/export/delta_series.hpp): every
  /// this long, a delta of what changed since the last version, made from
  /// the newest checkpoint (save_interval is lowered to it). 0: none; the
  /// export at the end only.
  std::chrono::milliseconds delta_interval{0};
  /// A full base every this many deltas (and whenever a delta cannot be made).
  int32_t base_every = 10;
  /// Where the versions go; empty: <log_dir>/serving.
  std::string serving_dir;
};

struct training_settings {
  model_kind model = model_kind::softmax;
  update_mode mode = update_mode::async;
  /// ssp: how many steps a worker may run ahead of the slowest (0: lockstep).
  int64_t staleness = 3;
  int64_t batch_size = 100;
  /// The update rule the shards apply, with its learning-rate schedule.
  optimizer_config optimizer = plain_sgd(0.05);
  /// If > 0, workers scale their gradients to this global norm at most.
  double clip_norm = 0;
  /// Async only: each worker pulls the next step's values while it computes
  /// and pushes this one, so its links never idle; every step's values then
  /// miss the worker's own last update (one step staler).
  bool pull_ahead = false;
  /// Async only: each worker reports its steps to the chief this many at a
  /// time, in one message, and holds this many more steps; divides the
  /// chief's messages per step by it (many workers), while the chief's count
  /// of updates lags by up to this many steps a worker.
  int32_t report_every = 1;
  /// How workers' pushes and pulls of dense variables cross the wire (the
  /// shards keep fp32; the chief's reads are always fp32).
  troupe::wire_precision wire_precision = troupe::wire_precision::fp32;
  /// If > 0, workers push only this fraction of each gradient (its largest
  /// magnitudes), keeping the rest for their next push (error feedback).
  double push_topk = 0;
  /// Knobs of the built-in models and the layers of model "custom".
  model_options network;
  /// 0: until stopped (SIGTERM saves and stops; the loader makes it
  /// limits::max_steps).
  int64_t last_step = 6000;
  /// If > 0, train this many passes over the training set instead:
  /// last_step = ceil(epochs * examples / (batch_size * gradients per update)).
  double epochs = 0;
  uint64_t seed = 42;
  /// Where Fashion-MNIST lies: the data when `data` names no files.
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  /// The [data] section: the files, their format, normalisation, sharding.
  data_options data;
  int64_t log_interval = 200;
  /// If > 0, the chief evaluates on the test (or validation) set every this
  /// many global steps while training runs.
  int64_t eval_interval = 0;
  placement_strategy placement = placement_strategy::balanced;
  /// Partitioner rules (parse_partition_rules): the first rule whose pattern
  /// matches a variable's name splits it.
  std::vector<partition_rule> partitioners;
  /// balanced: the most loaded shard holds at most (1 + epsilon) x the mean.
  double placement_epsilon = 0.05;
  /// Where workers compute; worker_devices[i], where given, overrides it for
  /// worker i (CPU and GPU workers may be mixed).
  gpu::device_spec device;
  std::vector<gpu::device_spec> worker_devices;
  /// The share of a GPU's memory each GPU worker may hold.
  double gpu_memory_fraction = 0.9;
  /// worker_batch_sizes[i], where given, overrides batch_size for worker i
  /// (e.g. larger batches on GPU workers).
  std::vector<int64_t> worker_batch_sizes;
  /// Reshuffle each worker's data every epoch (off: fixed order, for checks).
  bool shuffle = true;
  // -- sync mode (SyncReplicasOptimizer's semantics) --
  /// Gradients averaged per update (R); 0 means every worker (R = N).
  int64_t replicas_to_aggregate = 0;
  /// replicas-to-aggregate = "all": R follows the membership, every worker
  /// taking part now (joiners raise it, leavers and lost workers lower it).
  bool replicas_follow_membership = false;
  /// Workers taking part (N); 0 means the number of worker tasks, which is
  /// the only other value allowed. N > R makes N - R of them backups whose
  /// late gradients are dropped.
  int64_t total_num_replicas = 0;
  worker_loss_policy on_worker_loss = worker_loss_policy::shrink;
  checkpoint_settings checkpoint;
  /// The embedding table of lr, fm, mf and deepfm.
  embedding_settings embedding;
};

struct runtime_settings {
  /// How long a node retries to reach a peer before giving up.
  std::chrono::milliseconds connect_timeout{60000};
  /// Every request to another actor fails after this long without a reply.
  std::chrono::milliseconds request_timeout{30000};
  /// The chief aborts training after this many refused updates (NaN gradients).
  int64_t max_refused_steps = 100;
  /// The chief fails when no worker has been alive for this long.
  std::chrono::milliseconds worker_wait_timeout{120000};
  /// Async: a worker that holds granted steps and has reported nothing for
  /// this long loses them to the others (cluster.step-lease-timeout).
  std::chrono::milliseconds step_lease_timeout{60000};
  /// How long the others wait for a lost ps shard or chief to come back
  /// (troupe-node; the library's in-process clusters do not recover).
  std::chrono::milliseconds recovery_timeout{120000};
  /// Tensors between processes on the bulk path (troupe-node, without TLS).
  bool bulk_path = true;
  /// cluster.max-workers: elastic membership. Workers with an index beyond
  /// the listed ones, up to this many, may join a running job; 0: only the
  /// listed workers.
  int32_t max_workers = 0;
};

/// The worker indices a run admits: the listed workers, or more with
/// cluster.max-workers.
inline int32_t worker_capacity(const runtime_settings& runtime, int32_t listed) {
  return runtime.max_workers > listed ? runtime.max_workers : listed;
}

/// The ranges check_settings enforces beyond "positive": far above any real
/// run, low enough that no value in range overflows or exhausts memory by
/// itself.
namespace limits {
constexpr int64_t max_batch_size = 65536;        ///< examples per worker step
constexpr int64_t max_steps = 1'000'000'000'000; ///< last-step, log-interval, ...
constexpr double max_epochs = 1e6;
constexpr std::chrono::milliseconds min_connect_timeout{1000};
constexpr std::chrono::milliseconds min_request_timeout{100};
constexpr std::chrono::milliseconds min_worker_wait_timeout{1000};
constexpr std::chrono::milliseconds min_step_lease_timeout{1000};
constexpr std::chrono::milliseconds min_recovery_timeout{1000};
constexpr std::chrono::milliseconds max_timeout{24LL * 3600 * 1000}; ///< a day
constexpr int64_t max_connections = 65536;                           ///< cluster.max-connections
constexpr int32_t max_checkpoints_kept = 1000;
constexpr int64_t max_staleness = 1'000'000; ///< train.staleness
constexpr int32_t max_workers = 4096;        ///< cluster.max-workers
constexpr int32_t max_report_every = 1024;   ///< train.report-every
constexpr std::chrono::milliseconds min_save_interval{1000};
} // namespace limits

/// Every problem with these settings on a cluster of this shape, each
/// naming the key and the fix (errc::invalid_setting); empty when the run can
/// start. Pure: reads no file (the data directory is the node's to check).
std::vector<failure> check_settings(const training_settings& train, const runtime_settings& runtime,
                                    const cluster_shape& shape);

/// check_settings for the library API: throws troupe_error listing every
/// problem when there is one.
void require_valid_settings(const training_settings& train, const runtime_settings& runtime,
                            const cluster_shape& shape);

/// R: replicas_to_aggregate, or every worker when it is 0.
int32_t replicas_of(const training_settings& train, const cluster_shape& shape);

/// train.epochs as global steps over `examples` training examples:
/// ceil(epochs * examples / examples per update), at least 1. An update
/// takes one batch (the workers' mean batch) in async mode and R in sync.
/// Throws troupe_error when that is more than limits::max_steps.
int64_t last_step_for_epochs(const training_settings& train, const cluster_shape& shape,
                             uint64_t examples);

/// Worker i's device and batch size.
gpu::device_spec device_of(const training_settings& train, int32_t worker);
int64_t batch_size_of(const training_settings& train, int32_t worker);

/// The model options with the run's seed.
model_options model_options_of(const training_settings& train);

/// The closest of `candidates` to `word` (edit distance), or "" if none is
/// close: the "did you mean" of every settings message.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

} // namespace troupe
