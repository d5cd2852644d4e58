#pragma once
// The settings a Troupe cluster runs with, as plain values. config/node_config
// fills them from caf-application.conf and the command line; the library API
// (actors/cluster.hpp) takes them directly.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/nn/model.hpp"
#include "tensor/optim/optimizer.hpp"

namespace troupe {

struct host_port {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

/// The jobs of a cluster and the address of each task (TF's ClusterSpec).
struct cluster_spec {
  std::vector<host_port> chief;
  std::vector<host_port> ps;
  std::vector<host_port> worker;
};

struct training_settings {
  std::string model = "softmax";
  std::string mode = "async";
  int64_t batch_size = 100;
  /// The update rule the shards apply, with its learning-rate schedule.
  optimizer_config optimizer = plain_sgd(0.05);
  /// If > 0, workers scale their gradients to this global norm at most.
  double clip_norm = 0;
  /// Knobs of the built-in models and the layers of model "custom".
  model_options network;
  int64_t last_step = 6000;
  /// If > 0, train this many passes over the training set instead:
  /// last_step = ceil(epochs * examples / (batch_size * gradients per update)).
  double epochs = 0;
  uint64_t seed = 42;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t log_interval = 200;
  /// round_robin (TF's default), greedy_bytes, or balanced (splits variables).
  std::string placement = "balanced";
  /// Partitioner rules, "PATTERN KIND key=value ..." (actors/placement.hpp):
  /// the first rule whose pattern matches a variable's name splits it.
  std::vector<std::string> partitioners;
  /// balanced: the most loaded shard holds at most (1 + epsilon) x the mean.
  double placement_epsilon = 0.05;
  /// Where workers compute: "cpu" or "cuda:N"; worker_devices[i], where
  /// given, overrides it for worker i (CPU and GPU workers may be mixed).
  std::string device = "cpu";
  std::vector<std::string> worker_devices;
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
  /// Workers taking part (N); 0 means the number of worker tasks. N > R
  /// makes N - R of them backups whose late gradients are dropped.
  int64_t total_num_replicas = 0;
  /// What the chief does when fewer than R workers are alive:
  /// "shrink" aggregates over the workers alive; "wait" holds the step until
  /// a worker comes back (at most cluster.worker-wait-timeout).
  std::string on_worker_loss = "shrink";
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
};

/// Worker i's device and batch size.
std::string device_of(const training_settings& s, int32_t worker);
int64_t batch_size_of(const training_settings& s, int32_t worker);

/// The model options with the run's seed.
model_options model_options_of(const training_settings& s);

} // namespace troupe
