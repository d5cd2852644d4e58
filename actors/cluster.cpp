#include "actors/cluster.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include "gpu/backend.hpp"
#include "tensor/core/error.hpp"

namespace troupe {

namespace {

template <class Handle, class Fun, class... Ts>
Handle spawn_as(caf::actor_system& sys, spawn_mode mode, Fun fun, Ts&&... xs) {
  if (mode == spawn_mode::detached)
    return sys.spawn<caf::detached>(fun, std::forward<Ts>(xs)...);
  return sys.spawn(fun, std::forward<Ts>(xs)...);
}

} // namespace

training_data::training_data(std::shared_ptr<const dataset> train_set,
                             std::shared_ptr<const dataset> test_set)
  : train(split_in_memory(std::move(train_set), "training set")),
    test(std::make_shared<const evaluation_set>(std::move(test_set))) {
}

training_data::training_data(std::shared_ptr<const data_split> train_set,
                             std::shared_ptr<const evaluation_set> test_set)
  : train(std::move(train_set)), test(std::move(test_set)) {
}

training_data training_data_of(const data_catalog& catalog, uint64_t eval_memory_bytes) {
  return {catalog.train,
          std::make_shared<const evaluation_set>(catalog.evaluation(), eval_memory_bytes)};
}

training_data load_training_data(const training_settings& settings) {
  return training_data_of(catalog_data(settings.data, settings.data_dir),
                          static_cast<uint64_t>(settings.data.eval_memory_bytes));
}

ps_shard_actor spawn_ps_shard(caf::actor_system& sys, int32_t index,
                              const training_settings& settings, spawn_mode mode,
                              std::string bulk_host,
                              std::shared_ptr<const bulk::tls_context> bulk_tls) {
  ps_shard_config config;
  config.index = index;
  config.optimizer = settings.optimizer;
  config.bulk_host = std::move(bulk_host);
  config.bulk_tls = std::move(bulk_tls);
  return spawn_as<ps_shard_actor>(sys, mode, ps_shard, config);
}

chief_actor spawn_chief(caf::actor_system& sys, const training_settings& settings,
                        const runtime_settings& runtime, int32_t num_workers,
                        std::vector<ps_shard_actor> shards,
                        std::shared_ptr<const evaluation_set> test,
                        std::function<void(const training_result&)> on_finish, spawn_mode mode,
                        std::shared_ptr<const checkpoint_reader> restore_from,
                        peer_reconnect reconnect, bulk_peers bulk,
                        checkpoint_source_actor checkpoints) {
  cluster_shape shape{static_cast<int32_t>(shards.size()), num_workers};
  require_valid_settings(settings, runtime, shape);
  chief_config config{settings, runtime, num_workers, replicas_of(settings, shape),
                      mode == spawn_mode::detached};
  // A declared model is its first worker's to declare.
  std::shared_ptr<model> net;
  if (settings.model != model_kind::declared)
    net = make_model(settings.model, model_options_of(settings));
  chief_links links{std::move(shards),    std::move(net),          std::move(test),
                    std::move(on_finish), std::move(restore_from), std::move(reconnect),
                    std::move(bulk),      std::move(checkpoints)};
  return spawn_as<chief_actor>(sys, mode, chief, std::move(config), std::move(links));
}

worker_actor spawn_worker(caf::actor_system& sys, int32_t index, int32_t num_workers,
                          const training_settings& settings, const runtime_settings& runtime,
                          chief_actor chief_handle, std::vector<ps_shard_actor> shards,
                          std::shared_ptr<const data_split> train, spawn_mode mode,
                          peer_reconnect reconnect, bulk_peers bulk, const model_wrapper& wrap) {
  require_valid_settings(settings, runtime, {static_cast<int32_t>(shards.size()), num_workers});
  auto capacity = worker_capacity(runtime, num_workers);
  if (index < 0 || index >= capacity)
    throw troupe_error("worker index " + std::to_string(index) + " outside 0.."
                       + std::to_string(capacity - 1)
                       + (capacity == num_workers ? " (runtime.max_workers admits more)" : ""));
  worker_config config;
  config.index = index;
  config.num_workers = num_workers;
  config.batch_size = batch_size_of(settings, index);
  config.seed = settings.seed;
  config.log_interval = settings.log_interval;
  config.request_timeout = runtime.request_timeout;
  config.ready_timeout = runtime.connect_timeout;
  config.step_timeout = runtime.request_timeout + runtime.worker_wait_timeout;
  config.shuffle = settings.shuffle;
  config.shuffle_buffer = static_cast<size_t>(settings.data.shuffle_buffer);
  config.prefetch = static_cast<size_t>(settings.data.prefetch);
  config.clip_norm = settings.clip_norm;
  config.pull_ahead = settings.pull_ahead;
  config.wire_precision = settings.wire_precision;
  config.push_topk = settings.push_topk;
  config.max_norm = settings.embedding.max_norm;
  config.recovery_timeout = runtime.recovery_timeout;
  // Each worker draws its own dropout masks.
  auto options = model_options_of(settings);
  options.seed += 7919u * static_cast<uint64_t>(index + 1);
  auto device = device_of(settings, index);
  if (settings.model == model_kind::declared) { // the program's model, computing in it
    if (!wrap)
      throw troupe_error("train.model = declared: a worker's model is declared by its program "
                         "(the troupe Python package); troupe-node cannot run such a worker");
    worker_links links{std::move(chief_handle), std::move(shards),    wrap(nullptr),
                       std::move(train),        std::move(reconnect), std::move(bulk)};
    return spawn_as<worker_actor>(sys, mode, worker, config, std::move(links));
  }
  std::shared_ptr<model> net = gpu::make_device_model(make_model(settings.model, options), device,
                                                      {settings.gpu_memory_fraction});
  if (device.type == gpu::device_spec::kind::cuda)
    spdlog::info("worker:{}: computing on {}, memory share {:.2f}, batch {}", index,
                 gpu::describe_device(device), settings.gpu_memory_fraction, config.batch_size);
  else
    spdlog::info("worker:{}: computing on cpu, batch {}", index, config.batch_size);
  if (wrap)
    net = wrap(std::move(net));
  worker_links links{std::move(chief_handle), std::move(shards),    std::move(net),
                     std::move(train),        std::move(reconnect), std::move(bulk)};
  return spawn_as<worker_actor>(sys, mode, worker, config, std::move(links));
}

local_cluster spawn_local_cluster(caf::actor_system& sys, const training_settings& settings,
                                  const runtime_settings& runtime, int32_t num_shards,
                                  int32_t num_workers, const training_data& data,
                                  std::function<void(const training_result&)> on_finish,
                                  spawn_mode mode,
                                  std::shared_ptr<const checkpoint_reader> restore_from) {
  // Settings the chief would refuse are refused before any shard exists.
  require_valid_settings(settings, runtime, {num_shards, num_workers});
  local_cluster out;
  // Shards only react to messages: they never block, so they stay cooperative.
  // (So does the chief's token queue in sync mode.)
  for (int32_t s = 0; s < num_shards; ++s)
    out.shards.push_back(spawn_ps_shard(sys, s, settings, spawn_mode::cooperative));
  out.chief = spawn_chief(sys, settings, runtime, num_workers, out.shards, data.test,
                          std::move(on_finish), mode, std::move(restore_from));
  for (int32_t w = 0; w < num_workers; ++w)
    out.workers.push_back(spawn_worker(sys, w, num_workers, settings, runtime, out.chief,
                                       out.shards, data.train, mode));
  return out;
}

} // namespace troupe
