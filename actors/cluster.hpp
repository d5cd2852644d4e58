#pragma once
// The library API for composing Troupe topologies: spawn shards, a chief and
// workers in one actor system, or hand them remote handles to span nodes.
// apps/troupe_node.cpp and apps/custom_topology.cpp are both built on it.
//
//   caf::actor_system_config cfg;
//   troupe::register_protocol(cfg);            // every node, before the system
//   caf::actor_system sys{cfg};
//   auto data = troupe::load_training_data(settings);
//   auto run = troupe::spawn_local_cluster(sys, settings, runtime, 2, 2, data,
//                                          [](const troupe::training_result& r) { ... });
//   // the actors stop by themselves after last_step; the system's destructor waits.
#include <functional>
#include <memory>
#include <vector>

#include "actors/chief/chief.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/ps/ps_shard.hpp"
#include "actors/worker/worker.hpp"
#include "config/settings/settings.hpp"

namespace troupe {

/// Detached actors get their own thread (production: compute must not block
/// CAF's scheduler); cooperative ones run on the scheduler (deterministic tests).
enum class spawn_mode { detached, cooperative };

/// What a run trains and evaluates on: workers stream their shares of
/// `train` (stream.hpp); the chief evaluates on `test` (evaluation_set.hpp:
/// held in memory, or read from its files at each evaluation).
struct training_data {
  std::shared_ptr<const data_split> train;
  std::shared_ptr<const evaluation_set> test;
  training_data() = default;
  /// Sets made in memory (tests, programs with their own data); not checked.
  training_data(std::shared_ptr<const dataset> train_set, std::shared_ptr<const dataset> test_set);
  training_data(std::shared_ptr<const data_split> train_set,
                std::shared_ptr<const evaluation_set> test_set);
};

/// The catalogued sets (catalog_data), with the evaluation set (validation,
/// else test) loaded into memory when it takes at most `eval_memory_bytes`
/// (data.eval-memory-bytes), else read from its files at each evaluation.
training_data training_data_of(const data_catalog& catalog,
                               uint64_t eval_memory_bytes = default_eval_memory_bytes);

/// settings.data's files (Fashion-MNIST from settings.data_dir when it names
/// none), catalogued and checked; throws data_error naming the problem.
training_data load_training_data(const training_settings& settings);

/// bulk_host: the shard's own address, where it listens for the bulk path
/// of workers in other processes (docs/protocol.md); empty: none. bulk_tls:
/// mutual TLS on it (null: plain TCP).
ps_shard_actor spawn_ps_shard(caf::actor_system& sys, int32_t index,
                              const training_settings& settings,
                              spawn_mode mode = spawn_mode::cooperative, std::string bulk_host = {},
                              std::shared_ptr<const bulk::tls_context> bulk_tls = nullptr);

// spawn_chief, spawn_worker and spawn_local_cluster check the settings first
// (check_settings, the config file's checks) and throw troupe_error listing
// every problem before they spawn anything; spawn_ps_shard throws on an
// optimizer it cannot build.

/// num_workers: N, the worker tasks of the run (R defaults to it in sync mode).
chief_actor spawn_chief(caf::actor_system& sys, const training_settings& settings,
                        const runtime_settings& runtime, int32_t num_workers,
                        std::vector<ps_shard_actor> shards,
                        std::shared_ptr<const evaluation_set> test,
                        std::function<void(const training_result&)> on_finish,
                        spawn_mode mode = spawn_mode::detached,
                        std::shared_ptr<const checkpoint_reader> restore_from = nullptr,
                        peer_reconnect reconnect = {}, bulk_peers bulk = {},
                        checkpoint_source_actor checkpoints = {});

/// Worker `index` of num_workers (or beyond, up to runtime.max_workers:
/// elastic membership); the chief's plan says its share of `train`. bulk (a host per shard, or none): where the worker opens the
/// bulk path to each shard in another process that offers one, and its TLS.
/// wrap (empty: none): the model the worker computes with in place of the
/// settings' (model_wrapper).
worker_actor spawn_worker(caf::actor_system& sys, int32_t index, int32_t num_workers,
                          const training_settings& settings, const runtime_settings& runtime,
                          chief_actor chief, std::vector<ps_shard_actor> shards,
                          std::shared_ptr<const data_split> train,
                          spawn_mode mode = spawn_mode::detached, peer_reconnect reconnect = {},
                          bulk_peers bulk = {}, const model_wrapper& wrap = {});

struct local_cluster {
  std::vector<ps_shard_actor> shards;
  chief_actor chief;
  std::vector<worker_actor> workers;
};

/// The whole cluster in one process: shards, chief and workers.
local_cluster spawn_local_cluster(caf::actor_system& sys, const training_settings& settings,
                                  const runtime_settings& runtime, int32_t num_shards,
                                  int32_t num_workers, const training_data& data,
                                  std::function<void(const training_result&)> on_finish,
                                  spawn_mode mode = spawn_mode::detached,
                                  std::shared_ptr<const checkpoint_reader> restore_from = nullptr);

} // namespace troupe
