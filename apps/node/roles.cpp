#include "apps/node/roles.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/checkpoint_source.hpp"
#include "actors/cluster.hpp"
#include "apps/node/artifacts.hpp"
#include "apps/node/process.hpp"
#include "apps/node/serving_versions.hpp"

namespace troupe::node {

namespace {

// The chief's (or the whole cluster's) end: the result saved and printed.
int finish_run(const node_setup& setup, training_result& result, const std::string& data_summary) {
  result.data_json = data_summary;
  export_model(setup, result);
  print_final(result);
  return exit_code(result.ended());
}

// The evaluators following this chief's checkpoints get the last one before
// the process ends: the source answers until each has been told that nothing
// newer will come (or has gone), for at most cluster.recovery-timeout.
void release_followers(caf::actor_system& sys, const node_setup& setup,
                       const checkpoint_source_actor& source) {
  if (!source)
    return;
  caf::scoped_actor self{sys};
  self->monitor(source);
  self->send(source, stop_atom::value);
  bool gone = false;
  self->receive([&](const caf::down_msg&) { gone = true; },
                caf::after(setup.runtime.recovery_timeout) >> [] {});
  if (!gone) {
    spdlog::warn("chief: an evaluator did not fetch the last checkpoint within "
                 "cluster.recovery-timeout; ending without it");
    self->send_exit(source, caf::exit_reason::user_shutdown);
  }
}

// Preempted while it waited for the ps tasks: nothing to save, nothing to
// stop; a retryable exit (the job is not done).
int preempted_before_start() {
  training_result preempted;
  preempted.preempted = true;
  preempted.error = "stopped by SIGTERM while waiting for the ps tasks; nothing had started: "
                    "start the job again";
  spdlog::warn("chief: {}", preempted.error);
  print_final(preempted);
  return exit_preempted;
}

// A set too large to keep costs a read of its files at each evaluation:
// the log says so, once.
void say_where_the_evaluation_set_is(const node_setup& setup, const evaluation_set& test) {
  if (!test.held())
    spdlog::info("chief: the evaluation set ({} examples, {} MiB) is larger than "
                 "data.eval-memory-bytes = {}: it is read from its files at each evaluation",
                 test.size(), evaluation_set::bytes_of(*setup.data->evaluation()) >> 20,
                 setup.train.data.eval_memory_bytes);
}

} // namespace

int run_whole_cluster(caf::actor_system& sys, const node_setup& setup) {
  spdlog::info("whole cluster in this process: {} PS shard(s), {} worker(s), model {}, "
               "last_step {}{}",
               setup.cluster.ps.size(), setup.cluster.worker.size(), name_of(setup.train.model),
               setup.train.last_step == limits::max_steps ? std::string("none (until stopped)")
                                                          : std::to_string(setup.train.last_step),
               setup.embedded_defaults ? " (embedded defaults)" : "");
  auto summary = announce_data(setup);
  auto data = training_data_of(*setup.data,
                               static_cast<uint64_t>(setup.train.data.eval_memory_bytes));
  say_where_the_evaluation_set_is(setup, *data.test);
  training_result result;
  serving_versions versions(setup);
  auto cluster = spawn_local_cluster(
    sys, setup.train, setup.runtime, static_cast<int32_t>(setup.cluster.ps.size()),
    static_cast<int32_t>(setup.cluster.worker.size()), data,
    [&result](const training_result& r) { result = r; }, spawn_mode::detached, setup.restore_from);
  {
    sigterm_relay relay{sys, caf::actor_cast<caf::actor>(cluster.chief),
                        caf::make_message(stop_atom::value)};
    wait_for(sys, caf::actor_cast<caf::actor>(cluster.chief));
  }
  versions.finish();
  return finish_run(setup, result, summary);
}

int run_ps(caf::actor_system& sys, const node_setup& setup, const warden_limits& limits,
           const bulk_path& bulk) {
  auto& address = setup.cluster.ps[static_cast<size_t>(setup.task)];
  if (!address_is_free(setup, address))
    return exit_failure;
  // A declared model's chief initialises the shards once a worker's program
  // declared it, which may take until the chief gives up on the workers.
  auto init_wait = setup.runtime.connect_timeout;
  if (setup.train.model == model_kind::declared)
    init_wait += setup.runtime.worker_wait_timeout;
  ps_shard_config config{setup.task, setup.train.optimizer, init_wait,
                         setup.runtime.recovery_timeout};
  if (bulk.on) {
    config.bulk_host = address.host;
    config.bulk_tls = bulk.tls;
  }
  config.chief_host = setup.cluster.chief[0].host;
  config.chief_port = setup.cluster.chief[0].port;
  ps_shard_actor shard = sys.spawn(ps_shard, config); // published without its timer
  if (!publish(sys, setup, shard, address)) {
    // kill: the shard's exit handler ignores anonymous exit messages
    caf::anon_send_exit(shard, caf::exit_reason::kill);
    return exit_failure;
  }
  auto warden = guard_port(setup, limits, address);
  caf::error reason;
  {
    sigterm_relay relay{sys, caf::actor_cast<caf::actor>(shard),
                        caf::make_message(leave_atom::value)};
    reason = wait_for(sys, caf::actor_cast<caf::actor>(shard));
  }
  if (reason && reason != caf::exit_reason::normal)
    spdlog::error("ps shard ended: {}", describe(reason));
  return exit_code_of(reason);
}

int run_chief(caf::actor_system& sys, const node_setup& setup, const warden_limits& limits,
              const bulk_path& bulk, chief_lobby* lobby) {
  // Before it reaches any shard: a second start of the chief touches nothing
  // (a lobby that holds the port found it free).
  if (!(lobby && lobby->held()) && !address_is_free(setup, setup.cluster.chief[0]))
    return exit_failure;
  std::vector<ps_shard_actor> shards;
  if (!connect_shards(sys, setup, shards))
    return sigterm_arrived() ? preempted_before_start() : exit_lost_peer;
  auto summary = announce_data(setup);
  std::shared_ptr<const evaluation_set> test; // none for a declared model: its program evaluates
  if (setup.data) {
    test = std::make_shared<const evaluation_set>(
      setup.data->evaluation(), static_cast<uint64_t>(setup.train.data.eval_memory_bytes));
    say_where_the_evaluation_set_is(setup, *test);
  }
  training_result result;
  checkpoint_source_actor checkpoints;
  if (!setup.train.checkpoint.log_dir.empty())
    checkpoints = spawn_checkpoint_source(sys, setup.train.checkpoint.log_dir);
  auto chief = spawn_chief(
    sys, setup.train, setup.runtime, static_cast<int32_t>(setup.cluster.worker.size()), shards,
    test, [&result](const training_result& r) { result = r; }, spawn_mode::detached,
    setup.restore_from, reconnect_to_peers(sys, setup), bulk_peers_of(setup, bulk), checkpoints);
  if (lobby)
    lobby->close(); // the shards have their init on its way: the port is the chief's now
  if (!publish(sys, setup, chief, setup.cluster.chief[0])) {
    // Lost a race for the port: its shards refuse a second chief's init.
    caf::anon_send_exit(chief, caf::exit_reason::user_shutdown);
    if (checkpoints)
      caf::anon_send_exit(checkpoints, caf::exit_reason::user_shutdown);
    return exit_failure;
  }
  auto warden = guard_port(setup, limits, setup.cluster.chief[0]);
  serving_versions versions(setup);
  {
    sigterm_relay relay{sys, caf::actor_cast<caf::actor>(chief),
                        caf::make_message(stop_atom::value)};
    wait_for(sys, caf::actor_cast<caf::actor>(chief));
  }
  versions.finish();
  release_followers(sys, setup, checkpoints);
  return finish_run(setup, result, summary);
}

int run_worker(caf::actor_system& sys, const node_setup& setup, const bulk_path& bulk,
               const model_wrapper& wrap) {
  // SIGTERM before it joined: nothing to leave.
  auto stopped_early = [] {
    spdlog::info("worker: stopped by SIGTERM before it joined the run");
    return exit_ok;
  };
  if (setup.train.model == model_kind::declared && !wrap) {
    spdlog::error("train.model = declared: a worker's model is declared by its program (the "
                  "troupe Python package: troupe.torch.worker); troupe-node cannot run such a "
                  "worker");
    return exit_config;
  }
  auto chief = connect_to_chief(sys, setup, setup.runtime.connect_timeout);
  if (!chief) {
    if (sigterm_arrived())
      return stopped_early();
    spdlog::error("{}", describe(chief.error()));
    return exit_lost_peer;
  }
  std::vector<ps_shard_actor> shards;
  if (!connect_shards(sys, setup, shards))
    return sigterm_arrived() ? stopped_early() : exit_lost_peer;
  // Not published: nobody connects to a worker; the chief reaches it over the
  // connection the worker opened (its ready request).
  auto w = spawn_worker(sys, setup.task, static_cast<int32_t>(setup.cluster.worker.size()),
                        setup.train, setup.runtime, *chief, shards,
                        setup.data ? setup.data->train : nullptr, spawn_mode::detached,
                        reconnect_to_peers(sys, setup), bulk_peers_of(setup, bulk), wrap);
  sigterm_relay relay{sys, caf::actor_cast<caf::actor>(w), caf::make_message(leave_atom::value)};
  return exit_code_of(wait_for(sys, caf::actor_cast<caf::actor>(w)));
}

} // namespace troupe::node
